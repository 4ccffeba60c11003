"""The replica level both ReplicaSets and ReplicationControllers share: keep `spec.replicas` pods
of the template alive (create what is missing, delete the surplus in the controller's order) and
post the status the real controllers post (replicas, fullyLabeledReplicas, readyReplicas,
availableReplicas after minReadySeconds, a ReplicaFailure condition while creates are refused).

The two real controllers are one code path upstream too (the replication manager is the
ReplicaSet controller behind an adapter); `ReplicaKind` names what differs.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from kaiwo_sandbox.cluster.conditions import find_condition, set_condition
from kaiwo_sandbox.cluster.events import record_event
from kaiwo_sandbox.cluster.pods import PodsByController, as_int, is_ready, is_terminal, owner_reference
from kaiwo_sandbox.cluster.workloads.rollout import deletion_order, desired_replicas
from kaiwo_sandbox.contracts import GVR, PODS, ApiError, Clock, JsonObj, Store, WatchEvent, rfc3339

FAILED_CREATE_RETRY_SECONDS = 10.0  # simulated pause before a controller retries a refused pod


@dataclass(frozen=True, slots=True)
class ReplicaKind:
    gvr: GVR
    kind: str
    component: str  # the events' source
    user: str  # who writes pods and status


class ReplicaSync:
    """Pods and status of one replica kind. The owning controller feeds it pod events (`observe`)
    and reconciles its objects through `sync`."""

    def __init__(self, store: Store, clock: Clock, kind: ReplicaKind) -> None:
        self.store = store
        self.clock = clock
        self.kind = kind
        self._pods = PodsByController(kind.kind)
        self._ready_since: dict[str, float] = {}  # pod uid -> monotonic time first seen ready
        # object uid -> monotonic time before which a refused pod is not tried again. Without it
        # every status write (the refusal names the generated pod, so it changes each time)
        # re-triggers a create at once: the real controller's rate-limited requeue.
        self._create_paused_until: dict[str, float] = {}

    def observe(self, event: WatchEvent) -> tuple[str, str] | None:
        """A pod event: (namespace, owner name) when one of ours owns the pod."""
        owner = self._pods.observe(event.type, event.object)
        if event.type == "DELETED" or not is_ready(event.object):
            self._ready_since.pop(str((event.object.get("metadata") or {}).get("uid", "")), None)
        return owner

    def _tf(self) -> float:
        return max(float(self.clock.time_factor), 1e-9)

    def sync(self, namespace: str, name: str) -> float | None:
        try:
            rs = self.store.get(self.kind.gvr, namespace, name)
        except ApiError as err:
            if err.code == 404:
                return None
            raise
        meta = rs["metadata"]
        if meta.get("deletionTimestamp"):
            return None
        uid = str(meta.get("uid", ""))
        pods = self._pods.pods(uid)
        active = [p for p in pods if not is_terminal(p) and not p["metadata"].get("deletionTimestamp")]
        wanted = desired_replicas(rs)
        failure: str | None = None
        now = self.clock.monotonic()
        paused = self._create_paused_until.get(uid, 0.0) - now
        if len(active) < wanted and paused > 0:
            held = find_condition([dict(c) for c in (rs.get("status") or {}).get("conditions") or []],
                                  "ReplicaFailure")
            failure = str((held or {}).get("message") or "")
        elif len(active) < wanted:
            for _ in range(wanted - len(active)):
                created = self._create_pod(rs)
                if isinstance(created, str):
                    failure = created
                    paused = FAILED_CREATE_RETRY_SECONDS * self._tf()
                    self._create_paused_until[uid] = now + paused
                    break  # the rest would fail the same way; retried after a pause
                active.append(created)
            else:
                self._create_paused_until.pop(uid, None)
        elif len(active) > wanted:
            doomed = deletion_order(active)[: len(active) - wanted]
            for pod in doomed:
                with contextlib.suppress(ApiError):
                    self.store.delete(PODS, namespace, str(pod["metadata"]["name"]), user=self.kind.user)
                    record_event(self.store, self.clock, rs, "Normal", "SuccessfulDelete",
                                 f"Deleted pod: {pod['metadata']['name']}", self.kind.component)
            gone = {str(p["metadata"]["name"]) for p in doomed}
            active = [p for p in active if str(p["metadata"]["name"]) not in gone]
        labels = ((rs.get("spec") or {}).get("template") or {}).get("metadata", {}).get("labels") or {}
        ready_pods = [p for p in active if is_ready(p)]
        ready = len(ready_pods)
        available, wait = self._available(ready_pods, as_int((rs.get("spec") or {}).get("minReadySeconds"), 0))
        status: JsonObj = {
            "replicas": len(active),
            "fullyLabeledReplicas": sum(1 for p in active
                                        if all((p["metadata"].get("labels") or {}).get(k) == v
                                               for k, v in labels.items())),
            "readyReplicas": ready,
            "availableReplicas": available,
            "observedGeneration": meta.get("generation", 1),
        }
        current = rs.get("status") or {}
        conditions = [dict(c) for c in current.get("conditions") or []]
        if failure is not None:
            set_condition(conditions, "ReplicaFailure", "True", "FailedCreate", failure, rfc3339(self.clock.now()))
        else:
            conditions = [c for c in conditions if c.get("type") != "ReplicaFailure"]
        status["conditions"] = conditions or None
        if any(current.get(k, 0 if k != "conditions" else None) != v for k, v in status.items()):
            with contextlib.suppress(ApiError):
                self.store.patch(self.kind.gvr, namespace, name, {"status": status}, "merge",
                                 subresource="status", user=self.kind.user)
        delays = [d for d in (paused if failure is not None else None, wait) if d is not None]
        return min(delays) if delays else None

    def _available(self, ready_pods: list[JsonObj], min_ready_seconds: int) -> tuple[int, float | None]:
        """How many ready pods have been ready for minReadySeconds (simulated), and the real delay
        until the next one will have been. Readiness is timed from when this controller first saw
        it (it reconciles on every pod change, so that is when the pod turned ready)."""
        now = self.clock.monotonic()
        seen = {str(p["metadata"].get("uid", "")) for p in ready_pods}
        for uid in seen:
            self._ready_since.setdefault(uid, now)
        if min_ready_seconds <= 0:
            return len(ready_pods), None
        waits = [min_ready_seconds * self._tf() - (now - self._ready_since[uid]) for uid in seen]
        available = sum(1 for w in waits if w <= 0)
        pending = [w for w in waits if w > 0]
        return available, (min(pending) + 0.001 if pending else None)

    def _create_pod(self, rs: JsonObj) -> JsonObj | str:
        """The created pod, or the error message when the API refused it."""
        meta = rs["metadata"]
        template = (rs.get("spec") or {}).get("template") or {}
        tmeta = template.get("metadata") or {}
        pod: JsonObj = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "generateName": f"{meta['name']}-",
                "namespace": meta["namespace"],
                "labels": dict(tmeta.get("labels") or {}),
                "ownerReferences": [owner_reference({"apiVersion": self.kind.gvr.api_version, "kind": self.kind.kind,
                                                     "metadata": meta})],
            },
            "spec": dict(template.get("spec") or {}),
        }
        if tmeta.get("annotations"):
            pod["metadata"]["annotations"] = dict(tmeta["annotations"])
        try:
            created = self.store.create(PODS, pod, namespace=str(meta["namespace"]), user=self.kind.user)
        except ApiError as err:
            record_event(self.store, self.clock, rs, "Warning", "FailedCreate",
                         f"Error creating: {err.message}", self.kind.component)
            return str(err.message)
        record_event(self.store, self.clock, rs, "Normal", "SuccessfulCreate",
                     f"Created pod: {created['metadata']['name']}", self.kind.component)
        return created
