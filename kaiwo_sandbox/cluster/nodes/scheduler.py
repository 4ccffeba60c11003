"""The kube-scheduler, serving both the `default-scheduler` and `kaiwo-scheduler` profiles.

All scheduling happens in one work key: a pass lists nodes once and places the pods waiting for a
node in priority order, so pods placed earlier in the same pass are accounted for. What bound pods
hold on each node is kept up to date from pod events (charged on binding, released when the pod
ends or goes), as the real scheduler's cache does, so a pass costs what is waiting, not every pod
in the cluster: at 10,000 running pods walking and re-parsing them all on every new pod's pass was
most of the simulated cluster's CPU. Within a pass, pods shaped alike (same requests, selectors,
affinity, tolerations, profile) that come after one that did not fit get its verdict without
walking the nodes again, until a placement changes what the nodes hold: in a full cluster
thousands of identical pods wait, and every pod that finishes makes them all be tried. Pods already
known not to fit are retried only when something that could make room changed (a node, a pod
leaving a node, a claim getting bound) — the real scheduler's "move unschedulable pods back to the
active queue on cluster events".
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from decimal import Decimal

from kaiwo_sandbox.cluster.base import ClusterSettings, Controller, Key
from kaiwo_sandbox.cluster.conditions import find_condition
from kaiwo_sandbox.cluster.events import record_event
from kaiwo_sandbox.cluster.nodes.scheduling import (
    DEFAULT_SCHEDULER,
    SCHEDULER_NAMES,
    NodeState,
    Placement,
    Unschedulable,
    claim_names,
    has_pod_affinity,
    node_state,
    place_pod,
    pod_priority,
    queue_order,
    volume_problem,
)
from kaiwo_sandbox.cluster.pods import as_int, is_terminal, pod_requests_units
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
PodKey = tuple[str, str]
GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"


def _scheduler_name(pod: JsonObj) -> str:
    return str((pod.get("spec") or {}).get("schedulerName") or DEFAULT_SCHEDULER)


def _pending(pod: JsonObj) -> bool:
    return (not (pod.get("spec") or {}).get("nodeName") and not is_terminal(pod)
            and not (pod.get("metadata") or {}).get("deletionTimestamp"))


def _pod_key(pod: JsonObj) -> PodKey:
    meta = pod.get("metadata") or {}
    return (str(meta.get("namespace", "")), str(meta.get("name", "")))


def _holds_resources(pod: JsonObj) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName")) and not is_terminal(pod)


class Scheduler(Controller):
    name = "scheduler"
    watches = (PODS, NODES, PVCS)

    def __init__(self, store: Store, clock: Clock, settings: ClusterSettings) -> None:
        super().__init__(store, clock, settings)
        # uids of pods that did not fit the last time they were tried; cleared when room may appear
        self._unschedulable: set[str] = set()
        # what decides each waiting pod's placement, as a hashable key (pods alike share verdicts)
        self._shapes: dict[PodKey, str] = {}
        # pods waiting for a node that one of our profiles serves (read-only snapshots from events)
        self._waiting: dict[PodKey, JsonObj] = {}
        # what each pod holding a node is charged there, and the totals per node
        self._charged: dict[PodKey, tuple[str, dict[str, Decimal]]] = {}
        self._used: dict[str, dict[str, Decimal]] = {}
        self._pod_counts: dict[str, int] = {}
        # Each node as the scheduler sees it (what it offers, parsed once per change of the node), kept
        # from node events like the pods above: listing and re-parsing every node on every pass was a
        # sixth of a 100-node simulation's CPU. Passes copy these (`_node_states`), never change them.
        self._nodes: dict[str, NodeState] = {}
        self._node_order: list[NodeState] | None = None  # by name, until the nodes change

    def initial_keys(self) -> Iterable[Key]:
        for node in self.store.list(NODES)[0]:
            self._track_node(node, gone=False)
        for pod in self.store.list(PODS)[0]:
            self._track(_pod_key(pod), pod)
        return [PASS]

    def _track_node(self, node: JsonObj, *, gone: bool) -> None:
        name = str((node.get("metadata") or {}).get("name", ""))
        if gone:
            self._nodes.pop(name, None)
        else:
            self._nodes[name] = node_state(node)
        self._node_order = None

    def _node_states(self) -> list[NodeState]:
        """Fresh copies of every node's state, by name, charged with what bound pods hold."""
        if self._node_order is None:
            self._node_order = sorted(self._nodes.values(), key=lambda n: n.name)
        nodes = []
        for template in self._node_order:
            # labels, taints and allocatable are only read during a pass: shared; what a pass charges is its own
            node = NodeState(template.name, template.labels, template.taints, template.unschedulable,
                             template.allocatable)
            node.used = dict(self._used.get(node.name, {}))
            node.pods = self._pod_counts.get(node.name, 0)
            nodes.append(node)
        return nodes

    def _track(self, key: PodKey, pod: JsonObj | None) -> None:
        """Keep the waiting set and the per-node charges in line with the pod's latest state
        (None: the pod is gone)."""
        self._waiting.pop(key, None)
        self._shapes.pop(key, None)
        charged = self._charged.get(key)
        if pod is not None and _holds_resources(pod):
            node = str(pod["spec"]["nodeName"])
            if charged is not None and charged[0] == node:
                return  # a status change of a running pod: requests are immutable, nothing to redo
            if charged is not None:
                self._release(key)
            requests = pod_requests_units(pod)
            self._charged[key] = (node, requests)
            used = self._used.setdefault(node, {})
            for name, value in requests.items():
                used[name] = used.get(name, Decimal(0)) + value
            self._pod_counts[node] = self._pod_counts.get(node, 0) + 1
            return
        if charged is not None:
            self._release(key)
        if pod is not None and _pending(pod) and _scheduler_name(pod) in SCHEDULER_NAMES:
            self._waiting[key] = pod

    def _release(self, key: PodKey) -> None:
        node, requests = self._charged.pop(key)
        used = self._used.get(node, {})
        for name, value in requests.items():
            used[name] = used.get(name, Decimal(0)) - value
        self._pod_counts[node] = self._pod_counts.get(node, 0) - 1

    def keys_for(self, event: WatchEvent) -> Iterable[Key]:
        obj, old = event.object, event.old
        if event.gvr.resource == "nodes":
            self._track_node(obj, gone=event.type == "DELETED")
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
        pod_key = _pod_key(obj)
        uid = str((obj.get("metadata") or {}).get("uid", ""))
        if event.type == "DELETED":
            self._track(pod_key, None)
            self._unschedulable.discard(uid)
            if _holds_resources(obj):
                self._unschedulable.clear()  # its node has room again
                return [PASS]
            return []
        self._track(pod_key, obj)
        if old is not None and _holds_resources(old) and not _holds_resources(obj):
            self._unschedulable.clear()  # a pod finished: its node has room again
            return [PASS]
        if pod_key not in self._waiting:
            return []
        if old is None or (old.get("spec") or {}) != (obj.get("spec") or {}):
            # New pod, or gates lifted / selectors injected (Kueue admission): try it again.
            self._unschedulable.discard(uid)
            return [PASS]
        return []

    def reconcile(self, key: Key) -> float | None:
        candidates = [p for p in self._waiting.values()
                      if str(p["metadata"].get("uid", "")) not in self._unschedulable]
        if not candidates:
            return None
        classes, global_default = self._priority_classes()
        candidates.sort(key=lambda p: queue_order(p, pod_priority(p, classes, global_default)))
        nodes = self._node_states()
        by_name = {n.name: n for n in nodes}
        if any(has_pod_affinity(p) for p in candidates):
            for bound in self.store.list(PODS)[0]:
                node_name = (bound.get("spec") or {}).get("nodeName")
                if node_name in by_name and not is_terminal(bound):
                    meta = bound.get("metadata") or {}
                    by_name[node_name].pod_labels.append((str(meta.get("namespace", "")), meta.get("labels") or {}))
        claims: dict[str, dict[str, str | None]] = {}
        verdicts: dict[str, Unschedulable] = {}  # by shape, until the next placement
        for pod in candidates:
            self._schedule_one(pod, nodes, by_name, claims, verdicts)
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

    def _shape(self, pod: JsonObj) -> str:
        """What place_pod looks at, as one string: pods with equal shapes get equal verdicts on
        equal nodes. Cached per pod until its next event (its spec may have changed)."""
        key = _pod_key(pod)
        shape = self._shapes.get(key)
        if shape is None:
            spec = pod.get("spec") or {}
            shape = json.dumps([_scheduler_name(pod), sorted((k, str(v)) for k, v in pod_requests_units(pod).items()),
                                spec.get("nodeSelector"), spec.get("affinity"), spec.get("tolerations")],
                               sort_keys=True, default=str)
            self._shapes[key] = shape
        return shape

    def _schedule_one(self, pod: JsonObj, nodes: list[NodeState], by_name: dict[str, NodeState],
                      claims: dict[str, dict[str, str | None]], verdicts: dict[str, Unschedulable]) -> None:
        meta = pod["metadata"]
        namespace, name, uid = str(meta.get("namespace", "")), str(meta["name"]), str(meta.get("uid", ""))
        if (pod.get("spec") or {}).get("schedulingGates"):
            self._set_unschedulable_condition(pod, "SchedulingGated", GATED_MESSAGE, emit=False)
            self._unschedulable.add(uid)  # tried again when its gates go (a spec change)
            return
        # A pod with claims also depends on their phases: it never shares a verdict.
        shape = None if claim_names(pod) else self._shape(pod)
        known = verdicts.get(shape) if shape is not None else None
        if known is not None:
            self._unschedulable.add(uid)
            self._set_unschedulable_condition(pod, "Unschedulable", known.message, emit=True)
            return
        problem = None
        if shape is None:
            problem = volume_problem(pod, self._claim_phases(namespace, claims))
        decision = place_pod(pod, nodes, problem)
        component = _scheduler_name(pod)
        if isinstance(decision, Placement):
            try:
                self._bind(namespace, name, decision.node)
            except ApiError:
                return  # deleted or bound meanwhile; the resulting event brings us back
            by_name[decision.node].charge(pod_requests_units(pod))
            by_name[decision.node].pod_labels.append((namespace, meta.get("labels") or {}))
            verdicts.clear()  # the nodes changed: earlier "does not fit" may now read differently
            record_event(self.store, self.clock, pod, "Normal", "Scheduled",
                         f"Successfully assigned {namespace}/{name} to {decision.node}", component)
            return
        if shape is not None:
            verdicts[shape] = decision
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
