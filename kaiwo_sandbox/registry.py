"""What the sandbox serves: one `ResourceInfo` (contracts.py) per group/resource, built-in kinds from a
table and custom kinds from CustomResourceDefinitions.

A resource has ONE storage across its served versions (as in a real apiserver): objects are stored
once, keyed by `storage` (group, resource), and a read through another version only rewrites
`apiVersion` (no field conversion; the one exception is events.k8s.io/v1 events, which share
core/v1 events' storage and are converted field by field in `event_conversion`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from kaiwo_sandbox.contracts import (
    ALL_VERBS,
    GVR,
    NO_COLLECTION_VERBS,
    ApiError,
    JsonObj,
    ResourceInfo,
    StorageKey,
)
from kaiwo_sandbox.semantics.builtin.extra import EXTRA_GROUP_ORDER, EXTRA_KINDS


def _builtin(group: str, version: str, resource: str, kind: str, *, namespaced: bool = True,
             short: Iterable[str] = (), categories: Iterable[str] = (), verbs: tuple[str, ...] = ALL_VERBS,
             subresources: Iterable[str] = (), storage_group: str | None = None) -> ResourceInfo:
    return ResourceInfo(group=group, versions=(version,), resource=resource, kind=kind, singular=kind.lower(),
                        namespaced=namespaced, short_names=tuple(short), categories=tuple(categories),
                        verbs=verbs, subresources=frozenset(subresources), storage_group=storage_group)


# Short names, categories, verbs and subresources as a v1.32 apiserver reports them.
BUILTIN_RESOURCES: tuple[ResourceInfo, ...] = (
    _builtin("", "v1", "namespaces", "Namespace", namespaced=False, short=("ns",), verbs=NO_COLLECTION_VERBS,
             subresources=("status", "finalize")),
    _builtin("", "v1", "nodes", "Node", namespaced=False, short=("no",), subresources=("status",)),
    _builtin("", "v1", "pods", "Pod", short=("po",), categories=("all",),
             subresources=("status", "binding", "log", "eviction", "exec", "attach", "portforward")),
    _builtin("", "v1", "services", "Service", short=("svc",), categories=("all",), subresources=("status",)),
    _builtin("", "v1", "replicationcontrollers", "ReplicationController", short=("rc",), categories=("all",),
             subresources=("status", "scale")),
    _builtin("", "v1", "configmaps", "ConfigMap", short=("cm",)),
    _builtin("", "v1", "secrets", "Secret"),
    _builtin("", "v1", "events", "Event", short=("ev",)),
    _builtin("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", short=("pvc",), subresources=("status",)),
    _builtin("", "v1", "serviceaccounts", "ServiceAccount", short=("sa",), subresources=("token",)),
    _builtin("apps", "v1", "deployments", "Deployment", short=("deploy",), categories=("all",),
             subresources=("status", "scale")),
    _builtin("apps", "v1", "replicasets", "ReplicaSet", short=("rs",), categories=("all",),
             subresources=("status", "scale")),
    _builtin("apps", "v1", "daemonsets", "DaemonSet", short=("ds",), categories=("all",), subresources=("status",)),
    _builtin("batch", "v1", "jobs", "Job", categories=("all",), subresources=("status",)),
    _builtin("coordination.k8s.io", "v1", "leases", "Lease"),
    _builtin("events.k8s.io", "v1", "events", "Event", short=("ev",), storage_group=""),
    _builtin("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False, short=("pc",)),
    _builtin("storage.k8s.io", "v1", "storageclasses", "StorageClass", namespaced=False, short=("sc",)),
    _builtin("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
             namespaced=False, short=("crd", "crds"), categories=("api-extensions",), subresources=("status",)),
    *(_builtin(spec.group, spec.version, spec.resource, spec.kind, namespaced=spec.namespaced, short=spec.short,
               categories=spec.categories, verbs=spec.verbs, subresources=spec.subresources)
      for spec in EXTRA_KINDS),  # builtin_extra.py: RBAC and the review kinds
)

# Groups in the order a real server lists them in /apis (custom groups follow, sorted).
BUILTIN_GROUP_ORDER = ("apps", "events.k8s.io", "batch", "coordination.k8s.io", "scheduling.k8s.io",
                       "storage.k8s.io", "apiextensions.k8s.io", *EXTRA_GROUP_ORDER)


def info_from_crd(crd: JsonObj) -> ResourceInfo:
    """Translate a CustomResourceDefinition into what the sandbox serves. Raises ApiError 422
    for a CRD a real apiserver would refuse for the fields we rely on."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = spec.get("group") or ""
    plural = names.get("plural") or ""
    kind = names.get("kind") or ""
    causes: list[JsonObj] = []
    if not group:
        causes.append({"reason": "FieldValueRequired", "message": "Required value", "field": "spec.group"})
    if not plural:
        causes.append({"reason": "FieldValueRequired", "message": "Required value", "field": "spec.names.plural"})
    if not kind:
        causes.append({"reason": "FieldValueRequired", "message": "Required value", "field": "spec.names.kind"})
    name = (crd.get("metadata") or {}).get("name", "")
    if plural and group and name != f"{plural}.{group}":
        causes.append({"reason": "FieldValueInvalid", "field": "metadata.name",
                       "message": f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group'})
    versions_spec: list[Any] = [v for v in spec.get("versions") or [] if isinstance(v, dict)]
    served = [v for v in versions_spec if v.get("served", True)]
    if not versions_spec:
        causes.append({"reason": "FieldValueInvalid", "field": "spec.versions",
                       "message": "Invalid value: \"null\": must have exactly one version marked as storage version"})
    elif sum(1 for v in versions_spec if v.get("storage")) != 1:
        causes.append({"reason": "FieldValueInvalid", "field": "spec.versions",
                       "message": f"Invalid value: {versions_spec!r}: must have exactly one version marked as "
                                  "storage version"})
    if causes:
        raise ApiError.invalid("CustomResourceDefinition", "apiextensions.k8s.io", name, causes)
    # Preferred version: the storage version if served, else the first served (kube-aggregator
    # sorts by version priority; good enough for the versions we ship).
    served.sort(key=lambda v: (not v.get("storage"), _version_priority(str(v.get("name", "")))))
    versions = tuple(str(v["name"]) for v in served)
    schemas: dict[str, JsonObj] = {}
    columns: dict[str, list[JsonObj]] = {}
    subresources: set[str] = set()
    scale: JsonObj | None = None
    deprecations: dict[str, str] = {}
    for v in versions_spec:
        vname = str(v.get("name", ""))
        if v.get("deprecated"):
            deprecations[vname] = str(v.get("deprecationWarning") or f"{group}/{vname} {kind} is deprecated")
        schema = (v.get("schema") or {}).get("openAPIV3Schema")
        if isinstance(schema, dict):
            schemas[vname] = schema
        columns[vname] = list(v.get("additionalPrinterColumns") or [])
        sub = v.get("subresources") or {}
        if "status" in sub:
            subresources.add("status")
        if "scale" in sub:
            subresources.add("scale")
            scale = sub["scale"]
    return ResourceInfo(
        group=group, versions=versions, resource=plural, kind=kind,
        singular=names.get("singular") or kind.lower(),
        namespaced=spec.get("scope", "Namespaced") == "Namespaced",
        short_names=tuple(names.get("shortNames") or ()), categories=tuple(names.get("categories") or ()),
        verbs=ALL_VERBS, subresources=frozenset(subresources), custom=True,
        schemas=schemas, printer_columns=columns, scale_paths=scale,
        storage_version=next(str(v["name"]) for v in versions_spec if v.get("storage")),
        deprecations=deprecations,
    )


def _version_priority(version: str) -> tuple[int, int, int]:
    """Kubernetes version ordering: GA > beta > alpha, higher numbers first."""
    import re

    m = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if not m:
        return (3, 0, 0)
    major = int(m.group(1))
    stage = {"": 0, "beta": 1, "alpha": 2}[m.group(2) or ""]
    minor = int(m.group(3) or 0)
    return (stage, -major, -minor)


class Registry:
    """Lookup of served resources, updated when CRDs come and go."""

    def __init__(self) -> None:
        self._by_group_resource: dict[tuple[str, str], ResourceInfo] = {}
        self._storage_users: dict[StorageKey, list[ResourceInfo]] = {}
        for info in BUILTIN_RESOURCES:
            self.add(info)

    def add(self, info: ResourceInfo) -> None:
        self._by_group_resource[(info.group, info.resource)] = info
        users = self._storage_users.setdefault(info.storage, [])
        users[:] = [u for u in users if u.group != info.group] + [info]

    def remove(self, group: str, resource: str) -> ResourceInfo | None:
        info = self._by_group_resource.pop((group, resource), None)
        if info is not None:
            users = self._storage_users.get(info.storage, [])
            users[:] = [u for u in users if u is not info]
        return info

    def find(self, group: str, resource: str) -> ResourceInfo | None:
        return self._by_group_resource.get((group, resource))

    def resolve(self, gvr: GVR) -> ResourceInfo:
        """The resource behind a GVR, or 404 as a real server answers an unknown path."""
        info = self._by_group_resource.get((gvr.group, gvr.resource))
        if info is None or gvr.version not in info.versions:
            raise ApiError(404, "NotFound", "the server could not find the requested resource",
                           {"group": gvr.group, "kind": gvr.resource})
        return info

    def storage_infos(self, storage: StorageKey) -> list[ResourceInfo]:
        """Every resource served from one storage (core events and events.k8s.io events)."""
        return list(self._storage_users.get(storage, ()))

    def __iter__(self) -> Iterator[ResourceInfo]:
        return iter(list(self._by_group_resource.values()))

    def groups(self) -> list[str]:
        """Non-core groups in discovery order: built-ins first, then custom groups sorted."""
        present = {info.group for info in self._by_group_resource.values() if info.group}
        ordered = [g for g in BUILTIN_GROUP_ORDER if g in present]
        return ordered + sorted(present - set(ordered))

    def group_versions(self, group: str) -> list[str]:
        """Served versions of a group, preferred first."""
        versions: list[str] = []
        for info in self._by_group_resource.values():
            if info.group == group:
                for v in info.versions:
                    if v not in versions:
                        versions.append(v)
        versions.sort(key=_version_priority)
        return versions

    def in_group_version(self, group: str, version: str) -> list[ResourceInfo]:
        return sorted((i for i in self._by_group_resource.values() if i.group == group and version in i.versions),
                      key=lambda i: i.resource)
