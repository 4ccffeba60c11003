"""A watcher that stops reading is closed once its queue passes a bound (memory stays bounded, as the
watch cache closes unresponsive watchers); a watcher that reads keeps up with a burst larger than it."""

from __future__ import annotations

import socket
import ssl
from typing import Any

import kubernetes

from kaiwo_sandbox.contracts import CONFIGMAPS
from kaiwo_sandbox.testing import RunningSandbox, eventually

BIG = "x" * 50_000


def _silent_watch(sb: RunningSandbox) -> ssl.SSLSocket:
    """A watch request from a client that never reads its response (tiny receive buffer)."""
    host, port = sb.url.removeprefix("https://").split(":")
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    raw.connect((host, int(port)))
    context = ssl.create_default_context(cafile=sb.ca_cert_path)
    conn = context.wrap_socket(raw, server_hostname=host)
    conn.sendall((f"GET /api/v1/namespaces/default/configmaps?watch=1 HTTP/1.1\r\nHost: {host}\r\n"
                  f"Authorization: Bearer {sb.token}\r\nAccept: application/json\r\n\r\n").encode())
    return conn


def test_a_watcher_that_does_not_read_is_closed_past_the_bound(sandbox: RunningSandbox) -> None:
    sandbox.sandbox.server.watch_buffer_limit = 50
    conn = _silent_watch(sandbox)
    try:
        eventually(lambda: sandbox.open_watches == 1, timeout=10)
        for i in range(400):  # ~20 MB of events: the socket buffers fill, then the queue passes 50
            sandbox.call(sandbox.store.create, CONFIGMAPS, {"metadata": {"name": f"cm-{i}", "namespace": "default"},
                                                            "data": {"k": BIG}})
            if sandbox.open_watches == 0:
                break
        eventually(lambda: sandbox.open_watches == 0, timeout=20, message="the silent watcher was not closed")
    finally:
        conn.close()
    # The server still serves everyone else.
    listed = kubernetes.client.CoreV1Api(sandbox.api_client()).list_namespaced_config_map("default", limit=1)
    assert listed.items


def test_a_reading_watcher_survives_a_burst_larger_than_the_bound(sandbox: RunningSandbox) -> None:
    sandbox.sandbox.server.watch_buffer_limit = 20
    core = kubernetes.client.CoreV1Api(sandbox.api_client())
    start = core.list_namespaced_config_map("default").metadata.resource_version

    def burst() -> None:  # 200 events in one step of the loop: no write in between
        for i in range(200):
            sandbox.store.create(CONFIGMAPS, {"metadata": {"name": f"b-{i}", "namespace": "default"}})

    seen: list[Any] = []
    watch = kubernetes.watch.Watch()
    core.create_namespaced_config_map("default", {"metadata": {"name": "a0"}})
    for event in watch.stream(core.list_namespaced_config_map, "default", resource_version=start,
                              timeout_seconds=20):
        seen.append(event["object"].metadata.name)
        if seen == ["a0"]:  # the watch is live: queue 200 events for it at once
            sandbox.call(burst)
        if len(seen) == 201:
            watch.stop()
    assert seen == ["a0"] + [f"b-{i}" for i in range(200)]
    eventually(lambda: sandbox.open_watches == 0, timeout=10)
