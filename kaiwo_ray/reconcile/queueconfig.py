"""The KaiwoQueueConfig reconcile decisions (spec/cluster.md §4-§5), as pure functions.

The controller shell (`kaiwo_ray/controllers/queueconfig.py`) reads its caches, asks these
functions what to do, and carries the answer out one Kueue kind at a time (Topologies ->
ResourceFlavors -> ClusterQueues -> LocalQueues -> WorkloadPriorityClasses), so each step sees
what the previous one created (a LocalQueue's owner is the ClusterQueue's fresh UID).

Deliberate differences from upstream (docs/compatibility.md):

* **Ownership, not names.** Every object we create carries a controller ownerReference to the
  KaiwoQueueConfig (LocalQueues: to their ClusterQueue) and the label
  `kaiwo.silogen.ai/managed-by: kaiwo-ray`. Only objects whose ownerReference names our UID are
  updated or deleted; an object another tool created with a name from the spec is left alone and
  reported (FAILED), never deleted or overwritten. Objects still owned by a previous incarnation of
  KaiwoQueueConfig `kaiwo` (deleted and recreated) are adopted rather than fought over.
* **Semantic comparison.** Specs are compared after normalising what the API server or Kueue may
  spell differently (quantities, Kueue defaults, v1beta1/v1beta2 names, resource order), and
  compared whole: a subset check could not see a field removed from the KaiwoQueueConfig.
  Equal specs mean no write, so a quiet resync makes zero API writes.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal

from kaiwo_ray.api.config import KaiwoConfigSpec
from kaiwo_ray.api.errors import ManifestError
from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.load import parse_as
from kaiwo_ray.api.meta import ObjectMeta
from kaiwo_ray.api.quantity import parse_quantity
from kaiwo_ray.api.queueconfig import KaiwoQueueConfig, KaiwoQueueConfigSpec
from kaiwo_ray.reconcile.events import PlannedEvent
from kaiwo_ray.render.nodepools import (
    TOPOLOGY_BLOCK_LABEL,
    TOPOLOGY_RACK_LABEL,
    NodeDiscoveryError,
    default_queue_config,
    desired_node_labels_and_taints,
    flavor_name_for_node,
    merge_default_queue_config,
)
from kaiwo_ray.render.queue import (
    KAIWO_API_VERSION,
    KueueVersion,
    queue_config_owner_reference,
    render_cluster_queue,
    render_local_queue,
    render_resource_flavor,
    render_topology,
    render_workload_priority_class,
)

QUEUE_CONFIG_NAME = "kaiwo"
MANAGED_BY_LABEL = "kaiwo.silogen.ai/managed-by"
MANAGED_BY = "kaiwo-ray"
RESOURCE_IN_USE_FINALIZER = "kueue.x-k8s.io/resource-in-use"
# Startup labels (cluster.md §3.3): what the default Topology's levels need on every node.
STARTUP_TOPOLOGY_LABELS = {TOPOLOGY_BLOCK_LABEL: "block-a", TOPOLOGY_RACK_LABEL: "rack-a"}
WRONG_NAME_MESSAGE = f"only a KaiwoQueueConfig named '{QUEUE_CONFIG_NAME}' is allowed"

READY = "READY"
FAILED = "FAILED"

# Event targets, in sync order.
TOPOLOGY = "Topology"
RESOURCE_FLAVOR = "ResourceFlavor"
CLUSTER_QUEUE = "ClusterQueue"
LOCAL_QUEUE = "LocalQueue"
PRIORITY_CLASS = "WorkloadPriorityClass"
SYNC_ORDER = (TOPOLOGY, RESOURCE_FLAVOR, CLUSTER_QUEUE, LOCAL_QUEUE, PRIORITY_CLASS)

Verb = Literal["create", "update", "delete", "fail", "wait"]


# --- the KaiwoQueueConfig itself ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QueueConfigDecision:
    """What to do with KaiwoQueueConfig `kaiwo` before syncing Kueue.

    Exactly one of: `error` (invalid spec or nodes that cannot form a default queue; nothing is
    synced), `create` (the default object to create), `update_spec` (a new spec for the live
    object), or neither (sync the live object as it is). `spec` is what to sync afterwards.
    """

    spec: KaiwoQueueConfigSpec | None = None
    create: JsonObj | None = None
    update_spec: JsonObj | None = None
    error: str = ""
    reason: str = ""  # event reason when `create`/`update_spec`/`error` is set
    message: str = ""  # event message for `create`/`update_spec`


def decide_queue_config(live: Mapping[str, Any] | None, config: KaiwoConfigSpec,
                        nodes: Sequence[Mapping[str, Any]]) -> QueueConfigDecision:
    """§4.3 steps 1-2 and §5.4: create the default when `kaiwo` is absent; in dynamic mode merge
    a fresh node discovery into it; otherwise drop topologies without a name. The created or
    merged object is what gets synced (upstream syncs an empty spec right after creating it)."""
    try:
        if live is None:
            spec = default_queue_config(nodes, config)
            body = {"apiVersion": KAIWO_API_VERSION, "kind": "KaiwoQueueConfig",
                    "metadata": {"name": QUEUE_CONFIG_NAME}, "spec": dump_spec(spec)}
            return QueueConfigDecision(spec=spec, create=body, reason="KaiwoQueueConfigDefaultCreated",
                                       message="Created KaiwoQueueConfig kaiwo from the cluster's nodes")
        existing = parse_spec(live)
        if config.dynamically_update_default_cluster_queue:
            merged = merge_default_queue_config(existing, default_queue_config(nodes, config), config)
            if spec_fingerprint(merged) != spec_fingerprint(existing):
                return QueueConfigDecision(spec=merged, update_spec=dump_spec(merged),
                                           reason="KaiwoQueueConfigDefaultUpdated",
                                           message="Updated the default queue of KaiwoQueueConfig kaiwo "
                                                   "from the cluster's nodes")
            return QueueConfigDecision(spec=existing)
    except ManifestError as err:
        return QueueConfigDecision(error=f"invalid spec: {err}", reason="KaiwoQueueConfigInvalidSpec")
    except NodeDiscoveryError as err:
        return QueueConfigDecision(error=str(err), reason="KaiwoQueueConfigNodeDiscoveryFailed")
    named = [t for t in existing.topologies if t.metadata.name]
    if len(named) != len(existing.topologies):
        cleaned = existing.model_copy(update={"topologies": named})
        return QueueConfigDecision(spec=cleaned, update_spec=dump_spec(cleaned),
                                   reason="KaiwoQueueConfigTopologiesCleaned",
                                   message="Removed topologies without a name from KaiwoQueueConfig kaiwo")
    return QueueConfigDecision(spec=existing)


def parse_spec(obj: Mapping[str, Any]) -> KaiwoQueueConfigSpec:
    """The live object's spec as our model; ManifestError names the bad field (`spec.clusterQueues[0]...`)."""
    doc = {"apiVersion": KAIWO_API_VERSION, "kind": "KaiwoQueueConfig",
           "metadata": {"name": (obj.get("metadata") or {}).get("name") or ""}, "spec": obj.get("spec") or {}}
    return parse_as(KaiwoQueueConfig, doc).spec


def dump_spec(spec: KaiwoQueueConfigSpec) -> JsonObj:
    dumped: JsonObj = spec.model_dump(by_alias=True, exclude_none=True, mode="json")
    return dumped


def spec_fingerprint(spec: KaiwoQueueConfigSpec) -> Any:
    """A comparable form of a spec: quantities by value, so `"7"` and `7` are the same spec."""
    return _canonical_quantities(dump_spec(spec))


def with_identity(spec: KaiwoQueueConfigSpec, obj: Mapping[str, Any]) -> KaiwoQueueConfig:
    """The typed object the renderer needs (name and UID for ownerReferences)."""
    meta = obj.get("metadata") or {}
    return KaiwoQueueConfig(metadata=ObjectMeta(name=meta.get("name"), uid=meta.get("uid")), spec=spec)


def status_patch(live: Mapping[str, Any], ok: bool) -> JsonObj | None:
    """Status is written only when it changes (§4.1)."""
    wanted = READY if ok else FAILED
    if ((live.get("status") or {}).get("status") or "") == wanted:
        return None
    return {"status": {"status": wanted}}


# --- nodes ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NodePatch:
    name: str
    patch: JsonObj  # JSON merge patch


def node_patches(nodes: Iterable[Mapping[str, Any]], config: KaiwoConfigSpec, *,
                 startup_labels: bool = False) -> list[NodePatch]:
    """§5.2 side effects (pool labels, optional GPU taint) and, at startup, §3.3's topology labels,
    as one merge patch per node that needs anything. Labels are only added or changed, never
    removed; the taint list is sent whole (merge patch replaces lists) with the resourceVersion it
    was computed from, so a concurrent taint change fails with a conflict instead of being lost."""
    patches: list[NodePatch] = []
    for node in nodes:
        meta = node.get("metadata") or {}
        labels_now = meta.get("labels") or {}
        labels: dict[str, str] = {}
        if startup_labels:
            labels |= {k: v for k, v in STARTUP_TOPOLOGY_LABELS.items() if k not in labels_now}
        taints: list[JsonObj] = []
        try:
            flavor = flavor_name_for_node(node, config)
        except NodeDiscoveryError:
            flavor = None  # an unreadable capacity: the node is in no pool (discovery reports it)
        if flavor is not None:
            add_labels, taints = desired_node_labels_and_taints(node, flavor, config)
            labels |= add_labels
        if not labels and not taints:
            continue
        patch: JsonObj = {"metadata": {"labels": labels}} if labels else {"metadata": {}}
        if taints:
            patch["metadata"]["resourceVersion"] = meta.get("resourceVersion")
            patch["spec"] = {"taints": [*((node.get("spec") or {}).get("taints") or []), *taints]}
        patches.append(NodePatch(str(meta.get("name") or ""), patch))
    return patches


# --- Kueue objects ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Action:
    """One step of the sync. `body` is the object to create or the full replacement to PUT;
    `live` the object acted on (its UID guards deletes); `message` explains fail/wait."""

    verb: Verb
    target: str  # Kueue kind, as events name it
    name: str
    namespace: str = ""
    body: JsonObj | None = None
    live: JsonObj | None = None
    message: str = ""


Ownership = Literal["ours", "previous", "foreign"]


def ownership(obj: Mapping[str, Any], owner_uid: str, owner_kind: str = "KaiwoQueueConfig",
              owner_name: str = QUEUE_CONFIG_NAME) -> Ownership:
    """`ours`: an ownerReference names our UID. `previous`: the controller reference names an
    earlier object of the same kind and name (KaiwoQueueConfig `kaiwo` deleted and recreated;
    the garbage collector may not have caught up), which we adopt. Anything else is foreign."""
    refs = (obj.get("metadata") or {}).get("ownerReferences") or ()
    if owner_uid and any(ref.get("uid") == owner_uid for ref in refs):
        return "ours"
    for ref in refs:
        if ref.get("controller") and ref.get("kind") == owner_kind and ref.get("name") == owner_name:
            return "previous"
    return "foreign"


def desired_cluster_objects(queue_config: KaiwoQueueConfig, *, kueue_version: KueueVersion,
                            topology_api_available: bool = True) -> dict[str, list[JsonObj]]:
    """The cluster-scoped Kueue objects of the spec, by target kind, labelled as ours."""
    owner = queue_config_owner_reference(queue_config)
    spec = queue_config.spec
    objects = {
        TOPOLOGY: [render_topology(t, owner) for t in spec.topologies if t.metadata.name]
        if topology_api_available else [],
        RESOURCE_FLAVOR: [render_resource_flavor(f, owner, kueue_version=kueue_version,
                                                 topology_api_available=topology_api_available)
                          for f in spec.resource_flavors],
        CLUSTER_QUEUE: [render_cluster_queue(q, owner, kueue_version=kueue_version) for q in spec.cluster_queues],
        PRIORITY_CLASS: [render_workload_priority_class(w, owner, kueue_version=kueue_version)
                         for w in spec.workload_priority_classes],
    }
    for bodies in objects.values():
        for body in bodies:
            _label(body)
    return {kind: _first_of_each_name(bodies) for kind, bodies in objects.items()}


def plan_cluster_objects(target: str, desired: Sequence[JsonObj], live: Iterable[JsonObj],
                         owner_uid: str) -> list[Action]:
    """Create what is missing, update what drifted, delete what we own and the spec dropped."""
    live_by_name = {str(obj["metadata"]["name"]): obj for obj in live}
    wanted = {str(body["metadata"]["name"]) for body in desired}
    actions: list[Action] = []
    for body in desired:
        name = str(body["metadata"]["name"])
        current = live_by_name.get(name)
        if current is None:
            actions.append(Action("create", target, name, body=body))
            continue
        owner = ownership(current, owner_uid)
        if owner == "foreign":
            actions.append(Action("fail", target, name, live=current, message=(
                f"a {target} named {name!r} exists and is not managed by KaiwoQueueConfig "
                f"{QUEUE_CONFIG_NAME!r} (no ownerReference to it); delete or rename it, or rename the entry")))
        elif _terminating(current):
            actions.append(Action("wait", target, name, live=current, message="still being deleted"))
        elif owner == "previous" or not same_object(target, body, current):
            actions.append(Action("update", target, name, body=replacement(body, current), live=current))
    for name, current in live_by_name.items():
        if name not in wanted and ownership(current, owner_uid) == "ours" and not _terminating(current):
            actions.append(Action("delete", target, name, live=current))
    return actions


def plan_local_queues(queue_config: KaiwoQueueConfigSpec, cluster_queues: Mapping[str, JsonObj],
                      local_queues: Iterable[JsonObj], namespaces: Mapping[str, JsonObj], *,
                      kqc_uid: str, kueue_version: KueueVersion) -> list[Action]:
    """§4.4 LocalQueues, for ClusterQueue entries with `namespaces`: create the missing ones in
    existing namespaces (a missing or terminating namespace fails the step until it exists or is
    dropped from the list); delete ours whose namespace was dropped. Existing LocalQueues are
    never updated (a same-named one made by someone else serves the namespace just as well).

    Only ClusterQueues that are ours count: a LocalQueue's owner must be a queue we manage."""
    by_key: dict[tuple[str, str], JsonObj] = {}
    for lq in local_queues:
        meta = lq.get("metadata") or {}
        by_key[(str(meta.get("namespace") or ""), str(meta.get("name") or ""))] = lq
    actions: list[Action] = []
    for entry in queue_config.cluster_queues:
        cq = cluster_queues.get(entry.name)
        if cq is None or ownership(cq, kqc_uid) != "ours":
            continue  # not created (yet), or not ours: nothing of ours to hang LocalQueues on
        cq_uid = str(cq["metadata"].get("uid") or "")
        listed = list(dict.fromkeys(entry.namespaces))
        for namespace in listed:
            current = by_key.get((namespace, entry.name))
            if current is not None:
                if _terminating(current):
                    actions.append(Action("wait", LOCAL_QUEUE, entry.name, namespace, live=current,
                                          message="still being deleted"))
                continue
            ns = namespaces.get(namespace)
            if ns is None or _terminating(ns):
                why = "does not exist" if ns is None else "is being deleted"
                actions.append(Action("fail", LOCAL_QUEUE, entry.name, namespace, message=(
                    f"namespace {namespace!r} {why}; create it or remove it from clusterQueues "
                    f"{entry.name!r} namespaces")))
                continue
            body = render_local_queue(entry.name, namespace, cluster_queue_uid=cq_uid, kueue_version=kueue_version)
            actions.append(Action("create", LOCAL_QUEUE, entry.name, namespace, body=_label(body)))
        for (namespace, name), lq in by_key.items():
            if name != entry.name or namespace in listed or _terminating(lq):
                continue
            refs = (lq.get("metadata") or {}).get("ownerReferences") or ()
            ours_as_controller = any(r.get("uid") == cq_uid and r.get("controller") for r in refs)
            ours_at_all = any(r.get("uid") == cq_uid for r in refs)
            # Upstream's rule (a list exists and leaves this namespace out), narrowed to queues we
            # own; plus the ones we created ourselves when the list is emptied.
            if ours_as_controller or (listed and ours_at_all):
                actions.append(Action("delete", LOCAL_QUEUE, name, namespace, live=lq))
    return actions


# --- comparison ---------------------------------------------------------------------------------------


def same_object(target: str, desired: Mapping[str, Any], live: Mapping[str, Any]) -> bool:
    """No write needed: our label and ownerReference are there and the content is semantically equal."""
    meta = live.get("metadata") or {}
    if (meta.get("labels") or {}).get(MANAGED_BY_LABEL) != MANAGED_BY:
        return False
    wanted_refs = (desired.get("metadata") or {}).get("ownerReferences") or ()
    live_uids = {ref.get("uid") for ref in meta.get("ownerReferences") or ()}
    if any(ref.get("uid") not in live_uids for ref in wanted_refs):
        return False
    return bool(_content(target, desired) == _content(target, live))


def _content(target: str, obj: Mapping[str, Any]) -> Any:
    spec = obj.get("spec") or {}
    if target == PRIORITY_CLASS:
        return obj.get("value")  # upstream compares only `value`; a new description is not written
    if target == CLUSTER_QUEUE:
        return normalise_cluster_queue_spec(spec)
    if target == RESOURCE_FLAVOR:
        return {
            "nodeLabels": dict(spec.get("nodeLabels") or {}),
            "nodeTaints": list(spec.get("nodeTaints") or []),
            "tolerations": list(spec.get("tolerations") or []),
            "topologyName": spec.get("topologyName") or "",
        }
    if target == TOPOLOGY:
        return [level.get("nodeLabel") for level in spec.get("levels") or ()]
    return spec


_FUNGIBILITY_V1BETA2 = {"Borrow": "MayStopSearch", "Preempt": "MayStopSearch"}


def normalise_cluster_queue_spec(spec: Mapping[str, Any]) -> JsonObj:
    """A ClusterQueue spec in one canonical form, whichever Kueue version or writer produced it:
    Kueue's defaults filled, v1beta1 names mapped to v1beta2, quantities by value, each flavor's
    resources in `coveredResources` order. Fields Kueue may add that we never set are ignored."""
    fungibility = dict(spec.get("flavorFungibility") or {})
    preemption = dict(spec.get("preemption") or {})
    borrow = preemption.get("borrowWithinCohort")
    selector = spec.get("namespaceSelector")
    if isinstance(selector, Mapping):
        selector = {k: v for k, v in selector.items() if v}
    checks = [
        {"name": rule.get("name"), "onFlavors": list(rule.get("onFlavors") or [])}
        for rule in (spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or ()
    ]
    checks += [{"name": name, "onFlavors": []} for name in spec.get("admissionChecks") or ()
               if name not in {c["name"] for c in checks}]
    fair = spec.get("fairSharing") or {}
    return {
        "cohortName": spec.get("cohortName") or spec.get("cohort") or "",
        "queueingStrategy": spec.get("queueingStrategy") or "BestEffortFIFO",
        "stopPolicy": spec.get("stopPolicy") or "None",
        "namespaceSelector": selector,
        "flavorFungibility": {
            key: _FUNGIBILITY_V1BETA2.get(str(value), value)
            for key, value in (("whenCanBorrow", fungibility.get("whenCanBorrow") or "MayStopSearch"),
                               ("whenCanPreempt", fungibility.get("whenCanPreempt") or "TryNextFlavor"))
        },
        "preemption": {
            "reclaimWithinCohort": preemption.get("reclaimWithinCohort") or "Never",
            "withinClusterQueue": preemption.get("withinClusterQueue") or "Never",
            # Kueue's CRD defaults an absent borrowWithinCohort to {policy: Never}: the same thing.
            "borrowWithinCohort": None if borrow is None or _inert_borrow(borrow) else {
                "policy": borrow.get("policy") or "Never",
                "maxPriorityThreshold": borrow.get("maxPriorityThreshold"),
            },
        },
        "admissionChecks": sorted(checks, key=lambda c: str(c["name"])),
        "fairSharingWeight": _quantity_key(fair.get("weight", "1")),
        "resourceGroups": [_normalise_group(group) for group in spec.get("resourceGroups") or ()],
    }


def _inert_borrow(borrow: Mapping[str, Any]) -> bool:
    return not borrow or ((borrow.get("policy") or "Never") == "Never" and borrow.get("maxPriorityThreshold") is None)


def _normalise_group(group: Mapping[str, Any]) -> JsonObj:
    covered = list(group.get("coveredResources") or [])
    flavors = []
    for flavor in group.get("flavors") or ():
        by_name = {r.get("name"): r for r in flavor.get("resources") or ()}
        flavors.append({
            "name": flavor.get("name"),
            "resources": [
                {key: _quantity_key(by_name[name].get(key))
                 for key in ("nominalQuota", "borrowingLimit", "lendingLimit")} | {"name": name}
                for name in covered if name in by_name
            ],
        })
    return {"coveredResources": covered, "flavors": flavors}


def _quantity_key(value: Any) -> Any:
    if value is None:
        return None
    try:
        return parse_quantity(value)
    except ValueError:
        return value  # not ours to judge; compared as written


def _canonical_quantities(value: Any, key: str = "") -> Any:
    if isinstance(value, dict):
        return {k: _canonical_quantities(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_canonical_quantities(v, key) for v in value]
    if key in ("nominalQuota", "borrowingLimit", "lendingLimit", "weight") and isinstance(value, str | int):
        parsed = _quantity_key(value)
        return parsed if isinstance(parsed, Decimal) else value
    return value


# --- bodies ---------------------------------------------------------------------------------------------


def replacement(desired: Mapping[str, Any], live: Mapping[str, Any]) -> JsonObj:
    """The full object to PUT: the live object (resourceVersion kept, so a concurrent change fails
    with a conflict) with our content, our label, and our ownerReference in place of a previous
    incarnation's. Other labels, annotations, finalizers and owners are kept."""
    body = copy.deepcopy(dict(live))
    body.pop("status", None)
    meta = body.setdefault("metadata", {})
    meta.pop("managedFields", None)
    meta["labels"] = {**(meta.get("labels") or {}), MANAGED_BY_LABEL: MANAGED_BY}
    wanted_refs = list((desired.get("metadata") or {}).get("ownerReferences") or ())
    wanted_kinds = {(ref.get("kind"), ref.get("name")) for ref in wanted_refs}
    kept = [ref for ref in meta.get("ownerReferences") or ()
            if not (ref.get("controller") and (ref.get("kind"), ref.get("name")) in wanted_kinds)
            and ref.get("uid") not in {w.get("uid") for w in wanted_refs}]
    meta["ownerReferences"] = [*kept, *copy.deepcopy(wanted_refs)]
    body["apiVersion"] = desired.get("apiVersion", body.get("apiVersion"))
    body["kind"] = desired.get("kind", body.get("kind"))
    for key in ("spec", "value", "description"):
        if key in desired:
            body[key] = copy.deepcopy(desired[key])
        elif key == "spec":
            body.pop("spec", None)
    return body


def recreation(desired: Mapping[str, Any]) -> JsonObj:
    """A fresh object for the delete-and-recreate path (no live metadata carried over)."""
    return copy.deepcopy(dict(desired))


def without_finalizer(live: Mapping[str, Any], finalizer: str = RESOURCE_IN_USE_FINALIZER) -> JsonObj | None:
    """Merge patch removing `finalizer` (guarded by resourceVersion), or None when it is not there."""
    meta = live.get("metadata") or {}
    finalizers = list(meta.get("finalizers") or [])
    if finalizer not in finalizers:
        return None
    return {"metadata": {"resourceVersion": meta.get("resourceVersion"),
                         "finalizers": [f for f in finalizers if f != finalizer]}}


# --- events ---------------------------------------------------------------------------------------------


def success_event(target: str, action: str, name: str, namespace: str = "") -> PlannedEvent:
    """§4.5: reason `KaiwoQueueConfig<Target><Action>d`, message `<Action>d <Target> <ns>/<name>`."""
    return PlannedEvent("Normal", f"KaiwoQueueConfig{target}{action}d", f"{action}d {target} {namespace}/{name}")


def failure_event(target: str, action: str, name: str, namespace: str, error: str) -> PlannedEvent:
    return PlannedEvent("Warning", f"KaiwoQueueConfig{target}{action}Failed",
                 f"Failed to {action.lower()} {target} {namespace}/{name}: {error}")


@dataclass(slots=True)
class FailureMemory:
    """Failures already reported, so a failure that persists across retries is one event, not one
    per pass; a success (or a different error) makes the next failure news again."""

    seen: dict[tuple[str, str, str, str], str] = field(default_factory=dict)

    def is_new(self, key: tuple[str, str, str, str], message: str) -> bool:
        if self.seen.get(key) == message:
            return False
        self.seen[key] = message
        return True

    def retain(self, failing: set[tuple[str, str, str, str]]) -> None:
        """Forget failures that did not recur in the last pass (fixed, or their entry removed)."""
        self.seen = {k: v for k, v in self.seen.items() if k in failing}

    def clear(self, target: str, name: str, namespace: str = "") -> None:
        for key in [k for k in self.seen if k[0] == target and k[2] == name and k[3] == namespace]:
            del self.seen[key]


# --- helpers --------------------------------------------------------------------------------------------


def _label(body: JsonObj) -> JsonObj:
    meta = body.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), MANAGED_BY_LABEL: MANAGED_BY}
    return body


def _first_of_each_name(bodies: list[JsonObj]) -> list[JsonObj]:
    """Duplicate names in the spec: the first entry wins (one object per name exists)."""
    seen: set[str] = set()
    unique = []
    for body in bodies:
        name = str(body["metadata"]["name"])
        if name not in seen:
            seen.add(name)
            unique.append(body)
    return unique


def _terminating(obj: Mapping[str, Any]) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


__all__ = [
    "FAILED", "MANAGED_BY", "MANAGED_BY_LABEL", "QUEUE_CONFIG_NAME", "READY", "RESOURCE_IN_USE_FINALIZER",
    "SYNC_ORDER", "WRONG_NAME_MESSAGE", "Action", "FailureMemory", "NodePatch", "QueueConfigDecision",
    "decide_queue_config", "desired_cluster_objects", "failure_event", "node_patches", "normalise_cluster_queue_spec",
    "ownership", "parse_spec", "plan_cluster_objects", "plan_local_queues", "recreation", "replacement",
    "same_object", "spec_fingerprint", "status_patch", "success_event", "with_identity", "without_finalizer",
]
