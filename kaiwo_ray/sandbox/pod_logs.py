"""GET pods/log with the kubelet's `tailLines` and `follow`: the simulated log (`server.pod_log`) cut
to its last lines, and, when following, kept open until the container terminates or the pod goes,
ending with the line that says so (what `kubectl logs -f` shows when a container exits)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

from aiohttp import web

from kaiwo_ray.sandbox.types import ApiError, JsonObj

FOLLOW_POLL_SECONDS = 0.05  # how often a following stream looks at the pod (a simulated kubelet's pace)


def _tail(text: str, tail_lines: str | None) -> str:
    if tail_lines is None or tail_lines == "":
        return text
    try:
        count = int(tail_lines)
    except ValueError:
        raise ApiError.bad_request(f'tailLines: Invalid value: "{tail_lines}": must be an integer') from None
    if count < 0:
        raise ApiError.bad_request(f"tailLines: Invalid value: {count}: must be greater than or equal to 0")
    lines = text.splitlines(keepends=True)
    return "".join(lines[-count:]) if count else ""


def _terminated(pod: JsonObj | None, container: str | None) -> str | None:
    """The closing line once the container has terminated (or the pod is gone), else None."""
    if pod is None:
        return "[kaiwo-ray sandbox] pod deleted\n"
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    status = next((s for s in statuses if container is None or s.get("name") == container), None)
    state = (status or {}).get("state") or {}
    if "terminated" in state:
        detail = state["terminated"]
        return f"[kaiwo-ray sandbox] terminated at {detail.get('finishedAt', '')}, exit code {detail.get('exitCode')}\n"
    return None


async def pod_log_response(request: web.Request, pod: JsonObj, container: str | None, query: Mapping[str, str],
                           render: Callable[[JsonObj, str | None], str],
                           current: Callable[[], JsonObj | None]) -> web.StreamResponse:
    """`render(pod, container)` is the simulated log (raising the kubelet's errors); `current()` reads
    the pod again (None once deleted) while following."""
    text = _tail(render(pod, container), query.get("tailLines"))
    if query.get("follow") not in ("true", "1"):
        return web.Response(text=text, content_type="text/plain")
    if container is None:
        names = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
        container = names[0] if len(names) == 1 else None
    response = web.StreamResponse(headers={"Content-Type": "text/plain; charset=utf-8"})
    await response.prepare(request)
    await response.write(text.encode())
    try:
        while True:
            closing = _terminated(current(), container)
            if closing is not None:
                await response.write(closing.encode())
                break
            await asyncio.sleep(FOLLOW_POLL_SECONDS)  # polling the simulated pod; no event to wait on
    except (ConnectionResetError, asyncio.CancelledError):
        return response
    await response.write_eof()
    return response
