"""The Deployment and ReplicaSet controllers, in the real two-level shape: a Deployment owns
ReplicaSets named `<deployment>-<pod-template-hash>`, each ReplicaSet owns its pods.

Both levels live in one controller (the cluster registry knows one "deployment-controller") with
tagged work keys. Rolling updates follow the controller's budgets (maxSurge up, maxUnavailable
down, cleanup of unhealthy old replicas first); Recreate empties old ReplicaSets before the new
one scales. The progress deadline is measured in simulated seconds from the last progress seen.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass

from kaiwo_sandbox.cluster.base import ClusterSettings, Controller, Key
from kaiwo_sandbox.cluster.conditions import find_condition, set_condition
from kaiwo_sandbox.cluster.events import record_event
from kaiwo_sandbox.cluster.pods import (
    as_int,
    controller_of,
    owner_reference,
)
from kaiwo_sandbox.cluster.workloads.replicas import ReplicaKind, ReplicaSync
from kaiwo_sandbox.cluster.workloads.rollout import (
    DESIRED_REPLICAS,
    MAX_REPLICAS,
    POD_TEMPLATE_HASH,
    REVISION,
    desired_replicas,
    pod_template_hash,
    revision_of,
    rolling_budget,
)
from kaiwo_sandbox.contracts import (
    DEPLOYMENTS,
    PODS,
    REPLICASETS,
    ApiError,
    Clock,
    JsonObj,
    Store,
    WatchEvent,
    rfc3339,
)

DEPLOYMENT_COMPONENT = "deployment-controller"
REPLICASET_COMPONENT = "replicaset-controller"
DEPLOYMENT_USER = "system:serviceaccount:kube-system:deployment-controller"
REPLICASET_USER = "system:serviceaccount:kube-system:replicaset-controller"
DEFAULT_REVISION_HISTORY = 10
REPLICASET_KIND = ReplicaKind(REPLICASETS, "ReplicaSet", REPLICASET_COMPONENT, REPLICASET_USER)


@dataclass(slots=True)
class Progress:
    signature: tuple[object, ...]
    at: float  # monotonic time of the last observed progress


def _owned(obj: JsonObj, uid: str) -> bool:
    ref = controller_of(obj)
    return ref is not None and ref.get("uid") == uid


class DeploymentController(Controller):
    name = "deployment-controller"
    watches = (DEPLOYMENTS, REPLICASETS, PODS)

    def __init__(self, store: Store, clock: Clock, settings: ClusterSettings) -> None:
        super().__init__(store, clock, settings)
        self._progress: dict[str, Progress] = {}
        self._replicas = ReplicaSync(store, clock, REPLICASET_KIND)

    def keys_for(self, event: WatchEvent) -> Iterable[Key]:
        meta = event.object.get("metadata") or {}
        namespace = meta.get("namespace")
        resource = event.gvr.resource
        if resource == "deployments":
            return [("deploy", namespace, meta.get("name"))]
        ref = controller_of(event.object)
        if resource == "replicasets":
            keys: list[Key] = [("rs", namespace, meta.get("name"))]
            if ref is not None and ref.get("kind") == "Deployment":
                keys.append(("deploy", namespace, ref.get("name")))
            return keys
        owner = self._replicas.observe(event)
        return [("rs", *owner)] if owner is not None else []

    def reconcile(self, key: Key) -> float | None:
        assert isinstance(key, tuple)
        kind, namespace, name = str(key[0]), str(key[1]), str(key[2])
        if kind == "rs":
            return self._replicas.sync(namespace, name)
        return self._sync_deployment(namespace, name)

    def _tf(self) -> float:
        return max(float(self.clock.time_factor), 1e-9)

    # ------------------------------------------------------------------------------------------
    # ReplicaSet level

    # ------------------------------------------------------------------------------------------
    # Deployment level

    def _sync_deployment(self, namespace: str, name: str) -> float | None:
        try:
            deployment = self.store.get(DEPLOYMENTS, namespace, name)
        except ApiError as err:
            if err.code == 404:
                return None
            raise
        meta = deployment["metadata"]
        uid = str(meta.get("uid", ""))
        if meta.get("deletionTimestamp"):
            self._progress.pop(uid, None)
            return None
        spec = deployment.get("spec") or {}
        replicas = desired_replicas(deployment)
        template = spec.get("template") or {}
        collisions = int((deployment.get("status") or {}).get("collisionCount") or 0)
        template_hash = pod_template_hash(template, collisions)
        all_rs = sorted((rs for rs in self.store.list(REPLICASETS, namespace)[0] if _owned(rs, uid)),
                        key=lambda rs: (str(rs["metadata"].get("creationTimestamp", "")), rs["metadata"]["name"]))
        new_rs = next((rs for rs in all_rs
                       if (rs["metadata"].get("labels") or {}).get(POD_TEMPLATE_HASH) == template_hash), None)
        old_rs = [rs for rs in all_rs if new_rs is None or rs["metadata"]["uid"] != new_rs["metadata"]["uid"]]
        budget = rolling_budget(deployment)
        created_new = False
        if new_rs is None and not spec.get("paused"):
            new_rs = self._create_replicaset(deployment, template_hash, old_rs, budget.max_surge)
            created_new = new_rs is not None
        if new_rs is not None and not spec.get("paused"):
            min_ready = as_int(spec.get("minReadySeconds"), 0)
            if as_int((new_rs.get("spec") or {}).get("minReadySeconds"), 0) != min_ready:
                # Like the real controller: the new ReplicaSet follows the Deployment's minReadySeconds.
                with contextlib.suppress(ApiError):
                    new_rs = self.store.patch(REPLICASETS, namespace, new_rs["metadata"]["name"],
                                              {"spec": {"minReadySeconds": min_ready}}, "merge",
                                              user=DEPLOYMENT_USER)
            if (spec.get("strategy") or {}).get("type") == "Recreate":
                self._recreate(deployment, new_rs, old_rs, replicas)
            else:
                self._roll(deployment, new_rs, old_rs, replicas, budget.max_surge, budget.max_unavailable)
            self._cleanup(deployment, old_rs)
            self._sync_revision(deployment, new_rs)
        return self._write_status(deployment, new_rs, old_rs, replicas, budget.max_unavailable, created_new)

    def _create_replicaset(self, deployment: JsonObj, template_hash: str, old_rs: list[JsonObj],
                           max_surge: int) -> JsonObj | None:
        meta = deployment["metadata"]
        spec = deployment.get("spec") or {}
        template = dict(spec.get("template") or {})
        tmeta = dict(template.get("metadata") or {})
        tmeta["labels"] = {**(tmeta.get("labels") or {}), POD_TEMPLATE_HASH: template_hash}
        template["metadata"] = tmeta
        selector = dict(spec.get("selector") or {})
        selector["matchLabels"] = {**(selector.get("matchLabels") or {}), POD_TEMPLATE_HASH: template_hash}
        replicas = desired_replicas(deployment)
        old_total = sum(desired_replicas(rs) for rs in old_rs)
        recreate = (spec.get("strategy") or {}).get("type") == "Recreate"
        if recreate:
            initial = 0 if any(desired_replicas(rs) for rs in old_rs) else replicas
        else:
            initial = max(min(replicas, replicas + max_surge - old_total), 0)
        revision = max([revision_of(rs) for rs in old_rs] or [0]) + 1
        rs_name = f"{meta['name']}-{template_hash}"
        rs: JsonObj = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": rs_name,
                "namespace": meta["namespace"],
                "labels": dict(tmeta["labels"]),
                "annotations": {DESIRED_REPLICAS: str(replicas), MAX_REPLICAS: str(replicas + max_surge),
                                REVISION: str(revision)},
                "ownerReferences": [owner_reference({"apiVersion": "apps/v1", "kind": "Deployment",
                                                     "metadata": meta})],
            },
            "spec": {"replicas": initial, "minReadySeconds": as_int(spec.get("minReadySeconds"), 0),
                     "selector": selector, "template": template},
        }
        try:
            created = self.store.create(REPLICASETS, rs, namespace=str(meta["namespace"]), user=DEPLOYMENT_USER)
        except ApiError as err:
            if err.code == 409:
                # Same name, not ours: bump collisionCount so the next hash differs (the real remedy).
                count = int((deployment.get("status") or {}).get("collisionCount") or 0) + 1
                with contextlib.suppress(ApiError):
                    self.store.patch(DEPLOYMENTS, meta["namespace"], meta["name"],
                                     {"status": {"collisionCount": count}}, "merge", subresource="status",
                                     user=DEPLOYMENT_USER)
            return None
        if initial > 0:
            record_event(self.store, self.clock, deployment, "Normal", "ScalingReplicaSet",
                         f"Scaled up replica set {rs_name} from 0 to {initial}", DEPLOYMENT_COMPONENT)
        return created

    def _scale(self, deployment: JsonObj, rs: JsonObj, replicas: int) -> None:
        current = desired_replicas(rs)
        if current == replicas:
            return
        meta = rs["metadata"]
        surge = rolling_budget(deployment).max_surge
        try:
            self.store.patch(REPLICASETS, meta["namespace"], meta["name"], {
                "metadata": {"annotations": {DESIRED_REPLICAS: str(desired_replicas(deployment)),
                                             MAX_REPLICAS: str(desired_replicas(deployment) + surge)}},
                "spec": {"replicas": replicas}}, "merge", user=DEPLOYMENT_USER)
        except ApiError:
            return
        rs.setdefault("spec", {})["replicas"] = replicas
        direction = "up" if replicas > current else "down"
        record_event(self.store, self.clock, deployment, "Normal", "ScalingReplicaSet",
                     f"Scaled {direction} replica set {meta['name']} from {current} to {replicas}",
                     DEPLOYMENT_COMPONENT)

    def _recreate(self, deployment: JsonObj, new_rs: JsonObj, old_rs: list[JsonObj], replicas: int) -> None:
        for rs in old_rs:
            self._scale(deployment, rs, 0)
        still_running = any(int((rs.get("status") or {}).get("replicas") or 0) for rs in old_rs)
        if not still_running:
            self._scale(deployment, new_rs, replicas)

    def _roll(self, deployment: JsonObj, new_rs: JsonObj, old_rs: list[JsonObj], replicas: int,
              max_surge: int, max_unavailable: int) -> None:
        new_count = desired_replicas(new_rs)
        if new_count > replicas:
            self._scale(deployment, new_rs, replicas)
        elif new_count < replicas:
            total = new_count + sum(desired_replicas(rs) for rs in old_rs)
            room = replicas + max_surge - total
            if room > 0:
                self._scale(deployment, new_rs, new_count + min(room, replicas - new_count))
        active_old = [rs for rs in old_rs if desired_replicas(rs) > 0]
        if not active_old:
            return
        min_available = replicas - max_unavailable
        new_status = new_rs.get("status") or {}
        new_unavailable = desired_replicas(new_rs) - int(new_status.get("availableReplicas") or 0)
        all_count = desired_replicas(new_rs) + sum(desired_replicas(rs) for rs in active_old)
        budget = all_count - min_available - max(new_unavailable, 0)
        if budget <= 0:
            return
        # First drop old replicas that are not available anyway (they cost no availability).
        for rs in active_old:
            if budget <= 0:
                break
            available = int((rs.get("status") or {}).get("availableReplicas") or 0)
            unhealthy = desired_replicas(rs) - available
            if unhealthy > 0:
                cut = min(budget, unhealthy)
                self._scale(deployment, rs, desired_replicas(rs) - cut)
                budget -= cut
        available_total = int(new_status.get("availableReplicas") or 0) + sum(
            int((rs.get("status") or {}).get("availableReplicas") or 0) for rs in active_old)
        room_down = available_total - min_available
        for rs in active_old:
            if room_down <= 0:
                break
            cut = min(desired_replicas(rs), room_down)
            if cut > 0:
                self._scale(deployment, rs, desired_replicas(rs) - cut)
                room_down -= cut

    def _cleanup(self, deployment: JsonObj, old_rs: list[JsonObj]) -> None:
        """Keep at most revisionHistoryLimit scaled-to-zero old ReplicaSets (oldest go first)."""
        limit = (deployment.get("spec") or {}).get("revisionHistoryLimit")
        limit = as_int(limit, DEFAULT_REVISION_HISTORY)
        idle = [rs for rs in old_rs if desired_replicas(rs) == 0
                and not int((rs.get("status") or {}).get("replicas") or 0)]
        for rs in sorted(idle, key=revision_of)[: max(len(idle) - limit, 0)]:
            with contextlib.suppress(ApiError):
                self.store.delete(REPLICASETS, rs["metadata"]["namespace"], rs["metadata"]["name"],
                                  user=DEPLOYMENT_USER)

    def _sync_revision(self, deployment: JsonObj, new_rs: JsonObj) -> None:
        revision = str(revision_of(new_rs))
        meta = deployment["metadata"]
        if (meta.get("annotations") or {}).get(REVISION) == revision:
            return
        with contextlib.suppress(ApiError):
            self.store.patch(DEPLOYMENTS, meta["namespace"], meta["name"],
                             {"metadata": {"annotations": {REVISION: revision}}}, "merge", user=DEPLOYMENT_USER)

    # -- status --------------------------------------------------------------------------------
    def _write_status(self, deployment: JsonObj, new_rs: JsonObj | None, old_rs: list[JsonObj], replicas: int,
                      max_unavailable: int, created_new: bool) -> float | None:
        meta = deployment["metadata"]
        uid = str(meta.get("uid", ""))
        spec = deployment.get("spec") or {}
        all_rs = [*old_rs, *([new_rs] if new_rs is not None else [])]

        def total(field: str) -> int:
            return sum(int((rs.get("status") or {}).get(field) or 0) for rs in all_rs)

        updated = int(((new_rs or {}).get("status") or {}).get("replicas") or 0)
        available = total("availableReplicas")
        ready = total("readyReplicas")
        current_replicas = total("replicas")
        spec_total = sum(desired_replicas(rs) for rs in all_rs)
        status = dict(deployment.get("status") or {})
        conditions = [dict(c) for c in status.get("conditions") or []]
        now = rfc3339(self.clock.now())
        rs_name = str((new_rs or {}).get("metadata", {}).get("name", ""))

        if available >= replicas - max_unavailable:
            set_condition(conditions, "Available", "True", "MinimumReplicasAvailable",
                          "Deployment has minimum availability.", now, update_time=True)
        else:
            set_condition(conditions, "Available", "False", "MinimumReplicasUnavailable",
                          "Deployment does not have minimum availability.", now, update_time=True)

        requeue: float | None = None
        deadline = spec.get("progressDeadlineSeconds")
        deadline_seconds = float(as_int(deadline, self.settings.progress_deadline_default))
        complete = (new_rs is not None and updated == replicas and available >= replicas
                    and current_replicas == replicas and desired_replicas(new_rs) == replicas)
        signature = (rs_name, updated, ready, available, current_replicas, replicas)
        progress = self._progress.get(uid)
        moved = progress is None or progress.signature != signature or created_new
        if moved:
            self._progress[uid] = progress = Progress(signature, self.clock.monotonic())
        assert progress is not None
        existing = find_condition(conditions, "Progressing")
        if new_rs is None:
            pass
        elif complete:
            set_condition(conditions, "Progressing", "True", "NewReplicaSetAvailable",
                          f'ReplicaSet "{rs_name}" has successfully progressed.', now, update_time=True)
        elif created_new:
            set_condition(conditions, "Progressing", "True", "NewReplicaSetCreated",
                          f'Created new replica set "{rs_name}"', now, update_time=True)
        elif existing is None:
            set_condition(conditions, "Progressing", "True", "FoundNewReplicaSet",
                          f'Found new replica set "{rs_name}"', now, update_time=True)
        elif moved:
            set_condition(conditions, "Progressing", "True", "ReplicaSetUpdated",
                          f'ReplicaSet "{rs_name}" is progressing.', now, update_time=True)
            existing["lastUpdateTime"] = now  # every bit of progress refreshes it, same message or not
        if new_rs is not None and not complete and not spec.get("paused"):
            elapsed = (self.clock.monotonic() - progress.at) / self._tf()
            if elapsed >= deadline_seconds:
                set_condition(conditions, "Progressing", "False", "ProgressDeadlineExceeded",
                              f'ReplicaSet "{rs_name}" has timed out progressing.', now, update_time=True)
            else:
                requeue = (deadline_seconds - elapsed) * self._tf() + 0.001
        failures = [c for rs in ([new_rs] if new_rs is not None else []) + old_rs
                    for c in (rs.get("status") or {}).get("conditions") or []
                    if c.get("type") == "ReplicaFailure" and c.get("status") == "True"]
        if failures:
            set_condition(conditions, "ReplicaFailure", "True", str(failures[0].get("reason", "")),
                          str(failures[0].get("message", "")), now, update_time=True)
        else:
            conditions = [c for c in conditions if c.get("type") != "ReplicaFailure"]
        # Kubernetes lists Available before Progressing.
        conditions.sort(key=lambda c: {"Available": 0, "Progressing": 1}.get(str(c.get("type")), 2))
        update: JsonObj = {
            "observedGeneration": meta.get("generation", 1),
            "replicas": current_replicas,
            "updatedReplicas": updated,
            "readyReplicas": ready,
            "availableReplicas": available,
            "unavailableReplicas": max(spec_total - available, 0) if spec_total else max(replicas - available, 0),
            "conditions": conditions,
        }
        if any(status.get(k) != v for k, v in update.items()):
            with contextlib.suppress(ApiError):
                self.store.patch(DEPLOYMENTS, meta["namespace"], meta["name"], {"status": update}, "merge",
                                 subresource="status", user=DEPLOYMENT_USER)
        return requeue
