"""Which versions of kaiwo-ray's dependencies the cluster serves, decided once at start from API discovery
(`GET /apis`, and the Kueue group's version documents for Topology):

- Kueue: `v1beta2` (Kueue >= 0.15) when served, else `v1beta1` (0.9 - 0.14); Topology `v1beta1` (>= 0.14)
  else `v1alpha1`. Without Kueue nothing can be queued: start-up stops with one line.
- KubeRay `ray.io/v1` (>= 1.1) and AppWrapper `workload.codeflare.dev/v1beta2` (>= 1.0) are optional: when
  one is missing, the kinds that need it are not watched (no informer waits forever on a 404) and the
  workloads that need it end in ERROR with a condition saying what to install.
- The Gateway API `gateway.networking.k8s.io/v1` is optional too: without it no HTTPRoute is made, and an
  AIMNamespaceConfig naming a gateway says the gateway cannot be found.

`ClusterApis.served(resource)` maps a resource of `resources.py` to the version this cluster serves (None
when it serves none), so informers and writes use what is there while caches keep their usual keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kaiwo_ray.kube.errors import KubeError
from kaiwo_ray.kube.resources import Resource

KUEUE_GROUP = "kueue.x-k8s.io"
KUBERAY_API = "ray.io/v1"
APPWRAPPER_API = "workload.codeflare.dev/v1beta2"
GATEWAY_GROUP = "gateway.networking.k8s.io"
KUEUE_VERSIONS = ("v1beta2", "v1beta1")  # preferred first
TOPOLOGY_VERSIONS = ("v1beta1", "v1alpha1")


@dataclass(frozen=True, slots=True)
class Dependency:
    name: str
    api: str  # group/version that must be served
    supported: str  # the version range kaiwo-ray is tested against
    needed_for: str


OPTIONAL_DEPENDENCIES = (
    Dependency("KubeRay", KUBERAY_API, ">= 1.1 (tested with 1.4)", "Ray KaiwoJobs (RayJob) and KaiwoServices"),
    Dependency("AppWrapper", APPWRAPPER_API, ">= 1.0 (tested with 1.1)", "Ray KaiwoServices (AppWrapper)"),
)
KUEUE = Dependency("Kueue", f"{KUEUE_GROUP}/v1beta1", ">= 0.9 (v1beta1), >= 0.15 (v1beta2); tested with 0.12 "
                   "and 0.15", "every workload (queueing) and KaiwoQueueConfig")


@dataclass(frozen=True, slots=True)
class ClusterApis:
    """Served versions by API group, as discovery reported them."""

    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    topology_version: str | None = None

    @classmethod
    def everything(cls) -> ClusterApis:
        """What a complete, current cluster serves (tests and tools that skip discovery)."""
        return cls({KUEUE_GROUP: KUEUE_VERSIONS, "ray.io": ("v1",), "workload.codeflare.dev": ("v1beta2",),
                    GATEWAY_GROUP: ("v1",)}, TOPOLOGY_VERSIONS[0])

    def serves(self, api_version: str) -> bool:
        group, _, version = api_version.rpartition("/")
        return version in self.groups.get(group, ())

    @property
    def kueue_version(self) -> str | None:
        return next((v for v in KUEUE_VERSIONS if self.serves(f"{KUEUE_GROUP}/{v}")), None)

    def served(self, res: Resource) -> Resource | None:
        """`res` at the version this cluster serves, or None when it serves the kind at no version we speak.
        Built-in groups (core, apps, batch, ...) are taken as served: every cluster has them."""
        if res.group == KUEUE_GROUP:
            version = self.topology_version if res.plural == "topologies" else self.kueue_version
            return None if version is None else res.with_version(version)
        if res.group in ("ray.io", "workload.codeflare.dev", GATEWAY_GROUP):
            return res if self.serves(res.api_version) else None
        return res

    def missing(self) -> list[Dependency]:
        """The dependencies that are absent: Kueue first (fatal), then the optional ones."""
        absent = [] if self.kueue_version is not None else [KUEUE]
        return absent + [d for d in OPTIONAL_DEPENDENCIES if not self.serves(d.api)]

    def missing_apis(self) -> frozenset[str]:
        return frozenset(d.api for d in self.missing())


def missing_line(dep: Dependency) -> str:
    """One line for a missing dependency, saying what it breaks and what to install."""
    return (f"{dep.name} is not installed (the cluster serves no {dep.api}): {dep.needed_for} cannot run; "
            f"install {dep.name} {dep.supported}, then restart kaiwo-ray")


def parse_group_list(body: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """APIGroupList -> {group: served versions}."""
    groups: dict[str, tuple[str, ...]] = {}
    for group in body.get("groups") or ():
        versions = tuple(str(v.get("version", "")) for v in group.get("versions") or () if v.get("version"))
        groups[str(group.get("name", ""))] = versions
    return groups


async def detect(client: Any) -> ClusterApis:
    """Ask the API server (`client`: a KubeClient). Raises KubeError when discovery itself fails."""
    groups = parse_group_list(await client.request("GET", "/apis") or {})
    topology: str | None = None
    for version in TOPOLOGY_VERSIONS:
        if version not in groups.get(KUEUE_GROUP, ()):
            continue
        try:
            listing = await client.request("GET", f"/apis/{KUEUE_GROUP}/{version}") or {}
        except KubeError:
            continue
        if any(r.get("name") == "topologies" for r in listing.get("resources") or ()):
            topology = version
            break
    return ClusterApis(groups, topology)
