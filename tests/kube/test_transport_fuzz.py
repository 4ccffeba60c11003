"""The lean transport against malformed answers (issue 14, item 8), fuzzed with hypothesis against a
real local socket server: bad chunk sizes, oversized headers, truncated bodies, garbage, valid
prefixes with broken tails, servers that close or hold the connection. Every request ends, within
its timeout, either with a value or with a typed KubeError: never a hang, never a bare parser error.
"""

from __future__ import annotations

import asyncio
import time

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from kubernetes.aio import client as aio_client

from kaiwo_ray.kube import resources as R
from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.kube.errors import KubeError, WatchIdle

TIMEOUT = 0.3
BODY = orjson.dumps({"kind": "ConfigMap", "metadata": {"name": "x", "resourceVersion": "1"}, "data": {"k": "v"}})


def status_line(code: int = 200) -> bytes:
    return b"HTTP/1.1 %d X\r\n" % code


def headers(**fields: str) -> bytes:
    return b"".join(f"{k.replace('_', '-')}: {v}\r\n".encode() for k, v in fields.items()) + b"\r\n"


def chunk(data: bytes, size: bytes | None = None) -> bytes:
    return (size if size is not None else b"%x" % len(data)) + b"\r\n" + data + b"\r\n"


HEX_JUNK = st.sampled_from([b"zz", b"-1", b"", b"fffffffffffffffffffff", b"1 ; ext=1", b"0x10", b"\xff", b"10000000"])
CODES = st.sampled_from([200, 201, 204, 304, 404, 410, 422, 500, 101, 199, 999, 0])

ANSWERS = st.one_of(
    # a chunked body with a broken size line somewhere
    st.tuples(HEX_JUNK, st.binary(max_size=40)).map(
        lambda t: status_line() + headers(transfer_encoding="chunked") + chunk(BODY[:10]) + chunk(t[1], t[0])),
    # chunk data longer or shorter than announced, or no CRLF after it
    st.tuples(st.integers(0, 200), st.binary(max_size=60)).map(
        lambda t: status_line() + headers(transfer_encoding="chunked") + b"%x\r\n" % t[0] + t[1]),
    # a Content-Length the body does not honour
    st.tuples(st.integers(0, 10_000), st.integers(0, len(BODY))).map(
        lambda t: status_line() + headers(content_length=str(t[0])) + BODY[:t[1]]),
    st.sampled_from([b"-5", b"abc", b"1, 2", b"99999999999999999999999"]).map(
        lambda v: status_line() + b"Content-Length: " + v + b"\r\n\r\n" + BODY),
    # oversized or malformed heads
    st.integers(60_000, 300_000).map(lambda n: status_line() + b"X-Big: " + b"a" * n + b"\r\n\r\n"),
    st.binary(min_size=1, max_size=80).map(lambda junk: status_line() + junk + b"\r\n\r\n" + BODY),
    CODES.map(lambda code: status_line(code) + headers(content_length=str(len(BODY))) + BODY),
    st.sampled_from([b"HTTP/1.1\r\n\r\n", b"HTTP/9.9 200 OK\r\n\r\n", b"200 OK\r\n\r\n", b"HTTP/1.1 2000 X\r\n\r\n"]),
    # an unknown or lying Content-Encoding, a body that is not JSON
    st.sampled_from([b"gzip", b"br", b"deflate"]).map(
        lambda enc: status_line() + b"Content-Encoding: " + enc + b"\r\n" + headers(content_length=str(len(BODY)))
        + BODY),
    st.binary(max_size=50).map(lambda junk: status_line() + headers(content_length=str(len(junk))) + junk),
    # anything at all
    st.binary(max_size=200),
)


async def _serve(answer: bytes, hold: bool) -> tuple[asyncio.Server, int]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(answer)
            await writer.drain()
            if hold:
                await reader.read()  # keep the connection open until the client gives up
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def exchange(answer: bytes, hold: bool, *, watch: bool) -> object:
    result: list[object] = []

    async def main() -> None:
        server, port = await _serve(answer, hold)
        configuration = aio_client.Configuration(host=f"http://127.0.0.1:{port}")
        client = KubeClient(aio_client.ApiClient(configuration), request_timeout=TIMEOUT)
        try:
            # the test's own bound: a hang fails, it does not stall (how long an exchange takes
            # against TIMEOUT is benchmarks/timings.py's transport_malformed_exchange_worst)
            async with asyncio.timeout(TIMEOUT * 20):
                if watch:
                    async for _ in client.watch(R.CONFIGMAPS, resource_version="1", timeout_seconds=1,
                                                idle_timeout=TIMEOUT):
                        pass
                else:
                    result.append(await client.request("GET", "/api/v1/configmaps"))
        except KubeError:
            pass  # typed: what callers branch on
        finally:
            await client.close()
            server.close()

    asyncio.run(main())
    return result[0] if result else None


FUZZ = settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))


@FUZZ
@given(answer=ANSWERS, hold=st.booleans())
@example(answer=status_line() + headers(transfer_encoding="chunked") + chunk(b"ab", b"zz"), hold=True)
@example(answer=status_line() + headers(content_length="1000") + BODY, hold=False)
@example(answer=status_line() + b"X-Big: " + b"a" * 200_000 + b"\r\n\r\n", hold=True)
def test_a_request_ends_with_a_value_or_a_typed_error(answer: bytes, hold: bool) -> None:
    exchange(answer, hold, watch=False)


@FUZZ
@given(answer=ANSWERS, hold=st.booleans())
@example(answer=status_line() + headers(transfer_encoding="chunked") + chunk(b'{"type": "ADDED", "obj'), hold=False)
def test_a_watch_ends_with_events_or_a_typed_error(answer: bytes, hold: bool) -> None:
    exchange(answer, hold, watch=True)


@pytest.mark.parametrize("hold", [True, False])
def test_a_good_answer_still_reads(hold: bool) -> None:
    answer = status_line() + headers(transfer_encoding="chunked") + chunk(BODY[:7]) + chunk(BODY[7:]) + b"0\r\n\r\n"
    assert exchange(answer, hold, watch=False) == orjson.loads(BODY)


def test_a_watch_is_cut_for_silence_not_for_length() -> None:
    """The idle timeout counts from the last thing heard: a stream that sends an event every 0.1 s for
    three idle timeouts is never cut; once it goes silent it ends with WatchIdle (not a transport error),
    about one idle timeout later."""
    idle, events = 0.3, 9

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(status_line() + headers(transfer_encoding="chunked"))
            for i in range(events):
                line = orjson.dumps({"type": "ADDED", "object": {**orjson.loads(BODY), "metadata": {
                    "name": f"x{i}", "resourceVersion": str(i + 1)}}}) + b"\n"
                writer.write(chunk(line))
                await writer.drain()
                await asyncio.sleep(0.1)
            await reader.read()  # then silent, the connection held open
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def main() -> tuple[list[str], BaseException | None, float]:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = KubeClient(aio_client.ApiClient(aio_client.Configuration(host=f"http://127.0.0.1:{port}")),
                            request_timeout=5)
        names: list[str] = []
        error: BaseException | None = None
        last = time.monotonic()
        try:
            async with asyncio.timeout(10):
                async for event in client.watch(R.CONFIGMAPS, resource_version="1", timeout_seconds=30,
                                                idle_timeout=idle):
                    names.append(event["object"]["metadata"]["name"])
                    last = time.monotonic()
        except KubeError as err:
            error = err
        finally:
            await client.close()
            server.close()
        return names, error, time.monotonic() - last

    names, error, silent_for = asyncio.run(main())
    assert names == [f"x{i}" for i in range(events)]
    assert isinstance(error, WatchIdle), error
    assert idle <= silent_for < idle + 2.0


def test_time_spent_on_an_event_is_not_silence() -> None:
    """The idle timeout counts the waits for the next piece only. The server sends x0, x1 0.1 s later,
    and x2 0.6 s after that, then ends; a consumer that holds each event for 2 idle timeouts (0.4 s)
    never waits for anything, so it reads all 3 and the end, not WatchIdle."""
    idle = 0.2

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(status_line() + headers(transfer_encoding="chunked"))
            for i, pause in enumerate((0.1, 0.6, 0.0)):
                writer.write(chunk(orjson.dumps({"type": "ADDED", "object": {**orjson.loads(BODY), "metadata": {
                    "name": f"x{i}", "resourceVersion": str(i + 1)}}}) + b"\n"))
                await writer.drain()
                await asyncio.sleep(pause)
            writer.write(b"0\r\n\r\n")  # the stream ends
            await writer.drain()
            await reader.read()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def main() -> list[str]:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = KubeClient(aio_client.ApiClient(aio_client.Configuration(host=f"http://127.0.0.1:{port}")),
                            request_timeout=5)
        names: list[str] = []
        try:
            async with asyncio.timeout(10):
                async for event in client.watch(R.CONFIGMAPS, resource_version="1", timeout_seconds=30,
                                                idle_timeout=idle):
                    names.append(event["object"]["metadata"]["name"])
                    await asyncio.sleep(2 * idle)  # a slow consumer
        finally:
            await client.close()
            server.close()
        return names

    assert asyncio.run(main()) == ["x0", "x1", "x2"]
