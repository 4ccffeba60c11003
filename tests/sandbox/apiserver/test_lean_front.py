"""The API server's lean HTTP front (kaiwo_sandbox/apiserver/fastpath.py): plain requests are answered by
it, over TLS, keep-alive and pipelined, and anything else (a watch, a chunked body, a malformed head)
hands the connection to aiohttp, which answers as it always did. Raw sockets, so the framing itself is
what is checked; the clients' view is the rest of the suite, which runs through this front."""

from __future__ import annotations

import json
import socket
import ssl
import time
from collections.abc import Iterator

import kubernetes
import pytest

from kaiwo_sandbox.testing import RunningSandbox, eventually


@pytest.fixture
def conn(sandbox: RunningSandbox) -> Iterator[ssl.SSLSocket]:
    host, port = sandbox.url.removeprefix("https://").split(":")
    raw = socket.create_connection((host, int(port)), timeout=10)
    context = ssl.create_default_context(cafile=sandbox.ca_cert_path)
    tls = context.wrap_socket(raw, server_hostname=host)
    yield tls
    tls.close()


def _request(sandbox: RunningSandbox, method: str, target: str, body: bytes | None = None, *,
             extra: str = "", content_length: bool = True) -> bytes:
    head = (f"{method} {target} HTTP/1.1\r\nHost: sandbox\r\nAuthorization: Bearer {sandbox.token}\r\n"
            f"Accept: application/json\r\n{extra}")
    if body is not None and content_length:
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return (head + "\r\n").encode() + (body or b"")


class Reader:
    """Reads whole responses (Content-Length or chunked) off one connection."""

    def __init__(self, conn: ssl.SSLSocket) -> None:
        self.conn = conn
        self.buffer = b""

    def _fill(self) -> None:
        data = self.conn.recv(65536)
        if not data:
            raise ConnectionError("closed")
        self.buffer += data

    def _until(self, marker: bytes) -> bytes:
        while marker not in self.buffer:
            self._fill()
        found, _, self.buffer = self.buffer.partition(marker)
        return found

    def _exactly(self, size: int) -> bytes:
        while len(self.buffer) < size:
            self._fill()
        found, self.buffer = self.buffer[:size], self.buffer[size:]
        return found

    def response(self) -> tuple[int, dict[str, str], bytes]:
        head = self._until(b"\r\n\r\n").decode()
        status_line, *lines = head.split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
        if headers.get("transfer-encoding") == "chunked":
            return int(status_line.split()[1]), headers, b""  # a stream: the caller reads its chunks
        return int(status_line.split()[1]), headers, self._exactly(int(headers["content-length"]))

    def chunk(self) -> bytes:
        size = int(self._until(b"\r\n"), 16)
        data = self._exactly(size)
        self._exactly(2)
        return data

    def closed(self) -> bool:
        try:
            self._fill()
        except (ConnectionError, OSError):
            return True
        return False


def test_plain_requests_are_answered_by_the_lean_front_over_one_kept_alive_connection(
        sandbox: RunningSandbox, conn: ssl.SSLSocket) -> None:
    front = sandbox.sandbox.lean
    served, handed = front.served, front.handed_off
    reader = Reader(conn)
    conn.sendall(_request(sandbox, "GET", "/version"))
    status, headers, body = reader.response()
    assert status == 200 and json.loads(body)["major"] == "1"
    assert headers["content-type"] == "application/json" and "date" in headers
    created = json.dumps({"metadata": {"name": "lean"}, "data": {"k": "v"}}).encode()
    conn.sendall(_request(sandbox, "POST", "/api/v1/namespaces/default/configmaps", created))
    status, _, body = reader.response()
    assert status == 201 and json.loads(body)["metadata"]["name"] == "lean"
    conn.sendall(_request(sandbox, "POST", "/api/v1/namespaces/default/configmaps", created))
    status, _, body = reader.response()
    assert status == 409 and json.loads(body)["reason"] == "AlreadyExists"
    patch = json.dumps({"data": {"k": "w"}}).encode()
    conn.sendall(_request(sandbox, "PATCH", "/api/v1/namespaces/default/configmaps/lean", patch)
                 .replace(b"Content-Type: application/json", b"Content-Type: application/merge-patch+json"))
    status, _, body = reader.response()
    assert status == 200 and json.loads(body)["data"] == {"k": "w"}
    conn.sendall(_request(sandbox, "GET", "/api/v1/namespaces/default/configmaps?labelSelector=a%3Db&limit=5"))
    status, _, body = reader.response()
    assert status == 200 and json.loads(body)["items"] == []
    conn.sendall(_request(sandbox, "DELETE", "/api/v1/namespaces/default/configmaps/lean"))
    assert reader.response()[0] == 200
    conn.sendall(_request(sandbox, "GET", "/api/v1/namespaces/default/configmaps/lean"))
    assert reader.response()[0] == 404
    assert front.served - served == 7 and front.handed_off == handed


def test_pipelined_requests_and_a_body_in_pieces_are_answered_in_order(sandbox: RunningSandbox,
                                                                       conn: ssl.SSLSocket) -> None:
    reader = Reader(conn)
    first = json.dumps({"metadata": {"name": "one"}}).encode()
    second = json.dumps({"metadata": {"name": "two"}}).encode()
    create = "/api/v1/namespaces/default/configmaps"
    conn.sendall(_request(sandbox, "POST", create, first) + _request(sandbox, "POST", create, second))
    assert [json.loads(reader.response()[2])["metadata"]["name"] for _ in range(2)] == ["one", "two"]
    whole = _request(sandbox, "POST", create, json.dumps({"metadata": {"name": "three"}}).encode())
    for cut in (whole[:10], whole[10:-5], whole[-5:]):  # head, then most of the body, then its end
        conn.sendall(cut)
        time.sleep(0.05)  # lets each piece arrive on its own (not a synchronisation: the answer is read below)
    status, _, body = reader.response()
    assert status == 201 and json.loads(body)["metadata"]["name"] == "three"


def test_connection_close_is_honoured(sandbox: RunningSandbox, conn: ssl.SSLSocket) -> None:
    reader = Reader(conn)
    conn.sendall(_request(sandbox, "GET", "/api/v1/namespaces/default", extra="Connection: close\r\n"))
    status, headers, _ = reader.response()
    assert status == 200 and headers["connection"] == "close"
    assert reader.closed()


def test_a_watch_after_plain_requests_is_handed_to_aiohttp_on_the_same_connection(
        sandbox: RunningSandbox, conn: ssl.SSLSocket) -> None:
    front = sandbox.sandbox.lean
    handed = front.handed_off
    reader = Reader(conn)
    conn.sendall(_request(sandbox, "GET", "/api/v1/namespaces/default/configmaps"))
    status, _, body = reader.response()
    version = json.loads(body)["metadata"]["resourceVersion"]
    conn.sendall(_request(sandbox, "GET", f"/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={version}"))
    status, headers, _ = reader.response()
    assert status == 200 and headers["transfer-encoding"] == "chunked"
    assert front.handed_off == handed + 1
    kubernetes.client.CoreV1Api(sandbox.api_client()).create_namespaced_config_map(
        "default", {"metadata": {"name": "seen"}})
    event = json.loads(reader.chunk())
    assert event["type"] == "ADDED" and event["object"]["metadata"]["name"] == "seen"


@pytest.mark.parametrize(("what", "request_bytes", "status"), [
    ("a chunked body", "chunked", 201),
    ("a percent-escaped path", "escaped", 200),
    ("a malformed request line", "malformed", 400),
    ("a body past the server's limit", "too-large", 413),
    ("a header name with a space", "bad-header", 400),
    ("a Content-Length in other digits", "odd-length", 400),
    ("a dot segment", "dots", 404),
])
def test_what_the_lean_front_does_not_parse_is_answered_by_aiohttp(
        sandbox: RunningSandbox, conn: ssl.SSLSocket, what: str, request_bytes: str, status: int) -> None:
    front = sandbox.sandbox.lean
    handed = front.handed_off
    if request_bytes == "chunked":
        body = json.dumps({"metadata": {"name": "chunked"}}).encode()
        data = _request(sandbox, "POST", "/api/v1/namespaces/default/configmaps", None,
                        extra="Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n")
        data += b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    elif request_bytes == "escaped":
        data = _request(sandbox, "GET", "/api/v1/namespaces/%64efault")
    elif request_bytes == "malformed":
        data = b"GET  /api/v1/namespaces HTTP/1.1 extra\r\nHost: x\r\n\r\n"
    elif request_bytes == "bad-header":
        data = _request(sandbox, "GET", "/api/v1/namespaces/default", extra="Bad Name: x\r\n")
    elif request_bytes == "odd-length":
        data = _request(sandbox, "POST", "/api/v1/namespaces/default/configmaps", None,
                        extra="Content-Type: application/json\r\nContent-Length: \u00b2\r\n")
    elif request_bytes == "dots":
        data = _request(sandbox, "GET", "/api/v1/namespaces/kube-system/../default")
    else:
        data = _request(sandbox, "POST", "/api/v1/namespaces/default/configmaps", None,
                        extra=f"Content-Type: application/json\r\nContent-Length: {4 * 1024 * 1024}\r\n")
    conn.sendall(data)
    assert Reader(conn).response()[0] == status, what
    eventually(lambda: front.handed_off == handed + 1, timeout=5)


def test_clients_see_every_verb_through_the_lean_front(sandbox: RunningSandbox) -> None:
    front = sandbox.sandbox.lean
    served = front.served
    core = kubernetes.client.CoreV1Api(sandbox.api_client())
    core.create_namespaced_config_map("default", {"metadata": {"name": "c", "labels": {"a": "b"}}})
    core.patch_namespaced_config_map("c", "default", {"data": {"x": "1"}})
    core.replace_namespaced_config_map("c", "default", core.read_namespaced_config_map("c", "default"))
    assert [cm.metadata.name for cm in core.list_namespaced_config_map("default", label_selector="a=b").items] == ["c"]
    core.delete_namespaced_config_map("c", "default")
    with pytest.raises(kubernetes.client.ApiException) as missing:
        core.read_namespaced_config_map("c", "default")
    assert missing.value.status == 404
    assert front.served - served >= 7


def test_a_client_that_leaves_mid_request_costs_the_server_nothing(sandbox: RunningSandbox,
                                                                   conn: ssl.SSLSocket) -> None:
    front = sandbox.sandbox.lean
    rule = sandbox.sandbox.faults.delay(30.0, verbs="get", resources="configmaps")
    try:
        conn.sendall(_request(sandbox, "GET", "/api/v1/namespaces/default/configmaps/slow"))
        eventually(lambda: any(c.busy for c in list(front.live)), timeout=5)
        conn.close()  # the handler waits in the injected latency: cancelled, as aiohttp's would be
        eventually(lambda: not any(c.busy for c in list(front.live)), timeout=5,
                   message="the abandoned request's handler was not cancelled")
    finally:
        sandbox.sandbox.faults.remove(rule)
    listed = kubernetes.client.CoreV1Api(sandbox.api_client()).list_namespaced_config_map("default")
    assert listed.metadata.resource_version


def test_each_connection_made_is_stamped_once_and_requests_on_it_add_none(sandbox: RunningSandbox) -> None:
    """`LeanFront.made_at`: when each connection was made (a TLS handshake each), so a benchmark can
    tell a client's pool growing from its steady state."""
    front = sandbox.sandbox.lean
    host, port = sandbox.url.removeprefix("https://").split(":")
    context = ssl.create_default_context(cafile=sandbox.ca_cert_path)
    made = len(front.made_at)
    began = time.time()
    for _ in range(2):
        with context.wrap_socket(socket.create_connection((host, int(port)), timeout=10),
                                 server_hostname=host) as tls:
            reader = Reader(tls)
            for _ in range(3):
                tls.sendall(_request(sandbox, "GET", "/version"))
                assert reader.response()[0] == 200
    assert len(front.made_at) == made + 2
    assert all(began <= stamp <= time.time() for stamp in list(front.made_at)[-2:])
