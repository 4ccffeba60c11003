"""What the simulated KubeRay's three reconcilers share: reading, creating, deleting and status-writing
through the store the way the operator's client does, and the refusal they report as an event."""

from __future__ import annotations

from typing import Any

from kaiwo_sandbox.cluster.base import Controller
from kaiwo_sandbox.contracts import ApiError, JsonObj, rfc3339

REFUSED_REQUEUE_SECONDS = 2.0  # KubeRay's DefaultRequeueDuration after a failed create


class CreateRefused(Exception):
    """The apiserver refused an object KubeRay builds (it would not retry sooner than its requeue)."""


def meta_of(obj: JsonObj) -> JsonObj:
    meta: JsonObj = obj.get("metadata") or {}
    return meta


def pod_running(pod: JsonObj) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running"


class KubeRayBase(Controller):
    """Helpers of KubeRay's reconcilers (ray-operator/controllers/ray/utils in KubeRay)."""

    def _now(self) -> str:
        return rfc3339(self.clock.now())

    def _find(self, gvr: Any, ns: str, name: str) -> JsonObj | None:
        try:
            return self.store.get(gvr, ns, name)
        except ApiError as err:
            if err.code == 404:
                return None
            raise

    def _create(self, gvr: Any, obj: JsonObj, ns: str) -> JsonObj | None:
        """Create; None when it already exists (another reconcile got there first). Any other
        refusal (an invalid template, say) raises CreateRefused for the caller to report."""
        try:
            return self.store.create(gvr, obj, namespace=ns)
        except ApiError as err:
            if err.code == 409:
                return None
            if err.code in (400, 403, 404, 422):
                raise CreateRefused(err.message) from err
            raise

    def _delete(self, gvr: Any, ns: str, name: str) -> bool:
        try:
            self.store.delete(gvr, ns, name, propagation_policy="Background")
        except ApiError as err:
            if err.code == 404:
                return False
            raise
        return True

    def _write_status(self, gvr: Any, obj: JsonObj, status: JsonObj) -> None:
        if (obj.get("status") or {}) == status:
            return
        meta = meta_of(obj)
        body = {k: v for k, v in status.items()}
        removed = {k: None for k in (obj.get("status") or {}) if k not in status}
        body.update(removed)
        self.store.patch(gvr, meta.get("namespace"), str(meta.get("name", "")), {"status": body}, "merge",
                         subresource="status")
