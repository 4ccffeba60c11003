"""`kaiwo exec job/NAME -- CMD...`: run a command in one of the workload's containers."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, BinaryIO

from kaiwo_ray.cli.access import add_cluster_arguments, connect

if TYPE_CHECKING:
    from websockets.sync.client import ClientConnection

    from kaiwo_ray.cli.api import Api

EXAMPLES = """examples:
  kaiwo exec job/my-training -- nvidia-smi
  kaiwo exec job/my-training --command 'ls /workload | head'     # upstream's form: /bin/sh -c
  echo 'print(1)' | kaiwo exec -i service/my-llm -- python
  kaiwo exec -it job/my-training -- bash
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("workload", metavar="TYPE/NAME", help="job/NAME or service/NAME")
    parser.add_argument("argv", nargs="*", metavar="-- CMD [ARG...]", help="the command to run, after --")
    parser.add_argument("--command", help="a shell command line, run as /bin/sh -c COMMAND (upstream's flag)")
    parser.add_argument("-i", "--stdin", action="store_true", help="pass stdin to the command")
    parser.add_argument("-t", "--tty", action="store_true", help="allocate a terminal (raw mode locally)")
    parser.add_argument("-c", "--container", help="container name")
    parser.add_argument("--pod", help="pod name (default: pick one)")
    add_cluster_arguments(parser)


def command_of(args: argparse.Namespace) -> list[str]:
    from kaiwo_ray.cli.errors import UsageError

    argv = list(args.argv)
    if args.command and argv:
        raise UsageError("give the command either after -- or with --command, not both")
    if args.command:
        return ["/bin/sh", "-c", args.command]
    if not argv:
        raise UsageError("no command: kaiwo exec job/NAME -- CMD [ARG...] (or --command 'CMD')")
    return argv


def run(args: argparse.Namespace) -> int:
    from kaiwo_ray.cli.api import path_of
    from kaiwo_ray.cli.errors import ClusterError
    from kaiwo_ray.cli.pick import choose
    from kaiwo_ray.cli.workloads import fetch, parse_selector, pods_of
    from kaiwo_ray.kube.resources import PODS

    wtype, name = parse_selector(args.workload)
    argv = command_of(args)
    api = connect(args)
    namespace = args.namespace or api.access.namespace
    workload = fetch(api, wtype, namespace, name)
    pod, container = choose(pods_of(api, workload), args.workload, pod=args.pod, container=args.container)
    pod_phase = (pod.get("status") or {}).get("phase")
    if pod_phase != "Running":
        raise ClusterError(f"pod {pod['metadata']['name']} of {args.workload} is {pod_phase}: exec needs a running "
                           f"container (see `kaiwo logs {args.workload}`)")
    path = path_of(PODS, namespace, pod["metadata"]["name"], "exec")
    return execute(api, path, container, argv, stdin=args.stdin, tty=args.tty)


def execute(api: Api, path: str, container: str, argv: list[str], *, stdin: bool, tty: bool,
            stdout: BinaryIO | None = None, stderr: BinaryIO | None = None) -> int:
    """Run argv over the exec websocket; the exit code comes from the error channel's Status."""
    from websockets.exceptions import ConnectionClosed

    from kaiwo_ray.cli import streams

    query = [("container", container), ("stdout", "true"), ("stderr", "false" if tty else "true"),
             ("stdin", "true" if stdin else "false"), ("tty", "true" if tty else "false")]
    query += [("command", word) for word in argv]
    ws = streams.connect(api, path, query, streams.EXEC_PROTOCOLS)
    stdout = stdout or sys.stdout.buffer
    stderr = stderr or sys.stderr.buffer
    code, message = 0, ""
    with _raw_terminal(tty), contextlib.closing(ws):
        if stdin:
            threading.Thread(target=_pump_stdin, args=(ws,), daemon=True).start()
        try:
            for frame in ws:
                if isinstance(frame, str) or not frame:
                    continue
                channel, data = frame[0], frame[1:]
                if channel == 1:
                    stdout.write(data)
                    stdout.flush()
                elif channel == 2:
                    stderr.write(data)
                    stderr.flush()
                elif channel == 3:
                    code, message = streams.exit_code_of(data)
        except ConnectionClosed:
            pass
    if message:
        sys.stderr.write(f"error: {message}\n")
    return code


def _pump_stdin(ws: ClientConnection) -> None:
    """stdin -> channel 0; end of input -> v5's close-stdin signal (255, 0)."""
    from websockets.exceptions import ConnectionClosed

    send = ws.send
    try:
        fd = sys.stdin.fileno()
        while True:
            data = os.read(fd, 64 * 1024)
            if not data:
                break
            send(b"\x00" + data)
        send(b"\xff\x00")
    except (ConnectionClosed, OSError, ValueError):
        return


@contextlib.contextmanager
def _raw_terminal(tty: bool) -> Iterator[None]:
    if not (tty and sys.stdin.isatty()):
        yield
        return
    import termios
    import tty as tty_module

    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    try:
        tty_module.setraw(fd)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
