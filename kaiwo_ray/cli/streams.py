"""Websocket channels to a pod (exec and port-forward), over the `websockets` sync client.

Both speak Kubernetes' channel protocol: every binary message is [channel byte][data]."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from kaiwo_ray.cli.errors import ClusterError

if TYPE_CHECKING:
    from websockets.sync.client import ClientConnection

    from kaiwo_ray.cli.api import Api

EXEC_PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
PORTFORWARD_PROTOCOLS = ("v4.channel.k8s.io",)


def connect(api: Api, path: str, query: Sequence[tuple[str, str]], protocols: Sequence[str]) -> ClientConnection:
    from websockets.exceptions import InvalidHandshake, InvalidStatus
    from websockets.sync.client import connect as ws_connect
    from websockets.typing import Subprotocol

    access = api.access
    url = access.server.replace("https://", "wss://", 1).replace("http://", "ws://", 1) + path
    url += "?" + urlencode(list(query))
    kwargs: dict[str, Any] = {"additional_headers": access.headers, "open_timeout": 15, "max_size": None,
                              "subprotocols": [Subprotocol(p) for p in protocols], "compression": None,
                              "user_agent_header": "kaiwo-cli", "legacy": True}
    if access.ssl_context is not None:
        kwargs["ssl"] = access.ssl_context
        if access.server_hostname:
            kwargs["server_hostname"] = access.server_hostname
    try:
        connection: ClientConnection = ws_connect(url, **kwargs)
        return connection
    except InvalidStatus as exc:
        body = exc.response.body or b""
        try:
            message = json.loads(body).get("message") or body.decode(errors="replace")
        except ValueError:
            message = body.decode(errors="replace").strip()
        if exc.response.status_code == 401:
            raise ClusterError(f"the cluster at {access.server} rejected your credentials (401 Unauthorized): "
                               f"refresh them in {access.source}") from None
        raise ClusterError(f"{message or exc} (HTTP {exc.response.status_code})") from None
    except (InvalidHandshake, OSError, TimeoutError) as exc:
        raise ClusterError(f"cannot open a stream to {access.server}: {exc}") from None


def exit_code_of(status: bytes) -> tuple[int, str]:
    """(exit code, message) from the error channel: a v4/v5 Status, or older plain text."""
    try:
        parsed = json.loads(status)
    except ValueError:
        text = status.decode(errors="replace")
        return (1 if text else 0), text
    if parsed.get("status") == "Success":
        return 0, ""
    for cause in (parsed.get("details") or {}).get("causes") or []:
        if cause.get("reason") == "ExitCode":
            try:
                return int(cause.get("message", 1)), ""
            except ValueError:
                break
    return 1, str(parsed.get("message") or "command failed")
