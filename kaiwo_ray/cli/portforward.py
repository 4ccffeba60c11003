"""`kaiwo port-forward service/NAME [LOCAL:]REMOTE...`: local ports to one of the workload's pods."""

from __future__ import annotations

import argparse
import contextlib
import socket
import sys
import threading
from typing import TYPE_CHECKING

from kaiwo_ray.cli.access import add_cluster_arguments, connect
from kaiwo_ray.cli.errors import UsageError

if TYPE_CHECKING:
    from kaiwo_ray.cli.api import Api

EXAMPLES = """examples:
  kaiwo port-forward service/my-llm 8000             # localhost:8000 -> pod port 8000
  kaiwo port-forward job/my-training 8265:8265       # the Ray dashboard of a Ray job
  kaiwo port-forward service/my-llm :8000            # a free local port, printed
Ctrl-C stops forwarding.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("workload", metavar="TYPE/NAME", help="job/NAME or service/NAME")
    parser.add_argument("ports", nargs="+", metavar="[LOCAL:]REMOTE", help="port pairs")
    parser.add_argument("--address", default="127.0.0.1", help="local address to listen on (default 127.0.0.1)")
    parser.add_argument("--pod", help="pod name (default: the first running one, Ray head first)")
    add_cluster_arguments(parser)


def parse_ports(words: list[str]) -> list[tuple[int, int]]:
    pairs = []
    for word in words:
        local, sep, remote = word.rpartition(":")
        try:
            remote_port = int(remote)
            local_port = (int(local) if local else 0) if sep else remote_port
        except ValueError:
            raise UsageError(f"{word!r} is not [LOCAL:]REMOTE (e.g. 8000 or 18000:8000)") from None
        if not (0 < remote_port < 65536 and 0 <= local_port < 65536):
            raise UsageError(f"{word!r}: ports must be between 1 and 65535")
        pairs.append((local_port, remote_port))
    return pairs


class Forwarder:
    """Listens on each local port; every accepted connection gets its own websocket to the pod."""

    def __init__(self, api: Api, path: str, pairs: list[tuple[int, int]], address: str) -> None:
        self.api, self.path, self.address = api, path, address
        self.listeners: list[tuple[socket.socket, int]] = []
        for local, remote in pairs:
            server = socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET, socket.SOCK_STREAM)
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                server.bind((address, local))
            except OSError as exc:
                server.close()
                raise UsageError(f"cannot listen on {address}:{local}: {exc.strerror}") from None
            server.listen(16)
            self.listeners.append((server, remote))
        self.stopped = threading.Event()

    def ports(self) -> list[tuple[int, int]]:
        return [(s.getsockname()[1], remote) for s, remote in self.listeners]

    def serve(self) -> None:
        for server, remote in self.listeners:
            threading.Thread(target=self._accept, args=(server, remote), daemon=True).start()

    def stop(self) -> None:
        self.stopped.set()
        for server, _ in self.listeners:
            # close() alone leaves a thread blocked in accept() listening (Linux): shutdown wakes it
            with contextlib.suppress(OSError):
                server.shutdown(socket.SHUT_RDWR)
            server.close()

    def _accept(self, server: socket.socket, remote: int) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=self._forward, args=(conn, remote), daemon=True).start()

    def _forward(self, conn: socket.socket, remote: int) -> None:
        from websockets.exceptions import ConnectionClosed

        from kaiwo_ray.cli import streams
        from kaiwo_ray.cli.errors import ClusterError

        try:
            ws = streams.connect(self.api, self.path, [("ports", str(remote))], streams.PORTFORWARD_PROTOCOLS)
        except ClusterError as err:
            sys.stderr.write(f"error: port {remote}: {err.message}\n")
            conn.close()
            return
        opened = {0: False, 1: False}  # the first frame on each channel carries the port

        def upstream() -> None:
            try:
                while data := conn.recv(64 * 1024):
                    ws.send(b"\x00" + data)
            except (OSError, ConnectionClosed):
                pass
            finally:
                ws.close()

        threading.Thread(target=upstream, daemon=True).start()
        try:
            for frame in ws:
                if isinstance(frame, str) or not frame:
                    continue
                channel, data = frame[0], frame[1:]
                if channel in opened and not opened[channel]:
                    opened[channel] = True
                    continue
                if channel == 0:
                    conn.sendall(data)
                elif channel == 1 and data:
                    sys.stderr.write(f"error: {data.decode(errors='replace')}\n")
                    break
        except (OSError, ConnectionClosed):
            pass
        finally:
            with contextlib.suppress(OSError):  # wakes the upstream thread's recv and sends FIN
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()
            ws.close()


def run(args: argparse.Namespace) -> int:
    from kaiwo_ray.cli.api import path_of
    from kaiwo_ray.cli.errors import ClusterError
    from kaiwo_ray.cli.workloads import fetch, parse_selector, pods_of
    from kaiwo_ray.kube.resources import PODS

    wtype, name = parse_selector(args.workload)
    pairs = parse_ports(args.ports)
    api = connect(args)
    namespace = args.namespace or api.access.namespace
    pods = pods_of(api, fetch(api, wtype, namespace, name))
    if args.pod:
        pods = [p for p in pods if p["metadata"]["name"] == args.pod]
    running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
    if not running:
        raise ClusterError(f"{args.workload} has no running pod{' ' + args.pod if args.pod else ''}: "
                           f"see `kaiwo explain {args.workload}`")
    pod = running[0]["metadata"]["name"]
    forwarder = Forwarder(api, path_of(PODS, namespace, pod, "portforward"), pairs, args.address)
    for local, remote in forwarder.ports():
        print(f"Forwarding from {args.address}:{local} -> {remote} (pod {pod})", flush=True)
    forwarder.serve()
    try:
        forwarder.stopped.wait()
    finally:
        forwarder.stop()
    return 0
