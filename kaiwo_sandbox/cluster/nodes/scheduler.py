"""The kube-scheduler, serving both the `default-scheduler` and `kaiwo-scheduler` profiles.

All scheduling happens in one work key: a pass lists nodes and pods once, charges bound pods to
their nodes, and places pending pods in priority order, so pods placed earlier in the same pass
are accounted for. Pods already known not to fit are retried only when something that could
make room changed (a node, a pod leaving a node, a claim getting bound) — the real scheduler's
"move unschedulable pods back to the active queue on cluster events".
"""

from __future__ import annotations

from collections.abc import Iterable

from kaiwo_sandbox.cluster.base import ClusterSettings, Controller, Key
from kaiwo_sandbox.cluster.conditions import find_condition
from kaiwo_sandbox.cluster.events import record_event
from kaiwo_sandbox.cluster.nodes.scheduling import (
    DEFAULT_SCHEDULER,
    SCHEDULER_NAMES,
    NodeState,
    Placement,
    claim_names,
    node_state,
    place_pod,
    pod_priority,
    queue_order,
    volume_problem,
)
from kaiwo_sandbox.cluster.pods import as_int, is_terminal, pod_requests
from kaiwo_sandbox.contracts import (
    NODES,
    PODS,
    PRIORITYCLASSES,
    PVCS,
    ApiError,
    Clock,
    JsonObj,
    Store,
    WatchEvent,
    rfc3339,
)

PASS: Key = "scheduling-pass"
GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"


def _scheduler_name(pod: JsonObj) -> str:
    return str((pod.get("spec") or {}).get("schedulerName") or DEFAULT_SCHEDULER)


def _pending(pod: JsonObj) -> bool:
    return (not (pod.get("spec") or {}).get("nodeName") and not is_terminal(pod)
            and not (pod.get("metadata") or {}).get("deletionTimestamp"))


def _holds_resources(pod: JsonObj) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName")) and not is_terminal(pod)


class Scheduler(Controller):
    name = "scheduler"
    watches = (PODS, NODES, PVCS)

    def __init__(self, store: Store, clock: Clock, settings: ClusterSettings) -> None:
        super().__init__(store, clock, settings)
        # uids of pods that did not fit the last time they were tried; cleared when room may appear
        self._unschedulable: set[str] = set()
        # every pod, from watch events (read-only snapshots): a pass never lists the store
        self._pods: dict[tuple[str, str], JsonObj] = {}

    def initial_keys(self) -> Iterable[Key]:
        for pod in self.store.list(PODS)[0]:
            meta = pod["metadata"]
            self._pods[(str(meta.get("namespace", "")), str(meta["name"]))] = pod
        return [PASS]

    def keys_for(self, event: WatchEvent) -> Iterable[Key]:
        obj, old = event.object, event.old
        if event.gvr.resource == "nodes":
            if old is None or event.type == "DELETED" or _node_changed(old, obj):
                self._unschedulable.clear()
                return [PASS]
            return []
        if event.gvr.resource == "persistentvolumeclaims":
            phase = (obj.get("status") or {}).get("phase")
            if old is None or phase != (old.get("status") or {}).get("phase"):
                self._unschedulable.clear()
                return [PASS]
            return []
        meta = obj.get("metadata") or {}
        pod_key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        uid = str(meta.get("uid", ""))
        if event.type == "DELETED":
            self._pods.pop(pod_key, None)
            self._unschedulable.discard(uid)
            if _holds_resources(obj):
                self._unschedulable.clear()  # its node has room again
                return [PASS]
            return []
        self._pods[pod_key] = obj
        if old is not None and _holds_resources(old) and not _holds_resources(obj):
            self._unschedulable.clear()  # a pod finished: its node has room again
            return [PASS]
        if not _pending(obj) or _scheduler_name(obj) not in SCHEDULER_NAMES:
            return []
        if old is None or (old.get("spec") or {}) != (obj.get("spec") or {}):
            # New pod, or gates lifted / selectors injected (Kueue admission): try it again.
            self._unschedulable.discard(uid)
            return [PASS]
        return []

    def reconcile(self, key: Key) -> float | None:
        pods = list(self._pods.values())
        candidates = [p for p in pods if _pending(p) and _scheduler_name(p) in SCHEDULER_NAMES
                      and str(p["metadata"].get("uid", "")) not in self._unschedulable]
        if not candidates:
            return None
        classes, global_default = self._priority_classes()
        candidates.sort(key=lambda p: queue_order(p, pod_priority(p, classes, global_default)))
        node_list, _ = self.store.list(NODES)
        nodes = sorted((node_state(n) for n in node_list), key=lambda n: n.name)
        by_name = {n.name: n for n in nodes}
        for pod in pods:
            if _holds_resources(pod):
                node = by_name.get(str(pod["spec"]["nodeName"]))
                if node is not None:
                    node.charge(pod_requests(pod))
        claims: dict[str, dict[str, str | None]] = {}
        for pod in candidates:
            self._schedule_one(pod, nodes, by_name, claims)
        return None

    def _priority_classes(self) -> tuple[dict[str, int], int]:
        """PriorityClass values by name, and the globalDefault class's value (0 without one)."""
        values: dict[str, int] = {}
        default = 0
        for item in self.store.list(PRIORITYCLASSES)[0]:
            value = as_int(item.get("value"), 0)
            values[str(item["metadata"]["name"])] = value
            if item.get("globalDefault"):
                default = value
        return values, default

    def _claim_phases(self, namespace: str, claims: dict[str, dict[str, str | None]]) -> dict[str, str | None]:
        if namespace not in claims:
            items, _ = self.store.list(PVCS, namespace)
            claims[namespace] = {str(c["metadata"]["name"]): (c.get("status") or {}).get("phase") or "Pending"
                                 for c in items}
        return claims[namespace]

    def _schedule_one(self, pod: JsonObj, nodes: list[NodeState], by_name: dict[str, NodeState],
                      claims: dict[str, dict[str, str | None]]) -> None:
        meta = pod["metadata"]
        namespace, name, uid = str(meta.get("namespace", "")), str(meta["name"]), str(meta.get("uid", ""))
        if (pod.get("spec") or {}).get("schedulingGates"):
            self._set_unschedulable_condition(pod, "SchedulingGated", GATED_MESSAGE, emit=False)
            return
        problem = None
        if claim_names(pod):
            problem = volume_problem(pod, self._claim_phases(namespace, claims))
        decision = place_pod(pod, nodes, problem)
        component = _scheduler_name(pod)
        if isinstance(decision, Placement):
            try:
                self._bind(namespace, name, decision.node)
            except ApiError:
                return  # deleted or bound meanwhile; the resulting event brings us back
            by_name[decision.node].charge(pod_requests(pod))
            record_event(self.store, self.clock, pod, "Normal", "Scheduled",
                         f"Successfully assigned {namespace}/{name} to {decision.node}", component)
            return
        self._unschedulable.add(uid)
        self._set_unschedulable_condition(pod, "Unschedulable", decision.message, emit=True)

    def _bind(self, namespace: str, name: str, node: str) -> None:
        """POST pods/binding: sets nodeName and PodScheduled in one write, as the real scheduler does."""
        self.store.bind(namespace, name, node, user="system:kube-scheduler")

    def _set_unschedulable_condition(self, pod: JsonObj, reason: str, message: str, *, emit: bool) -> None:
        conditions = list((pod.get("status") or {}).get("conditions") or [])
        existing = find_condition(conditions, "PodScheduled")
        if existing is not None and existing.get("status") == "False" and existing.get("reason") == reason \
                and existing.get("message") == message:
            return
        now = rfc3339(self.clock.now())
        others = [c for c in conditions if c.get("type") != "PodScheduled"]
        keep_time = existing is not None and existing.get("status") == "False"
        condition: JsonObj = {
            "type": "PodScheduled", "status": "False", "lastProbeTime": None,
            "lastTransitionTime": existing.get("lastTransitionTime", now) if keep_time and existing else now,
            "reason": reason, "message": message,
        }
        meta = pod["metadata"]
        try:
            self.store.patch(PODS, meta.get("namespace"), str(meta["name"]),
                             {"status": {"phase": "Pending", "conditions": [*others, condition]}}, "merge",
                             subresource="status", user="system:kube-scheduler")
        except ApiError:
            return
        if emit:
            record_event(self.store, self.clock, pod, "Warning", "FailedScheduling", message, _scheduler_name(pod))


def _node_changed(old: JsonObj, new: JsonObj) -> bool:
    """Changes that can turn a 'no' into a 'yes': labels, taints, cordon, capacity, readiness."""
    def view(node: JsonObj) -> tuple[object, ...]:
        status = node.get("status") or {}
        ready = [c.get("status") for c in status.get("conditions") or [] if c.get("type") == "Ready"]
        spec = node.get("spec") or {}
        return ((node.get("metadata") or {}).get("labels"), spec.get("taints"), spec.get("unschedulable"),
                status.get("allocatable"), status.get("capacity"), ready)
    return view(old) != view(new)
