"""What a real Kueue refuses of a ClusterQueue or ResourceFlavor, with Kueue's own words, as pure
functions (kubernetes-sigs/kueue at ff69552, v1beta2: `apis/kueue/v1beta2/*_types.go` markers and
`pkg/webhooks/{clusterqueue,resourceflavor,common}_webhook.go`).

A real API server judges a write in two steps, and so do these functions:

1. the CRD's schema (OpenAPI markers: enums, patterns, item limits) and its CEL rules
   (`x-kubernetes-validations`): a 422 Invalid, `ClusterQueue.kueue.x-k8s.io "x" is invalid: ...`
   (`schema_causes`). The sandbox's Kueue CRDs are loose and its schema checker runs no CEL, so
   these are checked here;
2. only when the schema passes, Kueue's validating webhook: controller-runtime answers its
   field.ErrorList with `Denied`, which the API server returns as 403 Forbidden, `admission webhook
   "vclusterqueue.kb.io" denied the request: ...` (`webhook_causes`).

The objects are in the storage version (v1beta2); v1beta1 spellings (`cohort`, `Borrow`/`Preempt`)
are read as the conversion would. Values of the wrong JSON type are left to the schema checker.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from kaiwo_sandbox.contracts import GVR, ApiError, JsonObj
from kaiwo_sandbox.semantics import field_errors as fe
from kaiwo_sandbox.semantics.metadata import is_label_key, is_label_value, validate_labels
from kaiwo_sandbox.semantics.quantity import QuantityError, parse_milli

GROUP = "kueue.x-k8s.io"
CLUSTER_QUEUE_WEBHOOK = "vclusterqueue.kb.io"
RESOURCE_FLAVOR_WEBHOOK = "vresourceflavor.kb.io"

# +kubebuilder:validation:Pattern of ClusterQueueReference, CohortReference, ResourceFlavorReference.
DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_DNS1123 = re.compile(DNS1123_SUBDOMAIN)
REFERENCE_MAX_LENGTH = 253
MAX_RESOURCE_GROUPS = 16
MAX_GROUP_ITEMS = 64  # coveredResources, flavors, and resources per flavor
MAX_TOTAL = 256  # flavors, covered resources across all groups (webhook)
MAX_COMBINATIONS = 512  # flavor-resource pairs in one group (webhook)
MAX_FLAVOR_LABELS = 8
MAX_FLAVOR_TAINTS = 8

QUEUEING_STRATEGIES = ["StrictFIFO", "BestEffortFIFO"]
STOP_POLICIES = ["None", "Hold", "HoldAndDrain"]
RECLAIM_POLICIES = ["Never", "LowerPriority", "Any"]
WITHIN_CLUSTER_QUEUE_POLICIES = ["Never", "LowerPriority", "LowerOrNewerEqualPriority"]
BORROW_POLICIES = ["Never", "LowerPriority"]
FUNGIBILITY_POLICIES = ["MayStopSearch", "TryNextFlavor"]
FUNGIBILITY_V1BETA1 = {"Borrow": "MayStopSearch", "Preempt": "MayStopSearch"}
FUNGIBILITY_PREFERENCES = ["BorrowingOverPreemption", "PreemptionOverBorrowing"]
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")

# CEL rules' messages (x-kubernetes-validations), word for word.
BORROWING_WITHOUT_COHORT = "borrowingLimit must be nil when cohort is empty"
FLAVOR_RESOURCES_MISMATCH = "flavors must have the same number of resources as the coveredResources"
RECLAIM_NEVER_BORROW = "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never"
PREFERENCE_NEEDS_TRY_NEXT = ("preference can only be set when both whenCanBorrow and whenCanPreempt are "
                             "TryNextFlavor")
TAINT_EFFECT_MESSAGE = "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'"
TOPOLOGY_NEEDS_LABELS = "at least one nodeLabel is required when topology is set"
# The webhooks' messages.
LIMIT_WITHOUT_COHORT = "must be nil when cohort is empty"
LENDING_OVER_NOMINAL = "must be less than or equal to the nominalQuota"
NAME_MISMATCH = "must match the name in coveredResources"
NEGATIVE = "must be greater than or equal to 0"  # apimachineryvalidation.IsNegativeErrorMsg

Causes = list[JsonObj]


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _dict(value: Any) -> JsonObj:
    return value if isinstance(value, dict) else {}


def _cel(path: str, message: str, of: str = "object") -> JsonObj:
    """How the API server words a failed CEL rule: `<path>: Invalid value: "object": <message>` (the
    value is the schema type the rule is on, "array" for a list's rule)."""
    return fe.invalid(path, of, message)


def _reference(value: Any, path: str, causes: Causes) -> None:
    """A ...Reference field: at most 253 characters of a DNS-1123 subdomain (schema pattern)."""
    if not isinstance(value, str):
        return
    if len(value) > REFERENCE_MAX_LENGTH:
        causes.append(fe.too_long(path, REFERENCE_MAX_LENGTH))
    if not _DNS1123.search(value):
        causes.append(fe.invalid(path, value, f"{path} in body should match '{DNS1123_SUBDOMAIN}'"))


def _enum(value: Any, allowed: list[str], path: str, causes: Causes) -> None:
    if value is not None and value != "" and value not in allowed:
        causes.append(fe.not_supported(path, value, allowed))


def _items(value: list[Any], path: str, causes: Causes, *, most: int, least: int = 0) -> None:
    if len(value) < least:
        causes.append(fe.invalid(path, len(value), f"{path} in body should have at least {least} items"))
    if len(value) > most:
        causes.append(fe.too_many(path, len(value), most))


def _cohort(spec: JsonObj) -> str:
    value = spec.get("cohortName") or spec.get("cohort") or ""
    return value if isinstance(value, str) else ""


def _fungibility(value: Any) -> Any:
    return FUNGIBILITY_V1BETA1.get(value, value) if isinstance(value, str) else value


# ---------------------------------------------------------------------------------- ClusterQueue
def cluster_queue_schema_causes(obj: JsonObj) -> Causes:
    """The CRD's schema markers and CEL rules that a ClusterQueue breaks (a 422 when any)."""
    spec = _dict(obj.get("spec"))
    causes: Causes = []
    cel: Causes = []  # the API server runs the CEL rules after the OpenAPI checks and lists them after
    groups = _list(spec.get("resourceGroups"))
    _items(groups, "spec.resourceGroups", causes, most=MAX_RESOURCE_GROUPS)
    if "cohortName" in spec or "cohort" in spec:
        field = "cohortName" if "cohortName" in spec else "cohort"
        if spec.get(field):
            _reference(spec.get(field), f"spec.{field}", causes)
    _enum(spec.get("queueingStrategy"), QUEUEING_STRATEGIES, "spec.queueingStrategy", causes)
    _enum(spec.get("stopPolicy"), STOP_POLICIES, "spec.stopPolicy", causes)
    for i, group in enumerate(groups):
        group = _dict(group)
        path = f"spec.resourceGroups[{i}]"
        covered = _list(group.get("coveredResources"))
        flavors = _list(group.get("flavors"))
        _items(covered, f"{path}.coveredResources", causes, most=MAX_GROUP_ITEMS, least=1)
        _items(flavors, f"{path}.flavors", causes, most=MAX_GROUP_ITEMS, least=1)
        for j, flavor in enumerate(flavors):
            flavor = _dict(flavor)
            fpath = f"{path}.flavors[{j}]"
            if "name" not in flavor:
                causes.append(fe.required(f"{fpath}.name"))
            _reference(flavor.get("name"), f"{fpath}.name", causes)
            _items(_list(flavor.get("resources")), f"{fpath}.resources", causes, most=MAX_GROUP_ITEMS, least=1)
        if any(len(_list(_dict(f).get("resources"))) != len(covered) for f in flavors):
            cel.append(_cel(path, FLAVOR_RESOURCES_MISMATCH))
    preemption = _dict(spec.get("preemption"))
    _enum(preemption.get("reclaimWithinCohort"), RECLAIM_POLICIES, "spec.preemption.reclaimWithinCohort", causes)
    _enum(preemption.get("withinClusterQueue"), WITHIN_CLUSTER_QUEUE_POLICIES,
          "spec.preemption.withinClusterQueue", causes)
    borrow = preemption.get("borrowWithinCohort")
    if isinstance(borrow, dict):
        _enum(borrow.get("policy"), BORROW_POLICIES, "spec.preemption.borrowWithinCohort.policy", causes)
        if preemption.get("reclaimWithinCohort", "Never") == "Never" and borrow.get("policy", "Never") != "Never":
            cel.append(_cel("spec.preemption", RECLAIM_NEVER_BORROW))
    fungibility = _dict(spec.get("flavorFungibility"))
    for key in ("whenCanBorrow", "whenCanPreempt"):
        _enum(_fungibility(fungibility.get(key)), FUNGIBILITY_POLICIES, f"spec.flavorFungibility.{key}", causes)
    if "preference" in fungibility:
        _enum(fungibility.get("preference"), FUNGIBILITY_PREFERENCES, "spec.flavorFungibility.preference", causes)
        if _fungibility(fungibility.get("whenCanBorrow")) != "TryNextFlavor" or \
                _fungibility(fungibility.get("whenCanPreempt")) != "TryNextFlavor":
            cel.append(_cel("spec.flavorFungibility", PREFERENCE_NEEDS_TRY_NEXT))
    if not _cohort(spec) and any("borrowingLimit" in _dict(r)
                                 for g in groups for f in _list(_dict(g).get("flavors"))
                                 for r in _list(_dict(f).get("resources"))):
        cel.append(_cel("spec", BORROWING_WITHOUT_COHORT))
    return causes + cel


def cluster_queue_webhook_causes(obj: JsonObj) -> Causes:
    """ValidateClusterQueue (create and update): what Kueue's webhook denies."""
    spec = _dict(obj.get("spec"))
    has_cohort = bool(_cohort(spec))
    causes: Causes = []
    groups = _list(spec.get("resourceGroups"))
    seen_resources: set[str] = set()
    seen_flavors: set[str] = set()
    for i, group in enumerate(groups):
        group = _dict(group)
        path = f"spec.resourceGroups[{i}]"
        covered = [str(r) for r in _list(group.get("coveredResources"))]
        for j, name in enumerate(covered):
            rpath = f"{path}.coveredResources[{j}]"
            for message in is_label_key(name):  # validateResourceName
                causes.append(fe.invalid(rpath, name, message))
            if name in seen_resources:
                causes.append(fe.duplicate(rpath, name))
            seen_resources.add(name)
        for j, flavor in enumerate(_list(group.get("flavors"))):
            flavor = _dict(flavor)
            fpath = f"{path}.flavors[{j}]"
            causes.extend(_flavor_quotas(flavor, covered, has_cohort, fpath))
            name = str(flavor.get("name", ""))
            if name in seen_flavors:
                causes.append(fe.duplicate(f"{fpath}.name", name))
            seen_flavors.add(name)
    causes.extend(_label_selector(spec.get("namespaceSelector"), "spec.namespaceSelector"))
    causes.extend(_fair_sharing(spec.get("fairSharing"), "spec.fairSharing"))
    flavors_total = sum(len(_list(_dict(g).get("flavors"))) for g in groups)
    if flavors_total > MAX_TOTAL:
        causes.append(fe.invalid("spec.resourceGroups", flavors_total, "total number of flavors across all "
                                 f"resourceGroups must be ≤ {MAX_TOTAL}, got {flavors_total}"))
    covered_total = sum(len(_list(_dict(g).get("coveredResources"))) for g in groups)
    if covered_total > MAX_TOTAL:
        causes.append(fe.invalid("spec.resourceGroups", covered_total, "total number of covered resources across "
                                 f"all resourceGroups must be ≤ {MAX_TOTAL}, got {covered_total}"))
    for i, group in enumerate(groups):
        pairs = sum(len(_list(_dict(f).get("resources"))) for f in _list(_dict(group).get("flavors")))
        if pairs > MAX_COMBINATIONS:
            causes.append(fe.invalid(f"spec.resourceGroups[{i}]", pairs, "number of flavor-resource combinations "
                                     f"in a resourceGroup must be ≤ {MAX_COMBINATIONS}, got {pairs}"))
    causes.extend(_admission_check_flavors(spec, seen_flavors))
    return causes


def _quantity_text(value: Any) -> str:
    """Quantity.String() for the message: the value as written (Kueue prints its canonical form,
    which is the same for the plain integers and binary suffixes queue configurations use)."""
    return value if isinstance(value, str) else fe.go_value(value)


def _milli(value: Any) -> int | None:
    try:
        return parse_milli(value)
    except QuantityError:
        return None  # not a quantity: the schema checker words that


def _flavor_quotas(flavor: JsonObj, covered: list[str], has_cohort: bool, path: str) -> Causes:
    """validateFlavorQuotas: resources past the covered ones are left to the CEL rule, as upstream."""
    causes: Causes = []
    for i, quota in enumerate(_list(flavor.get("resources"))[:len(covered)]):
        quota = _dict(quota)
        qpath = f"{path}.resources[{i}]"
        if quota.get("name") != covered[i]:
            causes.append(fe.invalid(f"{qpath}.name", quota.get("name", ""), NAME_MISMATCH))
        nominal = _milli(quota.get("nominalQuota", 0))
        if nominal is not None and nominal < 0:
            causes.append(fe.invalid(f"{qpath}.nominalQuota", _quantity_text(quota.get("nominalQuota")), NEGATIVE))
        if quota.get("borrowingLimit") is not None:
            text = _quantity_text(quota["borrowingLimit"])
            if not has_cohort:
                causes.append(fe.invalid(f"{qpath}.borrowingLimit", text, LIMIT_WITHOUT_COHORT))
            borrowing = _milli(quota["borrowingLimit"])
            if borrowing is not None and borrowing < 0:
                causes.append(fe.invalid(f"{qpath}.borrowingLimit", text, NEGATIVE))
        if quota.get("lendingLimit") is not None:
            text = _quantity_text(quota["lendingLimit"])
            lending = _milli(quota["lendingLimit"])
            if lending is not None and lending < 0:
                causes.append(fe.invalid(f"{qpath}.lendingLimit", text, NEGATIVE))
            if not has_cohort:
                causes.append(fe.invalid(f"{qpath}.lendingLimit", text, LIMIT_WITHOUT_COHORT))
            if lending is not None and nominal is not None and lending > nominal:
                causes.append(fe.invalid(f"{qpath}.lendingLimit", text, LENDING_OVER_NOMINAL))
    return causes


def _label_selector(selector: Any, path: str) -> Causes:
    """metav1validation.ValidateLabelSelector: operators, their values, label keys and values."""
    if not isinstance(selector, dict):
        return []
    causes: Causes = validate_labels(selector.get("matchLabels"), f"{path}.matchLabels")
    for i, expression in enumerate(_list(selector.get("matchExpressions"))):
        expression = _dict(expression)
        epath = f"{path}.matchExpressions[{i}]"
        operator = expression.get("operator")
        values = _list(expression.get("values"))
        if operator in ("In", "NotIn"):
            if not values:
                causes.append(fe.required(f"{epath}.values",
                                          "must be specified when `operator` is 'In' or 'NotIn'"))
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                causes.append(fe.forbidden(f"{epath}.values",
                                           "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
        else:
            causes.append(fe.invalid(f"{epath}.operator", operator, "not a valid selector operator"))
        key = str(expression.get("key", ""))
        for message in is_label_key(key):
            causes.append(fe.invalid(f"{epath}.key", key, message))
        for j, value in enumerate(values):
            for message in is_label_value(str(value)):
                causes.append(fe.invalid(f"{epath}.values[{j}]", value, message))
    return causes


def _fair_sharing(fair_sharing: Any, path: str) -> Causes:
    """validateFairSharing's sign check (its "> 10e-9" check needs nano precision; the sandbox keeps milli)."""
    weight = _dict(fair_sharing).get("weight")
    milli = None if weight is None else _milli(weight)
    if milli is not None and milli < 0:
        return [fe.invalid(path, _quantity_text(weight), NEGATIVE)]
    return []


def _admission_check_flavors(spec: JsonObj, flavors: set[str]) -> Causes:
    """validateAdmissionCheckOnFlavors: `onFlavors` must name flavors of the queue."""
    causes: Causes = []
    strategy = _dict(spec.get("admissionChecksStrategy"))
    for i, check in enumerate(_list(strategy.get("admissionChecks"))):
        for j, flavor in enumerate(_list(_dict(check).get("onFlavors"))):
            if flavor not in flavors:
                causes.append(fe.not_supported(
                    f"spec.admissionChecksStrategy.admissionChecks[{i}].onFlavors[{j}]", flavor, sorted(flavors)))
    return causes


# ---------------------------------------------------------------------------------- ResourceFlavor
def resource_flavor_schema_causes(obj: JsonObj, old: JsonObj | None = None) -> Causes:
    """ResourceFlavorSpec's markers and CEL rules."""
    spec = _dict(obj.get("spec"))
    causes: Causes = []
    cel: Causes = []
    labels = _dict(spec.get("nodeLabels"))
    if len(labels) > MAX_FLAVOR_LABELS:
        causes.append(fe.too_many("spec.nodeLabels", len(labels), MAX_FLAVOR_LABELS))
    taints = _list(spec.get("nodeTaints"))
    _items(taints, "spec.nodeTaints", causes, most=MAX_FLAVOR_TAINTS)
    if any(_dict(t).get("effect") not in TAINT_EFFECTS for t in taints):
        cel.append(_cel("spec.nodeTaints", TAINT_EFFECT_MESSAGE, "array"))
    tolerations = _list(spec.get("tolerations"))
    _items(tolerations, "spec.tolerations", causes, most=MAX_FLAVOR_TAINTS)
    toleration_rules: tuple[tuple[Callable[[JsonObj], bool], str], ...] = (
        (lambda t: "key" in t or t.get("operator") == "Exists",
         "operator must be Exists when 'key' is empty, which means 'match all values and all keys'"),
        (lambda t: "tolerationSeconds" not in t or t.get("effect") == "NoExecute",
         "effect must be 'NoExecute' when 'tolerationSeconds' is set"),
        (lambda t: "operator" not in t or t.get("operator") in ("Equal", "Exists"),
         "supported toleration values: 'Equal'(default), 'Exists'"),
        (lambda t: t.get("operator") != "Exists" or "value" not in t,
         "a value must be empty when 'operator' is 'Exists'"),
        (lambda t: "effect" not in t or t.get("effect") in TAINT_EFFECTS, TAINT_EFFECT_MESSAGE),
    )
    for rule, message in toleration_rules:
        if not all(rule(_dict(t)) for t in tolerations):
            cel.append(_cel("spec.tolerations", message, "array"))
    if spec.get("topologyName"):
        _reference(spec.get("topologyName"), "spec.topologyName", causes)
        if not labels:
            cel.append(_cel("spec", TOPOLOGY_NEEDS_LABELS))
    old_spec = _dict((old or {}).get("spec"))
    if old_spec.get("topologyName") and old_spec.get("topologyName") != spec.get("topologyName"):
        cel.append(_cel("spec", "topologyName is immutable when topologyName is set"))
    return causes + cel


def resource_flavor_webhook_causes(obj: JsonObj) -> Causes:
    """ValidateResourceFlavor: node labels, taints (unique by key and effect)."""
    spec = _dict(obj.get("spec"))
    causes: Causes = validate_labels(spec.get("nodeLabels"), "spec.nodeLabels")
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(_list(spec.get("nodeTaints"))):
        taint = _dict(taint)
        path = f"spec.nodeTaints[{i}]"
        key = str(taint.get("key", ""))
        for message in is_label_key(key):
            causes.append(fe.invalid(f"{path}.key", key, message))
        value = str(taint.get("value", ""))
        messages = is_label_value(value)
        if messages:
            causes.append(fe.invalid(f"{path}.value", value, ";".join(messages)))
        pair = (str(taint.get("effect", "")), key)
        if pair in seen:
            duplicate = fe.duplicate(path, taint)
            duplicate["message"] += ": taints must be unique by key and effect pair"
            causes.append(duplicate)
            continue
        seen.add(pair)
    return causes


# ---------------------------------------------------------------------------------- admission
def _name(obj: JsonObj) -> str:
    return str(_dict(obj.get("metadata")).get("name", ""))


def denied(webhook: str, causes: Causes) -> ApiError:
    """A validating webhook's field.ErrorList, as the API server returns controller-runtime's Denied."""
    return ApiError(403, "Forbidden", f'admission webhook "{webhook}" denied the request: {fe.aggregate_text(causes)}')


def check(operation: str, gvr: GVR, obj: JsonObj, old: JsonObj | None) -> None:
    """Raise what a real cluster answers a write of a Kueue ClusterQueue or ResourceFlavor that
    Kueue refuses: the schema's 422 first; only past it, the webhook's 403."""
    if gvr.group != GROUP or operation not in ("CREATE", "UPDATE"):
        return
    if gvr.resource == "clusterqueues":
        kind, webhook = "ClusterQueue", CLUSTER_QUEUE_WEBHOOK
        schema, hooked = cluster_queue_schema_causes(obj), cluster_queue_webhook_causes
    elif gvr.resource == "resourceflavors":
        kind, webhook = "ResourceFlavor", RESOURCE_FLAVOR_WEBHOOK
        schema, hooked = resource_flavor_schema_causes(obj, old), resource_flavor_webhook_causes
    else:
        return
    if schema:
        raise ApiError.invalid(kind, GROUP, _name(obj), schema)
    causes = hooked(obj)
    if causes:
        raise denied(webhook, causes)
