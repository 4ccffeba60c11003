"""The admission webhooks as an ASGI app: `build_webhook_app(settings)`, served over TLS by
serve/webhook_server.py (in the admin API's replica and in `kaiwo-ray dev`) and, for comparison,
under Ray Serve by benchmarks/webhooks.py. Each path is one webhook of
kaiwo_ray/admission/registration.py; the decisions are kaiwo_ray/admission's (pure): this layer only
decodes the AdmissionReview and encodes the verdict.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any

import orjson

from kaiwo_ray.admission import kaiwo, workloads
from kaiwo_ray.admission.registration import MUTATING, VALIDATING
from kaiwo_ray.admission.review import Verdict, respond
from serve import webhook_metrics

Check = Callable[[Mapping[str, Any]], Verdict]


def settings_from_env(env: Mapping[str, str] | None = None) -> workloads.Settings:
    env = os.environ if env is None else env
    return workloads.Settings(
        default_queue=(env.get("DEFAULT_CLUSTER_QUEUE_NAME") or "").strip() or "kaiwo",
        enforce_on_gpu_workloads=env.get("ENFORCE_KAIWO_ON_GPU_WORKLOADS", "").strip().lower() == "true",
        trusted_submitters=frozenset(n.strip() for n in (env.get("KAIWO_TRUSTED_SUBMITTERS") or "").split(",")
                                     if n.strip()))


def checks(settings: workloads.Settings) -> dict[str, Check]:
    """path -> decision, for every webhook the configurations name."""
    table: dict[str, Check] = {}
    for hook in MUTATING:
        if hook.group == "kaiwo.silogen.ai":
            table[hook.path] = lambda request: workloads.mutate_kaiwo(request, settings)
        else:
            table[hook.path] = lambda request: workloads.mutate(request, settings)
    for hook in VALIDATING:
        if hook.group.endswith("kaiwo.silogen.ai"):
            table[hook.path] = kaiwo.review
        else:
            table[hook.path] = lambda request: workloads.validate(request, settings)
    return table


Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]
JSON = b"application/json"


async def _answer(send: Send, status: int, body: bytes, content_type: bytes = JSON) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def _error(message: str) -> bytes:
    return orjson.dumps({"error": message})


def build_webhook_app(settings: workloads.Settings | None = None) -> App:
    """A bare ASGI app, not FastAPI: every Job create the webhooks match waits for this answer, and a
    framework's routing, dependency and response layers cost more than the decision itself
    (benchmarks/webhooks.py)."""
    table = checks(settings or settings_from_env())

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":  # nothing to start: answer the server's lifespan protocol
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        path, method = str(scope.get("path") or ""), scope.get("method")
        if method == "GET" and path == "/healthz":
            await _answer(send, 200, b"ok", b"text/plain")
            return
        check = table.get(path)
        if method != "POST" or check is None:
            await _answer(send, 404, _error(f"no webhook at {path}"))
            return
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            more = bool(message.get("more_body"))
        try:
            review = orjson.loads(b"".join(chunks))
        except orjson.JSONDecodeError as exc:
            webhook_metrics.REQUESTS.labels(path, "400").inc()
            await _answer(send, 400, _error(f"the body is not JSON: {exc}"))
            return
        body = review.get("request") if isinstance(review, dict) else None
        if not isinstance(review, dict) or review.get("kind") != "AdmissionReview" or not isinstance(body, dict):
            webhook_metrics.REQUESTS.labels(path, "400").inc()
            await _answer(send, 400, _error("expected an AdmissionReview (admission.k8s.io/v1) with a request"))
            return
        in_flight = webhook_metrics.IN_FLIGHT.labels(path)
        in_flight.inc()
        began = time.perf_counter()
        try:
            answer = orjson.dumps(respond(body, check(body)))
        except Exception:
            webhook_metrics.REQUESTS.labels(path, "500").inc()
            raise
        finally:
            in_flight.dec()
        webhook_metrics.LATENCY.labels(path).observe(time.perf_counter() - began)
        webhook_metrics.REQUESTS.labels(path, "200").inc()
        await _answer(send, 200, answer)

    return app
