"""AdmissionReview v1 in and out: the verdict type every check returns and the response it becomes."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from kaiwo_ray.api.jsonobj import JsonObj


@dataclass(frozen=True, slots=True)
class Verdict:
    """Allowed (with JSON Patch operations and warnings) or refused (with a metav1.Status)."""

    allowed: bool = True
    patch: list[JsonObj] = field(default_factory=list)
    status: JsonObj | None = None
    warnings: list[str] = field(default_factory=list)


ALLOW = Verdict()


def invalid(kind: str, group: str, name: str, causes: list[JsonObj]) -> Verdict:
    """422 Invalid, each cause naming its field: kubectl shows the field path and the reason, as for the
    API server's own validation (`KaiwoJob.kaiwo.silogen.ai "x" is invalid: spec.gpus: ...`)."""
    qualified = f"{kind}.{group}" if group else kind
    listed = "; ".join(f"{c['field']}: {c['message']}" if c.get("field") else str(c["message"]) for c in causes)
    return Verdict(False, status={
        "code": 422, "reason": "Invalid", "message": f'{qualified} "{name}" is invalid: {listed}',
        "details": {"name": name, "group": group, "kind": kind, "causes": causes}})


def forbidden(message: str) -> Verdict:
    """403 Forbidden, as controller-runtime's admission.Denied answers."""
    return Verdict(False, status={"code": 403, "reason": "Forbidden", "message": message})


def respond(request: Mapping[str, Any], verdict: Verdict) -> JsonObj:
    """The AdmissionReview answering `request` (the review's `request` object)."""
    response: JsonObj = {"uid": request.get("uid", ""), "allowed": verdict.allowed}
    if verdict.patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(orjson.dumps(verdict.patch)).decode()
    if verdict.status is not None:
        response["status"] = verdict.status
    if verdict.warnings:
        response["warnings"] = list(verdict.warnings)
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def pointer(*parts: str) -> str:
    """An RFC 6901 JSON pointer (label keys carry '/': `~1`)."""
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)
