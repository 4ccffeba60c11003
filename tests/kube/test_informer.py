"""The informer loop survives anything (issue 14, item 2): against a scripted HTTP server on a real
socket, a watch event the informer cannot handle (here an `object` that is not an object: any error
that is not an API error, a bug included) is not the end of the cache: the informer counts it,
reports itself unhealthy, backs off and relists."""

from __future__ import annotations

import asyncio
import time

import orjson
from kubernetes.aio import client as aio_client

from kaiwo_ray.kube import resources as R
from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.kube.informer import Informer, InformerSettings


def _json(status: int, body: object) -> bytes:
    data = orjson.dumps(body)
    return b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (status, len(data), data)


def _chunked(lines: list[bytes]) -> bytes:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    return head + b"".join(b"%x\r\n%s\r\n" % (len(line), line) for line in lines)  # left open


def _cm(name: str, rv: str) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}}


class Server:
    """Answers requests in order from one script shared by all connections; counts the lists."""

    def __init__(self, answers: list[bytes]) -> None:
        self.answers = answers
        self.requests: list[str] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while self.answers:
                head = await reader.readuntil(b"\r\n\r\n")
                self.requests.append(head.split(b"\r\n", 1)[0].decode())
                writer.write(self.answers.pop(0))
                await writer.drain()
            await reader.read()  # hold the connection until the client goes
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def test_a_garbled_watch_line_costs_a_relist_not_the_informer() -> None:
    answers = [
        _json(200, {"metadata": {"resourceVersion": "10"}, "items": [_cm("a", "5")]}),
        _chunked([orjson.dumps({"type": "ADDED", "object": _cm("b", "11")}) + b"\n", b'{"type": "MODIFIED", "object": 5}\n']),
        _json(200, {"metadata": {"resourceVersion": "20"}, "items": [_cm("a", "5"), _cm("c", "19")]}),
        _chunked([orjson.dumps({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "20"}}}) + b"\n"]),
    ]
    server = Server(answers)

    async def body() -> None:
        listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
        port = listener.sockets[0].getsockname()[1]
        configuration = aio_client.Configuration(host=f"http://127.0.0.1:{port}")
        client = KubeClient(aio_client.ApiClient(configuration), request_timeout=5)
        informer = Informer(client, R.CONFIGMAPS, lambda *a: None, settings=InformerSettings(backoff_initial=0.5))
        task = asyncio.create_task(informer.run())
        try:
            deadline = time.monotonic() + 10
            while getattr(informer, "crashes", 0) == 0 and not task.done() and time.monotonic() < deadline:
                await asyncio.sleep(0.005)
            if not task.done():
                assert not informer.healthy, "broken (health: synced false) until the relist"
            while informer.relists < 2 and not task.done() and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            assert not task.done(), "the informer goes on"
            assert informer.relists == 2 and informer.healthy
            assert informer.crashes == 1
            # the relist is the truth: b vanished (a DELETED was synthesized), c appeared
            assert sorted(o["metadata"]["name"] for o in informer.cache) == ["a", "c"]
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await client.close()
            listener.close()

    asyncio.run(body())
    assert [r.split("?")[0] for r in server.requests] == ["GET /api/v1/configmaps"] * 4
