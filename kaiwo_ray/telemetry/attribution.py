"""Which pod and container uses which GPU (pure, over what PodResources and /proc said).

Primary source: the kubelet's device allocations (PodResources `List`). Device plugins hand the
kubelet their own device ids: NVIDIA's are GPU (or MIG) UUIDs, AMD's are PCI addresses, so a GPU
matches an allocation by UUID or by normalised bus id. A GPU with no allocation but processes on
it (PodResources unavailable, or a pod that grabbed a GPU it was not given) is attributed through
`/proc/<pid>/cgroup` to a pod UID; the aggregator resolves UIDs to names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from kaiwo_ray.telemetry.model import GpuSample, PodRef
from kaiwo_ray.telemetry.podresources import DeviceAllocation

# cgroup v1: .../kubepods/burstable/pod<uid>/<container id>; v2 + systemd driver:
# .../kubepods-burstable-pod<uid with underscores>.slice/cri-containerd-<id>.scope
_POD_UID = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})")


def normalise_bus_id(bus_id: str) -> str:
    """"00000000:18:00.0" (NVML) and "0000:18:00.0" (sysfs, AMD device plugin) are the same device."""
    text = bus_id.strip().lower()
    domain, sep, rest = text.partition(":")
    if not sep or not rest.count(":"):
        return text
    return f"{int(domain, 16):04x}:{rest}" if all(c in "0123456789abcdef" for c in domain) else text


def pod_uid_of(pid: int, proc_root: Path = Path("/proc")) -> str | None:
    try:
        text = (proc_root / str(pid) / "cgroup").read_text()
    except OSError:  # the process ended, or /proc is not the host's
        return None
    match = _POD_UID.search(text)
    return match.group(1).replace("_", "-") if match else None


def attribute(samples: Iterable[GpuSample], allocations: Iterable[DeviceAllocation] | None,
              proc_root: Path | None = Path("/proc")) -> list[GpuSample]:
    """The samples with `pods` filled: allocations first, cgroup UIDs of their processes otherwise."""
    by_id: dict[str, list[PodRef]] = {}
    for alloc in allocations or ():
        ref = PodRef(namespace=alloc.namespace, pod=alloc.pod, container=alloc.container)
        keys = {alloc.device_id.lower()}
        if ":" in alloc.device_id:
            keys.add(normalise_bus_id(alloc.device_id))
        for key in keys:
            by_id.setdefault(key, []).append(ref)
    result: list[GpuSample] = []
    for sample in samples:
        refs = by_id.get(sample.uuid.lower()) or (by_id.get(normalise_bus_id(sample.bus_id)) if sample.bus_id
                                                  else None)
        if not refs and proc_root is not None and sample.processes:
            uids = sorted({uid for p in sample.processes if (uid := pod_uid_of(p.pid, proc_root))})
            refs = [PodRef(uid=uid) for uid in uids]
        result.append(sample.model_copy(update={"pods": tuple(refs or ())}) if refs else sample)
    return result
