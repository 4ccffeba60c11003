"""Kaiwo workloads as the `kaiwo` commands address them: `job/NAME`, `service/NAME`, and their pods.

The pure parts (parsing a selector, rendering rows, choosing a pod) are separate from the two
calls that read the cluster (`fetch`, `pods_of`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.labels import LABEL_RUN_ID, LABEL_TYPE
from kaiwo_ray.cli.errors import ClusterError, UsageError
from kaiwo_ray.cli.table import age
from kaiwo_ray.kube.resources import KAIWOJOBS, KAIWOSERVICES, PODS, Resource

if TYPE_CHECKING:
    from kaiwo_ray.cli.api import Api

GROUP, VERSION = KAIWOJOBS.group, KAIWOJOBS.version
GPU_KEYS = ("amd.com/gpu", "nvidia.com/gpu")


@dataclass(frozen=True)
class WorkloadType:
    short: str  # job | service
    resource: Resource

    @property
    def kind(self) -> str:
        return self.resource.kind

    @property
    def plural(self) -> str:
        return self.resource.plural

    @property
    def qualified(self) -> str:
        return f"{self.kind.lower()}.{GROUP}"

    def path(self, namespace: str | None, name: str | None = None, subresource: str | None = None) -> str:
        from kaiwo_ray.cli.api import path_of

        return path_of(self.resource, namespace, name, subresource)


JOB = WorkloadType("job", KAIWOJOBS)
SERVICE = WorkloadType("service", KAIWOSERVICES)
TYPES = (JOB, SERVICE)
# every name kubectl users might type for each type
ALIASES = {alias: t for t in TYPES for alias in
           (t.short, t.short + "s", t.kind.lower(), t.plural, t.qualified, f"{t.plural}.{GROUP}")}
ALIASES.update({"kj": JOB, "ks": SERVICE, "svc": SERVICE})
PHASES_DONE = ("COMPLETE", "FAILED", "TERMINATED")


def workload_type(word: str) -> WorkloadType:
    found = ALIASES.get(word.lower())
    if found is None:
        raise UsageError(f"unknown workload type {word!r}: use job or service (e.g. job/my-training)")
    return found


def parse_selector(text: str) -> tuple[WorkloadType, str]:
    """`job/NAME` or `service/NAME` (kubectl's TYPE/NAME form; long kind names work too)."""
    kind, sep, name = text.partition("/")
    if not sep or not name or "/" in name:
        raise UsageError(f"{text!r} is not TYPE/NAME: name a workload as job/NAME or service/NAME")
    return workload_type(kind), name


def fetch(api: Api, wtype: WorkloadType, namespace: str, name: str) -> JsonObj:
    from kaiwo_ray.cli.api import ApiStatusError

    try:
        return api.get(wtype.path(namespace, name))
    except ApiStatusError as err:
        if err.code == 404:
            if "could not find the requested resource" in err.message:
                raise ClusterError(f"the cluster has no {wtype.kind} resource: install the Kaiwo CRDs "
                                   "(kubectl apply -f crds/)") from None
            raise ClusterError(f'{wtype.short}/{name} not found in namespace "{namespace}": '
                               f"list them with `kaiwo list {wtype.short}s -n {namespace}`") from None
        raise


def pods_of(api: Api, workload: JsonObj) -> list[JsonObj]:
    """The workload's pods (labelled with its run-id), download pods excluded; Ray heads first."""
    from kaiwo_ray.cli.api import path_of

    meta = workload.get("metadata") or {}
    pods = api.list(path_of(PODS, meta.get("namespace")),
                    labelSelector=f"{LABEL_RUN_ID}={meta.get('uid', '')}").get("items") or []
    pods = [p for p in pods if ((p.get("metadata") or {}).get("labels") or {}).get(LABEL_TYPE) != "downloader"]
    return sorted(pods, key=_pod_order)


def _pod_order(pod: JsonObj) -> tuple[int, str]:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    head = labels.get("ray.io/node-type") == "head"
    return (0 if head else 1, str((pod.get("metadata") or {}).get("name", "")))


# ------------------------------------------------------------------------------------------ pure rendering
def phase(obj: JsonObj) -> str:
    return str((obj.get("status") or {}).get("status") or "")


def gpus(obj: JsonObj) -> str:
    spec = obj.get("spec") or {}
    total = spec.get("gpus") or 0
    per, replicas = spec.get("gpusPerReplica") or 0, spec.get("replicas") or 1
    try:
        return str(max(int(total), int(per) * int(replicas)))
    except (TypeError, ValueError):
        return "?"


def duration(obj: JsonObj) -> str:
    from kaiwo_ray.cli.table import human_duration

    seconds = (obj.get("status") or {}).get("duration")
    return human_duration(float(seconds)) if isinstance(seconds, (int, float)) else ""


def row(obj: JsonObj, now: datetime, *, with_namespace: bool, with_type: bool, wide: bool) -> list[str]:
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    cells: list[str] = []
    if with_namespace:
        cells.append(str(meta.get("namespace", "")))
    name = str(meta.get("name", ""))
    if with_type:
        name = f"{type_of(obj).short}/{name}"
    cells += [name, str(spec.get("user") or ""), str(spec.get("clusterQueue") or ""), phase(obj) or "-",
              age(meta.get("creationTimestamp"), now)]
    if wide:
        cells += [gpus(obj), str(spec.get("gpuVendor") or "amd"), "true" if spec.get("ray") else "false",
                  duration(obj) or "-"]
    return cells


def headers(*, with_namespace: bool, wide: bool) -> list[str]:
    return ((["NAMESPACE"] if with_namespace else []) + ["NAME", "USER", "QUEUE", "STATUS", "AGE"]
            + (["GPUS", "VENDOR", "RAY", "DURATION"] if wide else []))


def type_of(obj: JsonObj) -> WorkloadType:
    return SERVICE if obj.get("kind") == SERVICE.kind else JOB


# ------------------------------------------------------------------------------------------ pods
def container_rows(pods: list[JsonObj]) -> list[tuple[str, str, str, str]]:
    """(pod, pod phase, container, container state) for every container then init container:
    the rows of the pod/container picker (upstream picked the wrong columns from these)."""
    rows = []
    for pod in pods:
        name = str((pod.get("metadata") or {}).get("name", ""))
        status = pod.get("status") or {}
        pod_phase = str(status.get("phase") or "Pending")
        states = {s.get("name"): s.get("state") or {} for s in
                  [*(status.get("containerStatuses") or []), *(status.get("initContainerStatuses") or [])]}
        spec = pod.get("spec") or {}
        for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
            cname = str(container.get("name", ""))
            rows.append((name, pod_phase, cname, state_text(states.get(cname) or {})))
    return rows


def state_text(state: JsonObj) -> str:
    if "running" in state:
        return "running"
    if "terminated" in state:
        term = state["terminated"] or {}
        return f"terminated ({term.get('reason') or 'exit'} {term.get('exitCode', '')})".replace(" )", ")")
    if "waiting" in state:
        return f"waiting ({(state['waiting'] or {}).get('reason') or 'ContainerCreating'})"
    return "waiting"


def default_container(pod: JsonObj) -> str:
    """kubectl's choice: the `kubectl.kubernetes.io/default-container` annotation, else the first."""
    annotated = ((pod.get("metadata") or {}).get("annotations") or {}).get("kubectl.kubernetes.io/default-container")
    names = [str(c.get("name", "")) for c in (pod.get("spec") or {}).get("containers") or []]
    return annotated if annotated in names else (names[0] if names else "")


def gpu_vendor_of(pod: JsonObj) -> tuple[str, str] | None:
    """(vendor, container) of the first container with GPU limits in the pod, if any."""
    for container in (pod.get("spec") or {}).get("containers") or []:
        limits = (container.get("resources") or {}).get("limits") or {}
        for key in GPU_KEYS:
            if str(limits.get(key, "0")) not in ("0", ""):
                return key.split(".", 1)[0], str(container.get("name", ""))
    return None
