"""The admission webhooks as a FastAPI app: `build_webhook_app(settings)`. Like the admin API it runs
under Ray Serve (beside the admin API, over TLS) or plain uvicorn (`kaiwo-ray dev`, tests). Each path
is one webhook of kaiwo_ray/admission/registration.py; the decisions are kaiwo_ray/admission's (pure):
this layer only decodes the AdmissionReview and encodes the verdict.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import orjson
from fastapi import FastAPI, Request, Response

from kaiwo_ray.admission import kaiwo, workloads
from kaiwo_ray.admission.registration import MUTATING, VALIDATING
from kaiwo_ray.admission.review import Verdict, respond

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


def _bad_request(message: str) -> Response:
    return Response(orjson.dumps({"error": message}), status_code=400, media_type="application/json")


def build_webhook_app(settings: workloads.Settings | None = None) -> FastAPI:
    table = checks(settings or settings_from_env())
    app = FastAPI(title="kaiwo-ray admission webhooks", openapi_url=None, docs_url=None, redoc_url=None)

    @app.get("/healthz")
    async def healthz() -> Response:
        return Response("ok", media_type="text/plain")

    @app.post("/{path:path}")
    async def admit(path: str, request: Request) -> Response:
        check = table.get("/" + path)
        if check is None:
            return Response(orjson.dumps({"error": f"no webhook at /{path}"}), status_code=404,
                            media_type="application/json")
        try:
            review = orjson.loads(await request.body())
        except orjson.JSONDecodeError as exc:
            return _bad_request(f"the body is not JSON: {exc}")
        body = review.get("request") if isinstance(review, dict) else None
        if not isinstance(review, dict) or review.get("kind") != "AdmissionReview" or not isinstance(body, dict):
            return _bad_request("expected an AdmissionReview (admission.k8s.io/v1) with a request")
        return Response(orjson.dumps(respond(body, check(body))), media_type="application/json")

    return app
