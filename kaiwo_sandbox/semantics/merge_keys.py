"""How each field of a built-in kind merges: the patchStrategy/patchMergeKey tags and the
`+listType`/`+listMapKey`/`+mapType`/`+structType` markers of k8s.io/api, as a small schema tree.

Two consumers read the same tree:
- strategic merge patch (`patching.py`) asks a list field for its patchStrategy and patchMergeKey;
- server-side apply (`apply.py`) asks for the list type (atomic / set / map with keys), whether a
  map is granular or atomic, and whether a dict's keys are declared struct fields or map data
  (which decides where managedFields puts a "." marker).

Only fields that merge differently from the default need to be declared. Anything undeclared is a
struct (for dicts), an atomic list with no patch strategy (for lists), or a scalar, exactly what an
untagged Go field gets. Custom resources get their tree from the CRD's OpenAPI v3 schema
(`schema_from_openapi`), with `x-kubernetes-list-type`, `x-kubernetes-list-map-keys` and
`x-kubernetes-map-type`; strategic merge patch is never used for them.

A few real-world corrections to folklore, taken from the types themselves: node `spec.taints` and
pod `tolerations` are atomic (no merge key); Job `status.conditions` merges by type in strategic
merge but is atomic for apply; container `ports` and service `ports` are keyed by port *and*
protocol for apply (protocol defaults to TCP) but by port alone for strategic merge.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from kaiwo_sandbox.contracts import JsonObj

NodeKind = Literal["struct", "map", "list", "any"]
ListType = Literal["atomic", "set", "map"]


@dataclass(frozen=True, slots=True)
class Schema:
    """The merge-relevant shape of one value.

    kind "struct": a dict whose keys are declared fields (`fields`; undeclared keys are treated as
      struct fields of unknown shape). kind "map": a dict whose keys are data (labels); `element`
      is the value schema. kind "list": `element` is the item schema. kind "any": unknown.
    `atomic`: apply treats the whole value as one leaf (structType/mapType/listType=atomic).
    `deduced`: shape unknown and every dict key is data (a CRD subtree with
      x-kubernetes-preserve-unknown-fields and no properties), as structured-merge-diff deduces it.
    `zero_present`: a built-in field that Go's typed object always carries when its parent is
      there (a non-pointer struct, or a list without `omitempty`), so an Update that fills it in
      does not mark the field itself as added in managedFields.
    """

    kind: NodeKind = "any"
    fields: Mapping[str, Schema] = field(default_factory=dict)
    element: Schema | None = None
    atomic: bool = False
    deduced: bool = False
    # Lists only.
    list_type: ListType = "atomic"
    map_keys: tuple[str, ...] = ()
    key_defaults: Mapping[str, Any] = field(default_factory=dict)
    patch_strategy: Literal["merge", "replace", ""] = ""
    patch_merge_key: str = ""
    zero_present: bool = False

    def field_schema(self, name: str) -> Schema:
        """Schema of a dict entry: the declared field, the map's element, or unknown."""
        if self.kind == "struct":
            return self.fields.get(name, ANY)
        if self.kind == "map" and self.element is not None:
            return self.element
        if self.deduced:
            return DEDUCED
        return ANY

    def item_schema(self) -> Schema:
        if self.element is not None:
            return self.element
        return DEDUCED if self.deduced else ANY

    def is_named_field(self, name: str) -> bool:
        """True when `name` is a declared (or presumed) struct field rather than map data."""
        # Unknown dicts are presumed structs, like most of the Kubernetes API.
        return self.kind == "struct" or not (self.kind == "map" or self.deduced)

    @property
    def associative(self) -> bool:
        """A list whose items are addressed by key (map) or value (set), not replaced whole."""
        return self.kind == "list" and self.list_type in ("set", "map") and not self.atomic


ANY = Schema()
DEDUCED = Schema(kind="any", deduced=True)
SCALAR = Schema(kind="any")


def struct(fields: Mapping[str, Schema] | None = None, *, atomic: bool = False, zero: bool = False) -> Schema:
    """A dict of declared fields. `zero`: a non-pointer Go struct field, present (as {}) in every
    typed object whose parent is present."""
    return Schema(kind="struct", fields=dict(fields or {}), atomic=atomic, zero_present=zero)


def mapping(element: Schema = SCALAR, *, atomic: bool = False) -> Schema:
    return Schema(kind="map", element=element, atomic=atomic)


def atomic_list(*, patch_merge_key: str = "", patch_strategy: Literal["merge", ""] = "") -> Schema:
    """A list apply replaces whole; strategic merge may still merge it (e.g. Job conditions)."""
    return Schema(kind="list", list_type="atomic", atomic=True, patch_strategy=patch_strategy,
                  patch_merge_key=patch_merge_key)


def set_list(*, smp_merge: bool = True) -> Schema:
    """A list of unique scalars (finalizers): apply keys items by value, strategic merge unions."""
    return Schema(kind="list", list_type="set", patch_strategy="merge" if smp_merge else "")


def map_list(*keys: str, item: Schema | None = None, patch_merge_key: str | None = None,
             key_defaults: Mapping[str, Any] | None = None, smp_merge: bool = True,
             zero_present: bool = False) -> Schema:
    """A list of objects keyed by `keys` (listType=map); strategic merge keys by the first key
    unless `patch_merge_key` says otherwise."""
    return Schema(kind="list", list_type="map", map_keys=keys, element=item or struct(),
                  key_defaults=dict(key_defaults or {}),
                  patch_strategy="merge" if smp_merge else "",
                  patch_merge_key=(patch_merge_key or keys[0]) if smp_merge else "",
                  zero_present=zero_present)


# --- k8s.io/apimachinery meta/v1 -------------------------------------------------------------

OWNER_REFERENCE = struct()
OBJECT_META = struct({
    "labels": mapping(),
    "annotations": mapping(),
    "finalizers": set_list(),
    "ownerReferences": map_list("uid", item=OWNER_REFERENCE),
    "managedFields": atomic_list(),
}, zero=True)
LABEL_SELECTOR = struct({
    "matchLabels": mapping(),
    "matchExpressions": atomic_list(),
}, atomic=True)
CONDITIONS = map_list("type")
"""metav1.Condition-style lists: merge by type for both strategic merge and apply."""

# --- core/v1 ---------------------------------------------------------------------------------

RESOURCE_REQUIREMENTS = struct({
    "limits": mapping(),
    "requests": mapping(),
    "claims": map_list("name"),
}, zero=True)
CONTAINER = struct({
    "command": atomic_list(),
    "args": atomic_list(),
    "ports": map_list("containerPort", "protocol", patch_merge_key="containerPort",
                      key_defaults={"protocol": "TCP"}),
    "envFrom": atomic_list(),
    "env": map_list("name"),
    "resources": RESOURCE_REQUIREMENTS,
    "resizePolicy": atomic_list(),
    "volumeMounts": map_list("mountPath"),
    "volumeDevices": map_list("devicePath"),
    "securityContext": struct({"capabilities": struct({"add": atomic_list(), "drop": atomic_list()})}),
})
VOLUME = struct()
POD_SPEC = struct({
    "volumes": map_list("name", item=VOLUME),
    "initContainers": map_list("name", item=CONTAINER),
    "containers": map_list("name", item=CONTAINER, zero_present=True),
    "ephemeralContainers": map_list("name", item=CONTAINER),
    "nodeSelector": mapping(atomic=True),
    "imagePullSecrets": map_list("name"),
    "tolerations": atomic_list(),
    "hostAliases": map_list("ip", item=struct({"hostnames": atomic_list()})),
    "readinessGates": atomic_list(),
    "topologySpreadConstraints": map_list("topologyKey", "whenUnsatisfiable", patch_merge_key="topologyKey"),
    "overhead": mapping(),
    "schedulingGates": map_list("name"),
    "resourceClaims": map_list("name"),
    "securityContext": struct({"supplementalGroups": atomic_list(), "sysctls": atomic_list()}),
    "dnsConfig": struct({"nameservers": atomic_list(), "searches": atomic_list(), "options": atomic_list()}),
}, zero=True)
POD_TEMPLATE_SPEC = struct({"metadata": OBJECT_META, "spec": POD_SPEC}, zero=True)
POD_STATUS = struct({
    "conditions": CONDITIONS,
    "podIPs": map_list("ip"),
    "hostIPs": atomic_list(patch_strategy="merge", patch_merge_key="ip"),
    "containerStatuses": atomic_list(),
    "initContainerStatuses": atomic_list(),
    "ephemeralContainerStatuses": atomic_list(),
}, zero=True)
NODE = struct({
    "spec": struct({"taints": atomic_list(), "podCIDRs": set_list()}, zero=True),
    "status": struct({
        "capacity": mapping(),
        "allocatable": mapping(),
        "conditions": CONDITIONS,
        "addresses": atomic_list(patch_strategy="merge", patch_merge_key="type"),
        "daemonEndpoints": struct({"kubeletEndpoint": struct(zero=True)}, zero=True),
        "nodeInfo": struct(zero=True),
        "images": atomic_list(),
        "volumesInUse": atomic_list(),
        "volumesAttached": atomic_list(),
    }, zero=True),
})
SERVICE = struct({
    "spec": struct({
        "ports": map_list("port", "protocol", patch_merge_key="port", key_defaults={"protocol": "TCP"}),
        "selector": mapping(atomic=True),
        "clusterIPs": atomic_list(),
        "externalIPs": atomic_list(),
        "ipFamilies": atomic_list(),
        "loadBalancerSourceRanges": atomic_list(),
    }, zero=True),
    "status": struct({"conditions": CONDITIONS, "loadBalancer": struct({"ingress": atomic_list()}, zero=True)},
                     zero=True),
})
PVC = struct({
    "spec": struct({"accessModes": atomic_list(), "resources": RESOURCE_REQUIREMENTS,
                    "selector": LABEL_SELECTOR}, zero=True),
    "status": struct({"accessModes": atomic_list(), "capacity": mapping(), "conditions": CONDITIONS,
                      "allocatedResources": mapping(), "allocatedResourceStatuses": mapping()}, zero=True),
})
NAMESPACE = struct({
    "spec": struct({"finalizers": atomic_list()}, zero=True),
    "status": struct({"conditions": CONDITIONS}, zero=True),
})
CONFIGMAP = struct({"data": mapping(), "binaryData": mapping()})
SECRET = struct({"data": mapping(), "stringData": mapping()})
SERVICE_ACCOUNT = struct({"secrets": map_list("name"), "imagePullSecrets": atomic_list()})
POD = struct({"spec": POD_SPEC, "status": POD_STATUS})

# --- apps/v1, batch/v1 -----------------------------------------------------------------------

WORKLOAD_STATUS = struct({"conditions": CONDITIONS}, zero=True)
DEPLOYMENT = struct({
    "spec": struct({"selector": LABEL_SELECTOR, "template": POD_TEMPLATE_SPEC,
                    "strategy": struct(zero=True), "updateStrategy": struct(zero=True)}, zero=True),
    "status": WORKLOAD_STATUS,
})
STATEFULSET = struct({
    "spec": struct({"selector": LABEL_SELECTOR, "template": POD_TEMPLATE_SPEC,
                    "updateStrategy": struct(zero=True), "volumeClaimTemplates": atomic_list()}, zero=True),
    "status": WORKLOAD_STATUS,
})
JOB_SPEC = struct({
    "selector": LABEL_SELECTOR,
    "template": POD_TEMPLATE_SPEC,
    "podFailurePolicy": struct({"rules": atomic_list()}),
    "successPolicy": struct({"rules": atomic_list()}),
}, zero=True)
JOB = struct({
    "spec": JOB_SPEC,
    "status": struct({"conditions": atomic_list(patch_strategy="merge", patch_merge_key="type")}, zero=True),
})
CRONJOB = struct({
    "spec": struct({"jobTemplate": struct({"metadata": OBJECT_META, "spec": JOB_SPEC}, zero=True)}, zero=True),
    "status": struct({"active": atomic_list()}, zero=True),
})
CORE_EVENT = struct({"involvedObject": struct(zero=True), "source": struct(zero=True)})
EVENT_V1 = struct({"regarding": struct(zero=True), "deprecatedSource": struct(zero=True)})

# --- apiextensions.k8s.io/v1 -----------------------------------------------------------------

CRD = struct({
    "spec": struct({
        "names": struct({"shortNames": atomic_list(), "categories": atomic_list()}, zero=True),
        "versions": atomic_list(),
    }, zero=True),
    "status": struct({"conditions": CONDITIONS, "storedVersions": atomic_list(),
                      "acceptedNames": struct(zero=True)}, zero=True),
})

_KINDS: dict[tuple[str, str], Schema] = {
    ("", "Pod"): POD,
    ("", "PodTemplate"): struct({"template": POD_TEMPLATE_SPEC}),
    ("", "ReplicationController"): struct({"spec": struct({"selector": mapping(atomic=True),
                                                           "template": POD_TEMPLATE_SPEC}),
                                           "status": WORKLOAD_STATUS}),
    ("", "Node"): NODE,
    ("", "Service"): SERVICE,
    ("", "PersistentVolumeClaim"): PVC,
    ("", "Namespace"): NAMESPACE,
    ("", "ConfigMap"): CONFIGMAP,
    ("", "Secret"): SECRET,
    ("", "ServiceAccount"): SERVICE_ACCOUNT,
    ("", "Event"): CORE_EVENT,
    ("events.k8s.io", "Event"): EVENT_V1,
    ("apps", "Deployment"): DEPLOYMENT,
    ("apps", "ReplicaSet"): DEPLOYMENT,
    ("apps", "DaemonSet"): DEPLOYMENT,
    ("apps", "StatefulSet"): STATEFULSET,
    ("batch", "Job"): JOB,
    ("batch", "CronJob"): CRONJOB,
    ("apiextensions.k8s.io", "CustomResourceDefinition"): CRD,
}

BUILTIN_GROUPS = frozenset({
    "", "apps", "batch", "autoscaling", "policy", "coordination.k8s.io", "events.k8s.io",
    "scheduling.k8s.io", "storage.k8s.io", "networking.k8s.io", "node.k8s.io", "discovery.k8s.io",
    "rbac.authorization.k8s.io", "authentication.k8s.io", "authorization.k8s.io",
    "certificates.k8s.io", "admissionregistration.k8s.io", "apiextensions.k8s.io",
    "apiregistration.k8s.io", "flowcontrol.apiserver.k8s.io", "resource.k8s.io",
    "internal.apiserver.k8s.io", "storagemigration.k8s.io",
})
"""Groups served by the apiserver's own typed registry (strategic merge works there);
every other group is a custom resource."""


def is_builtin(group: str) -> bool:
    return group in BUILTIN_GROUPS


def _with_object_meta(root: Schema, *, builtin: bool = False) -> Schema:
    fields = dict(root.fields)
    fields["metadata"] = OBJECT_META
    if builtin:
        # A typed object always carries its (non-pointer) spec and status structs.
        for name in ("spec", "status"):
            if name not in fields:
                fields[name] = struct(zero=True)
    return Schema(kind="struct", fields=fields)


def schema_for(group: str, kind: str, openapi: JsonObj | None = None) -> Schema:
    """The merge schema of a whole object of this kind.

    Built-ins come from the table above (unknown built-in kinds get plain struct semantics).
    Custom resources come from `openapi` (the CRD version's `schema.openAPIV3Schema`) when given,
    else every field is a struct field and every list atomic, which is what a structural schema
    without list-type markers gives. Translations are memoised per schema dict (by identity):
    treat a dict handed in here as frozen, and pass a new one when a CRD changes.
    """
    if is_builtin(group):
        return _BUILTIN_ROOTS.get((group, kind)) or _with_object_meta(struct(), builtin=True)
    if openapi is not None:
        cached = _OPENAPI_CACHE.get(id(openapi))
        if cached is not None and cached[0] is openapi:
            return cached[1]
        schema = _with_object_meta(schema_from_openapi(openapi))
        if len(_OPENAPI_CACHE) >= _OPENAPI_CACHE_SIZE:
            _OPENAPI_CACHE.pop(next(iter(_OPENAPI_CACHE)))
        # Keyed by identity (the store keeps one schema dict per CRD version) and holding the dict,
        # so an id is never reused while its entry lives. A big CRD schema (RayCluster embeds whole
        # pod templates) takes milliseconds to translate; every write would pay it.
        _OPENAPI_CACHE[id(openapi)] = (openapi, schema)
        return schema
    return _UNTYPED_ROOT


_BUILTIN_ROOTS: dict[tuple[str, str], Schema] = {
    group_kind: _with_object_meta(root, builtin=True) for group_kind, root in _KINDS.items()}
_UNTYPED_ROOT = _with_object_meta(struct())
_OPENAPI_CACHE_SIZE = 64
_OPENAPI_CACHE: dict[int, tuple[JsonObj, Schema]] = {}


def schema_from_openapi(node: JsonObj) -> Schema:
    """Translate a structural OpenAPI v3 schema node into a merge schema, as the apiserver does for
    CRDs: properties are struct fields, additionalProperties a granular map, lists atomic unless
    x-kubernetes-list-type says set/map, x-kubernetes-map-type atomic makes a whole dict a leaf."""
    if not isinstance(node, dict):
        return ANY
    if node.get("x-kubernetes-embedded-resource"):
        props = dict(node.get("properties") or {})
        inner = schema_from_openapi({**node, "x-kubernetes-embedded-resource": False, "properties": props})
        fields = dict(inner.fields)
        fields["metadata"] = OBJECT_META
        return Schema(kind="struct", fields=fields, atomic=inner.atomic)
    node_type = node.get("type")
    if node_type == "array" or "items" in node:
        item = schema_from_openapi(node.get("items") or {})
        list_type = node.get("x-kubernetes-list-type", "atomic")
        if list_type == "set":
            return Schema(kind="list", list_type="set", element=item)
        if list_type == "map":
            keys = tuple(str(k) for k in node.get("x-kubernetes-list-map-keys") or ())
            defaults = _key_defaults(node.get("items") or {}, keys)
            return Schema(kind="list", list_type="map", map_keys=keys, element=item, key_defaults=defaults)
        return Schema(kind="list", list_type="atomic", atomic=True, element=item)
    atomic = node.get("x-kubernetes-map-type") == "atomic"
    properties = node.get("properties")
    if isinstance(properties, dict) and properties:
        return Schema(kind="struct", atomic=atomic,
                      fields={str(k): schema_from_openapi(v) for k, v in properties.items()})
    additional = node.get("additionalProperties")
    if isinstance(additional, dict):
        return Schema(kind="map", element=schema_from_openapi(additional), atomic=atomic)
    if additional is True or node.get("x-kubernetes-preserve-unknown-fields"):
        return Schema(kind="any", deduced=True, atomic=atomic)
    if node_type == "object":
        return Schema(kind="struct", atomic=atomic)
    return ANY


def _key_defaults(items: JsonObj, keys: tuple[str, ...]) -> dict[str, Any]:
    props = items.get("properties") or {}
    return {k: props[k]["default"] for k in keys
            if isinstance(props.get(k), dict) and "default" in props[k]}
