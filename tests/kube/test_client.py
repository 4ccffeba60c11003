"""KubeClient against the sandbox, on both of its transports (the lean HTTP/1.1 one it uses unless a
proxy applies, and the package's aiohttp session it falls back to), plus the lean transport's
HTTP edge cases against a scripted raw server: chunked and gzip bodies, a keep-alive connection the
server closed meanwhile, a server that never answers, a 401 that refreshes the token."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import pytest

from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.kube.errors import AlreadyExists, NotFound, ServerError, TooManyRequests, TransportError
from kaiwo_ray.kube.resources import CONFIGMAPS
from kaiwo_sandbox.testing import RunningSandbox

NS = "default"


def _use_aiohttp(client: KubeClient) -> None:
    """Force the aiohttp fallback (what a configured proxy selects)."""
    client._lean_checked = True
    client._lean = None


def run_with_client(sandbox: RunningSandbox, transport: str,
                    body: Callable[[KubeClient], Awaitable[None]]) -> None:
    async def main() -> None:
        client = await KubeClient.from_kubeconfig(str(sandbox.kubeconfig_path))
        if transport == "aiohttp":
            _use_aiohttp(client)
        else:
            assert client._lean_pool() is not None, "no proxy here: the lean transport is used"
        try:
            await body(client)
        finally:
            await client.close()

    asyncio.run(main())


def cm(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NS}, "data": data}


@pytest.mark.parametrize("transport", ["lean", "aiohttp"])
def test_verbs_round_trip(sandbox: RunningSandbox, transport: str) -> None:
    name = f"verbs-{transport}"

    async def body(client: KubeClient) -> None:
        created = await client.create(CONFIGMAPS, cm(name, a="1"))
        assert created["metadata"]["name"] == name
        patched = await client.patch(CONFIGMAPS, name, {"data": {"b": "2"}}, NS)
        assert patched["data"] == {"a": "1", "b": "2"}
        applied = await client.apply(CONFIGMAPS, cm(name, c="3"))
        assert applied["data"]["c"] == "3"
        got = await client.get(CONFIGMAPS, name, NS)
        assert got["metadata"]["resourceVersion"] == applied["metadata"]["resourceVersion"]
        got["data"] = {"d": "4"}
        replaced = await client.replace(CONFIGMAPS, got)
        assert replaced["data"] == {"d": "4"}
        for i in range(5):
            await client.create(CONFIGMAPS, cm(f"{name}-page-{i}"))
        items, rv = await client.list_all(CONFIGMAPS, NS, page_size=2)
        assert {f"{name}-page-{i}" for i in range(5)} <= {item["metadata"]["name"] for item in items}
        assert rv
        await client.delete(CONFIGMAPS, name, NS, uid=replaced["metadata"]["uid"])
        with pytest.raises(NotFound):
            await client.get(CONFIGMAPS, name, NS)

    run_with_client(sandbox, transport, body)


@pytest.mark.parametrize("transport", ["lean", "aiohttp"])
def test_errors_are_typed(sandbox: RunningSandbox, transport: str) -> None:
    name = f"errors-{transport}"

    async def body(client: KubeClient) -> None:
        await client.create(CONFIGMAPS, cm(name))
        with pytest.raises(AlreadyExists):
            await client.create(CONFIGMAPS, cm(name))
        rule = sandbox.faults.fail(code=429, verbs="get", names=name, times=1, retry_after=7)
        with pytest.raises(TooManyRequests) as caught:
            await client.get(CONFIGMAPS, name, NS)
        assert caught.value.retry_after == 7.0
        sandbox.faults.remove(rule)
        sandbox.faults.fail(code=500, verbs="get", names=name, times=1)
        with pytest.raises(ServerError):
            await client.get(CONFIGMAPS, name, NS)
        assert (await client.get(CONFIGMAPS, name, NS))["metadata"]["name"] == name, "the connection still works"

    run_with_client(sandbox, transport, body)


@pytest.mark.parametrize("transport", ["lean", "aiohttp"])
def test_watch_streams_events_until_the_server_ends_it(sandbox: RunningSandbox, transport: str) -> None:
    name = f"watch-{transport}"

    async def body(client: KubeClient) -> None:
        listed = await client.list(CONFIGMAPS, NS, limit=1)
        rv = listed["metadata"]["resourceVersion"]
        for i in range(3):
            await client.create(CONFIGMAPS, cm(f"{name}-{i}"))
        seen: list[str] = []
        async with asyncio.timeout(30):
            async for event in client.watch(CONFIGMAPS, NS, resource_version=rv, timeout_seconds=1):
                if event["type"] == "ADDED" and event["object"]["metadata"]["name"].startswith(name):
                    seen.append(event["object"]["metadata"]["name"])
        assert seen == [f"{name}-{i}" for i in range(3)]
        assert (await client.get(CONFIGMAPS, f"{name}-0", NS))["metadata"]["name"] == f"{name}-0"

    run_with_client(sandbox, transport, body)


def test_a_watch_closed_early_gives_its_connection_back_at_once(sandbox: RunningSandbox) -> None:
    async def body(client: KubeClient) -> None:
        await client.create(CONFIGMAPS, cm("early-close"))
        pool = client._lean_pool()
        assert pool is not None
        events = client.watch(CONFIGMAPS, NS, resource_version="0", timeout_seconds=60)
        async with asyncio.timeout(30):
            first = await anext(events)
        assert first["type"] == "ADDED"
        assert len(pool._open) == 1
        await events.aclose()
        assert not pool._open, "the unfinished stream is closed by aclose itself, not later when collected"

    run_with_client(sandbox, "lean", body)


def test_lean_transport_reuses_one_connection(sandbox: RunningSandbox) -> None:
    async def body(client: KubeClient) -> None:
        await client.create(CONFIGMAPS, cm("reuse"))
        for i in range(20):
            await client.patch(CONFIGMAPS, "reuse", {"data": {"i": str(i)}}, NS)
        with pytest.raises(NotFound):  # an error answer leaves the connection reusable too
            await client.get(CONFIGMAPS, "missing", NS)
        await client.get(CONFIGMAPS, "reuse", NS)
        pool = client._lean_pool()
        assert pool is not None and pool.opened == 1

    run_with_client(sandbox, "lean", body)


# -- the lean transport against a scripted raw HTTP server ---------------------------------------

Answer = bytes | None  # None: close the connection instead of answering


def http_answer(status: int, body: bytes, *, chunked: bool = False, gzipped: bool = False,
                extra: str = "") -> bytes:
    headers = f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n{extra}"
    if gzipped:
        body = gzip.compress(body)
        headers += "Content-Encoding: gzip\r\n"
    if chunked:
        middle = len(body) // 2
        pieces = [body[:middle], body[middle:]]
        encoded = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces if p) + b"0\r\n\r\n"
        return (headers + "Transfer-Encoding: chunked\r\n\r\n").encode() + encoded
    return (headers + f"Content-Length: {len(body)}\r\n\r\n").encode() + body


class ScriptedServer:
    """Answers each connection's requests from a script (a list per connection, in order);
    records each request's head."""

    def __init__(self, scripts: list[list[Answer]]) -> None:
        self.scripts = scripts
        self.requests: list[bytes] = []
        self.connections = 0
        self.server: asyncio.Server | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        script = self.scripts[self.connections] if self.connections < len(self.scripts) else []
        self.connections += 1
        try:
            for answer in script:
                head = await reader.readuntil(b"\r\n\r\n")
                self.requests.append(head)
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                await reader.readexactly(length)
                if answer is None:
                    break
                writer.write(answer)
                await writer.drain()
            else:
                await reader.read()  # hold the connection open until the client goes
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def client(self, timeout: float = 5.0) -> KubeClient:
        from kubernetes.aio import client as aio_client

        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        configuration = aio_client.Configuration(host=f"http://127.0.0.1:{port}")
        configuration.api_key = {"BearerToken": "t0"}
        configuration.api_key_prefix = {"BearerToken": "Bearer"}
        return KubeClient(aio_client.ApiClient(configuration), request_timeout=timeout)


def run_scripted(scripts: list[list[Answer]], body: Callable[[KubeClient, ScriptedServer], Awaitable[None]],
                 timeout: float = 5.0) -> ScriptedServer:
    server = ScriptedServer(scripts)

    async def main() -> None:
        client = await server.client(timeout)
        try:
            assert client._lean_pool() is not None
            await body(client, server)
        finally:
            await client.close()
            assert server.server is not None
            server.server.close()

    asyncio.run(main())
    return server


OBJ = orjson.dumps({"metadata": {"name": "x"}, "data": {"k": "v" * 100}})


def test_chunked_and_gzip_bodies_are_decoded() -> None:
    answers: list[Answer] = [http_answer(200, OBJ, chunked=True), http_answer(200, OBJ, gzipped=True),
                             http_answer(200, OBJ, chunked=True, gzipped=True)]

    async def body(client: KubeClient, server: ScriptedServer) -> None:
        for _ in answers:
            assert await client.request("GET", "/api/v1/namespaces/a/configmaps/x") == orjson.loads(OBJ)
        assert server.connections == 1, "every answer read to its end: one kept-alive connection"

    server = run_scripted([answers], body)
    head = server.requests[0].decode()
    assert head.startswith("GET /api/v1/namespaces/a/configmaps/x HTTP/1.1\r\n")
    assert "Authorization: Bearer t0\r\n" in head and "Accept-Encoding: gzip, deflate\r\n" in head


def test_answers_without_a_body_are_not_waited_on() -> None:
    # no Content-Length and no chunking: only the status says there is no body
    no_content = b"HTTP/1.1 204 No Content\r\n\r\n"
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n"

    async def body(client: KubeClient, server: ScriptedServer) -> None:
        async with asyncio.timeout(2):
            assert await client.request("DELETE", "/api/v1/x") is None
            assert await client.request("HEAD", "/api/v1/x") is None
            assert await client.request("GET", "/api/v1/x") == orjson.loads(OBJ)
        assert server.connections == 1

    run_scripted([[no_content, head, http_answer(200, OBJ)]], body)


def test_idempotent_request_is_resent_once_when_a_kept_connection_was_closed() -> None:
    ok = http_answer(200, OBJ)
    # each connection is closed by the server after its answers, before answering the next request
    scripts: list[list[Answer]] = [[ok, None], [ok, ok, None], []]

    async def body(client: KubeClient, server: ScriptedServer) -> None:
        await client.request("GET", "/api/v1/x")
        assert await client.request("GET", "/api/v1/x") == orjson.loads(OBJ), "resent on a new connection"
        assert server.connections == 2
        # a PATCH is not idempotent: it is not resent, the caller sees a TransportError
        await client.request("PATCH", "/api/v1/x", body={}, content_type="application/merge-patch+json")
        with pytest.raises(TransportError):
            await client.request("PATCH", "/api/v1/x", body={}, content_type="application/merge-patch+json")
        assert server.connections == 2

    run_scripted(scripts, body)


def test_a_server_that_never_answers_times_out() -> None:
    # connection 1 holds without answering; connection 2 answers once, then holds: a timeout on
    # a reused connection is a timeout too (not a disconnect to resend on)
    scripts: list[list[Answer]] = [[], [http_answer(200, OBJ)]]

    async def body(client: KubeClient, server: ScriptedServer) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(TransportError, match="timed out"):
            await client.request("GET", "/api/v1/x")
        assert loop.time() - started < 5.0
        pool = client._lean_pool()
        assert pool is not None and not pool._idle, "a timed-out connection is not reused"
        await client.request("GET", "/api/v1/x")
        with pytest.raises(TransportError, match="timed out"):
            await client.request("GET", "/api/v1/x")
        assert server.connections == 2, "not resent after its deadline"

    run_scripted(scripts, body, timeout=0.3)


def test_401_refreshes_the_token_once_then_raises_typed() -> None:
    unauthorized = http_answer(401, b'{"kind":"Status","reason":"Unauthorized","message":"no"}')
    scripts: list[list[Answer]] = [[unauthorized, http_answer(200, OBJ), unauthorized, unauthorized]]

    async def body(client: KubeClient, server: ScriptedServer) -> None:
        assert await client.request("GET", "/api/v1/x") == orjson.loads(OBJ)
        from kaiwo_ray.kube.errors import Unauthorized

        with pytest.raises(Unauthorized):
            await client.request("GET", "/api/v1/x")
        assert len(server.requests) == 4 and server.connections == 1

    run_scripted(scripts, body)


def test_query_strings_are_urlencoded_and_the_memo_stays_bounded() -> None:
    from urllib.parse import urlencode

    from kaiwo_ray.kube import client as client_module

    for i in range(600):
        params = (("fieldManager", "kaiwo-ray"), ("labelSelector", f"a in (x,y{i})"), ("rv", str(i)))
        assert client_module._query_string(params) == urlencode(params)
        assert len(client_module._QUERY_STRINGS) <= 256
