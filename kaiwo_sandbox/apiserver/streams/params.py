"""What the pod streams of simulated and real pods share: their query parameters, read as the kubelet
reads them, and the Status an exec's error channel carries."""

from __future__ import annotations

import json

from aiohttp import web

from kaiwo_sandbox.contracts import ApiError, JsonObj


def tail_lines(request: web.Request) -> int | None:
    """`tailLines`, or None when absent; 400 with the API server's message when not a number."""
    raw = request.query.get("tailLines")
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        raise ApiError.bad_request(f"tailLines: Invalid value: {raw!r}") from None


def forwarded_ports(request: web.Request) -> list[int]:
    """The `ports` of a websocket port-forward (repeated or comma-separated), each 1-65535."""
    raw_ports = [p for value in request.query.getall("ports", []) for p in value.split(",") if p]
    try:
        ports = [int(p) for p in raw_ports]
    except ValueError:
        raise ApiError.bad_request(f"invalid port in {raw_ports}") from None
    if not ports or any(not 0 < p < 65536 for p in ports):
        raise ApiError.bad_request("query parameter \"ports\" is required and must hold ports 1-65535")
    return ports


def exec_status(exit_code: int, argv: list[str]) -> JsonObj:
    """The Status on an exec's error channel (v4/v5): Success, or the command's non-zero exit code."""
    if exit_code == 0:
        return {"metadata": {}, "status": "Success"}
    return {"metadata": {}, "status": "Failure",
            "message": f"command terminated with non-zero exit code: error executing command {json.dumps(argv)}, "
                       f"exit code {exit_code}",
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": str(exit_code)}]}}
