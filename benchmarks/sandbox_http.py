"""Benchmark: what one HTTP request costs the sandbox's server process on this machine, against what the
same request costs a bare server: the per-request floor under every write an operator makes (issue 13:
a KaiwoJob costs the sandbox 5 writes of ours beside the load client's create, the floor operator's 1).

Each server runs in a process of its own on uvloop, as `kaiwo-ray sandbox` does, and answers the
same small JSON body; one keep-alive client in this process sends `--requests` requests, 1 ms apart
(paced, as the operator benchmark's load is, so the server is woken once a request), and the figure
is the server process's CPU per request:
- bare: an asyncio Protocol that answers a constant once it has read a request's head (no parsing
  beyond the blank line): the floor of the event loop, the socket and the kernel;
- aiohttp low-level (`web.Server`) and aiohttp application (`web.Application`, one catch-all route, as
  the sandbox registers it): what the HTTP framework adds, plain HTTP and then TLS;
- the sandbox itself over TLS, through our client: GET /version (no store, no auth), GET of a
  namespace, and a ConfigMap create (store, admission, managedFields, audit, a watch-free commit).
  These plain requests are answered by its lean HTTP front (kaiwo_sandbox/apiserver/fastpath.py),
  not by aiohttp, which serves its watches and streams.

No targets: these are the facts the operator benchmark's ratios stand on (docs/performance.md).

    .venv/bin/python benchmarks/sandbox_http.py [--requests 3000]
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
import sys
import tempfile
from collections.abc import Awaitable, Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, cast

from _machine import machine_load, process_cpu_s
from _objects import setup_cluster_objects
from _runtime import CONTEXT, run_deployed
from _sandbox import sandbox_process

BODY = b'{"major":"1","minor":"31"}'
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY)
KINDS = ("bare", "aiohttp-lowlevel", "aiohttp-app", "aiohttp-app-tls")


def out(line: str) -> None:
    print(line, flush=True)


def _server_main(conn: Connection, kind: str, cert_dir: str) -> None:
    """Serve `kind` on a free port of 127.0.0.1; send the port, then serve until killed."""
    from aiohttp import web

    async def main() -> None:
        loop = asyncio.get_running_loop()
        if kind == "bare":
            class Answer(asyncio.Protocol):
                def connection_made(self, transport: asyncio.BaseTransport) -> None:
                    # (uvloop's transports are not asyncio.Transport subclasses, so no isinstance here)
                    self.transport, self.buffer = cast(asyncio.Transport, transport), b""

                def data_received(self, data: bytes) -> None:
                    self.buffer += data
                    while b"\r\n\r\n" in self.buffer:
                        _, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
                        self.transport.write(ANSWER)

            server = await loop.create_server(Answer, "127.0.0.1", 0)
            conn.send(server.sockets[0].getsockname()[1])
            await asyncio.Event().wait()

        async def answer(request: web.BaseRequest) -> web.Response:
            return web.Response(body=BODY, content_type="application/json")

        runner: web.BaseRunner
        if kind == "aiohttp-lowlevel":
            runner = web.ServerRunner(web.Server(answer), access_log=None)
        else:
            app = web.Application()
            app.router.add_route("*", "/{tail:.*}", answer)
            runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await runner.setup()
        context = None
        if kind.endswith("-tls"):
            from kaiwo_sandbox.apiserver.tls import serving_cert

            context = serving_cert(Path(cert_dir), "127.0.0.1").server_context()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
        await site.start()
        conn.send(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
        await asyncio.Event().wait()

    run_deployed(main())


async def _raw_client(port: int, tls: bool, requests: int) -> None:
    context = None
    if tls:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # the benchmark's own throwaway certificate
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    request = b"GET /version HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    try:
        for _ in range(requests):
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            await reader.readexactly(length)
            await asyncio.sleep(0.001)
    finally:
        writer.close()


def bench_servers(requests: int) -> dict[str, float]:
    """Server CPU per request (us) for each of KINDS."""
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="kaiwo-httpbench-") as cert_dir:
        for kind in KINDS:
            parent, child = CONTEXT.Pipe()
            process = CONTEXT.Process(target=_server_main, args=(child, kind, cert_dir), daemon=True)
            process.start()
            try:
                if not parent.poll(60):
                    raise RuntimeError(f"the {kind} server did not start within 60 s")
                port = int(parent.recv())
                tls = kind.endswith("-tls")
                asyncio.run(_raw_client(port, tls, min(200, requests)))  # connection and caches warm
                before = process_cpu_s(process.pid)
                asyncio.run(_raw_client(port, tls, requests))
                figures[kind] = (process_cpu_s(process.pid) - before) / requests * 1e6
            finally:
                process.kill()
                process.join(timeout=10)
    return figures


def bench_sandbox(requests: int) -> dict[str, float]:
    """The sandbox's CPU per request (us), over TLS through our client, for three requests."""
    from kaiwo_ray.kube import resources as R
    from kaiwo_ray.kube.client import KubeClient

    figures: dict[str, float] = {}
    with sandbox_process(users=("kaiwo-ray",)) as sandbox:
        setup_cluster_objects(sandbox.kubeconfigs["admin"], ["bench"])

        async def main() -> None:
            client = await KubeClient.from_kubeconfig(str(sandbox.kubeconfigs["kaiwo-ray"]))
            cases: list[tuple[str, Callable[[int], Awaitable[Any]]]] = [
                ("GET /version", lambda i: client.request("GET", "/version")),
                ("GET a namespace", lambda i: client.get(R.NAMESPACES, "bench")),
                ("create a ConfigMap", lambda i: client.create(R.CONFIGMAPS, {
                    "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}", "namespace": "bench"},
                    "data": {"key": "value"}}, answer=False)),
            ]
            try:
                for label, send in cases:
                    for i in range(min(200, requests)):  # warm; numbered past the measured creates
                        await send(requests + i)
                    before = await asyncio.to_thread(sandbox.cpu_s)
                    for i in range(requests):
                        await send(i)
                        await asyncio.sleep(0.001)
                    figures[label] = (await asyncio.to_thread(sandbox.cpu_s) - before) / requests * 1e6
            finally:
                await client.close()

        run_deployed(main())
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=3000, help="requests per server and case (default 3000)")
    args = parser.parse_args()
    out(f"run: {args.requests} requests per case, paced 1 ms apart; load average at start {machine_load()}")
    servers = bench_servers(args.requests)
    bare = servers["bare"]

    def versus_bare(us: float) -> str:  # (a tiny --requests can measure no CPU at all: clock ticks are 10 ms)
        return f"{us / bare:.1f}x bare" if bare > 0 else "bare too small to measure"

    for kind, us in servers.items():
        ratio = f" ({versus_bare(us)})" if kind != "bare" else ""
        out(f"server_cpu_per_request_{kind.replace('-', '_')}: {us:.0f} us{ratio} (no target)")
    for label, us in bench_sandbox(args.requests).items():
        key = label.lower().replace("/", "").replace(" ", "_").replace("__", "_")
        out(f"sandbox_cpu_per_request_{key}: {us:.0f} us ({versus_bare(us)}; over TLS, our client; no target)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
