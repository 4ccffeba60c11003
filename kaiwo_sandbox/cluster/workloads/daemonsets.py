"""The DaemonSet controller: one pod per node the DaemonSet's pods may run on (the template's
nodeSelector and required node affinity, its tolerations against the node's NoSchedule/NoExecute
taints, plus the tolerations the real controller adds to every daemon pod), placed as the real one
places them: a required node affinity on `metadata.name` that the scheduler then honours. Pods on
nodes that no longer qualify, and duplicates, are deleted; status counts as `kubectl get ds` shows.
Not modelled: rolling updates of the template (new pods only replace deleted ones), surge, history.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable

from kaiwo_sandbox.cluster.base import Controller, Key
from kaiwo_sandbox.cluster.events import record_event
from kaiwo_sandbox.cluster.nodes.scheduling import NodeState, matches_affinity, node_state, tolerates
from kaiwo_sandbox.cluster.pods import controller_of, is_ready, is_terminal, owner_reference
from kaiwo_sandbox.contracts import DAEMONSETS, NODES, PODS, ApiError, JsonObj, WatchEvent

COMPONENT = "daemonset-controller"
USER = "system:serviceaccount:kube-system:daemon-set-controller"
# What the DaemonSet controller adds to every daemon pod (pkg/controller/daemon/util.AddOrUpdateDaemonPodTolerations).
DAEMON_TOLERATIONS: list[JsonObj] = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
]


def daemon_tolerations(pod_spec: JsonObj) -> list[JsonObj]:
    tolerations = [dict(t) for t in pod_spec.get("tolerations") or []]
    for extra in DAEMON_TOLERATIONS:
        if not any(t.get("key") == extra["key"] and t.get("effect") == extra["effect"] for t in tolerations):
            tolerations.append(dict(extra))
    return tolerations


def should_run(pod_spec: JsonObj, node: NodeState) -> bool:
    """The controller's nodeShouldRunDaemonPod: node affinity/selector and taints (not resources;
    an unschedulable node still runs daemon pods)."""
    tolerations = daemon_tolerations(pod_spec)
    if node.unschedulable and not tolerates(tolerations, {"key": "node.kubernetes.io/unschedulable",
                                                          "effect": "NoSchedule"}):
        return False
    for taint in node.taints:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
            return False
    return matches_affinity(pod_spec, node)


def daemon_pod(ds: JsonObj, node_name: str) -> JsonObj:
    """The pod the controller creates for `node_name`: the template, the controller's tolerations, and a
    required node affinity on the node's name (ANDed into each of the template's own terms)."""
    meta = ds.get("metadata") or {}
    template = copy.deepcopy((ds.get("spec") or {}).get("template") or {})
    pod_meta = template.get("metadata") or {}
    labels = dict(pod_meta.get("labels") or {})
    labels["pod-template-generation"] = str(meta.get("generation", 1))
    spec = template.get("spec") or {}
    spec["tolerations"] = daemon_tolerations(spec)
    node_term = {"key": "metadata.name", "operator": "In", "values": [node_name]}
    affinity = spec.setdefault("affinity", {})
    node_affinity = affinity.setdefault("nodeAffinity", {})
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or [{}]
    for term in terms:
        term["matchFields"] = [node_term]
    required["nodeSelectorTerms"] = terms
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": f"{meta.get('name', '')}-", "namespace": meta.get("namespace", ""),
                         "labels": labels, "annotations": dict(pod_meta.get("annotations") or {}),
                         "ownerReferences": [owner_reference(ds)]},
            "spec": spec}


def _target_node(pod: JsonObj) -> str:
    """The node a daemon pod is for: where it runs, else the name its affinity pins it to."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    for term in required.get("nodeSelectorTerms") or []:
        for field in term.get("matchFields") or []:
            if field.get("key") == "metadata.name" and field.get("values"):
                return str(field["values"][0])
    return ""


class DaemonSetController(Controller):
    name = "daemonset-controller"
    watches = (DAEMONSETS, NODES, PODS)

    def keys_for(self, event: WatchEvent) -> Iterable[Key]:
        resource = event.gvr.resource
        meta = event.object.get("metadata") or {}
        if resource == "daemonsets":
            return [(meta.get("namespace"), meta.get("name"))]
        if resource == "pods":
            owner = controller_of(event.object)
            if owner is not None and owner.get("kind") == "DaemonSet":
                return [(meta.get("namespace"), owner.get("name"))]
            return []
        if event.type == "MODIFIED" and event.old is not None and (
                (event.old.get("metadata") or {}).get("labels") == meta.get("labels")
                and (event.old.get("spec") or {}) == (event.object.get("spec") or {})):
            return []  # a status-only node change (heartbeats, usage) moves no daemon pod
        items, _ = self.store.list(DAEMONSETS)
        return [((d["metadata"].get("namespace")), d["metadata"].get("name")) for d in items]

    def reconcile(self, key: Key) -> float | None:
        namespace, name = str(key[0]), str(key[1])  # type: ignore[index]
        try:
            ds = self.store.get(DAEMONSETS, namespace, name)
        except ApiError as err:
            if err.code == 404:
                return None  # its pods go with it (garbage collection)
            raise
        if ds["metadata"].get("deletionTimestamp"):
            return None
        uid = ds["metadata"].get("uid")
        pod_spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
        nodes, _ = self.store.list(NODES)
        wanted = {n["metadata"]["name"] for n in nodes if should_run(pod_spec, node_state(n))}
        pods, _ = self.store.list(PODS, namespace)
        mine = [p for p in pods if (controller_of(p) or {}).get("uid") == uid
                and not p["metadata"].get("deletionTimestamp")]
        by_node: dict[str, list[JsonObj]] = {}
        for pod in mine:
            by_node.setdefault(_target_node(pod), []).append(pod)
        for node_name, node_pods in by_node.items():
            live = [p for p in node_pods if not is_terminal(p)]
            # Not wanted here, a duplicate, or a failed daemon pod (the real controller replaces those).
            doomed = node_pods if node_name not in wanted else [p for p in node_pods if is_terminal(p)] + live[1:]
            for pod in doomed:
                try:
                    self.store.delete(PODS, namespace, pod["metadata"]["name"], user=USER)
                except ApiError as err:
                    if err.code != 404:
                        raise
                record_event(self.store, self.clock, ds, "Normal", "SuccessfulDelete",
                             f"Deleted pod: {pod['metadata']['name']}", COMPONENT)
        for node_name in sorted(wanted):
            if any(not is_terminal(p) for p in by_node.get(node_name, [])):
                continue
            created = self.store.create(PODS, daemon_pod(ds, node_name), namespace=namespace, user=USER)
            record_event(self.store, self.clock, ds, "Normal", "SuccessfulCreate",
                         f"Created pod: {created['metadata']['name']}", COMPONENT)
        self._write_status(ds, wanted, namespace)
        return None

    def _write_status(self, ds: JsonObj, wanted: set[str], namespace: str) -> None:
        uid = ds["metadata"].get("uid")
        pods, _ = self.store.list(PODS, namespace)
        mine = [p for p in pods if (controller_of(p) or {}).get("uid") == uid and not is_terminal(p)
                and not p["metadata"].get("deletionTimestamp")]
        scheduled = [p for p in mine if (p.get("spec") or {}).get("nodeName")]
        current = sum(1 for p in scheduled if p["spec"]["nodeName"] in wanted)
        ready = sum(1 for p in scheduled if p["spec"]["nodeName"] in wanted and is_ready(p))
        status: JsonObj = {
            "currentNumberScheduled": current,
            "desiredNumberScheduled": len(wanted),
            "numberMisscheduled": sum(1 for p in scheduled if p["spec"]["nodeName"] not in wanted),
            "numberReady": ready,
            "numberAvailable": ready,
            "updatedNumberScheduled": current,
            "observedGeneration": ds["metadata"].get("generation", 1),
        }
        if len(wanted) - ready > 0:
            status["numberUnavailable"] = len(wanted) - ready
        if (ds.get("status") or {}) != status:
            ds["status"] = status
            self.store.update(DAEMONSETS, ds, subresource="status", user=USER)
