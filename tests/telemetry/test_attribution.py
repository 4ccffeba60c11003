"""Pod attribution: the PodResources client against a real gRPC server on a unix socket, and the
cgroup fallback against real files shaped like /proc/<pid>/cgroup."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubelet_podresources import kubelet_socket, response_of

from kaiwo_ray.telemetry.attribution import attribute, normalise_bus_id, pod_uid_of
from kaiwo_ray.telemetry.model import GpuProcess, GpuSample, PodRef
from kaiwo_ray.telemetry.podresources import PodResourcesError, list_allocations

NV0 = GpuSample(uuid="GPU-aaaa", index=0, vendor="nvidia", bus_id="00000000:18:00.0")
NV1 = GpuSample(uuid="GPU-bbbb", index=1, vendor="nvidia", bus_id="00000000:2A:00.0")
AMD0 = GpuSample(uuid="07ff74a1-0000", index=0, vendor="amd", bus_id="0000:c1:00.0")


def test_list_over_a_real_unix_socket_maps_devices_to_containers() -> None:
    reply = response_of([("ml", "train-0", "main", "nvidia.com/gpu", ["GPU-aaaa"]),
                         ("ml", "train-0", "sidecar", "example.com/nic", ["nic0"]),
                         ("web", "infer", "server", "amd.com/gpu", ["0000:c1:00.0"])])
    with kubelet_socket(lambda: reply) as socket:
        allocations = list_allocations(str(socket))
    assert [(a.namespace, a.pod, a.container, a.device_id) for a in allocations] == [
        ("ml", "train-0", "main", "GPU-aaaa"), ("web", "infer", "server", "0000:c1:00.0")]
    samples = attribute([NV0, NV1, AMD0], allocations, proc_root=None)
    assert samples[0].pods == (PodRef(namespace="ml", pod="train-0", container="main"),)
    assert samples[1].pods == ()  # free GPU
    assert samples[2].pods == (PodRef(namespace="web", pod="infer", container="server"),)  # by bus id


def test_unknown_fields_of_a_newer_kubelet_are_skipped() -> None:
    reply = response_of([("ml", "p", "c", "nvidia.com/gpu", ["GPU-bbbb"])]) + b"\x12\x03abc"  # field 2
    with kubelet_socket(lambda: reply) as socket:
        (allocation,) = list_allocations(str(socket))
    assert allocation.device_id == "GPU-bbbb"


def test_missing_socket_is_a_clear_error() -> None:
    with pytest.raises(PodResourcesError, match=r"PodResources List on /tmp/nowhere/kubelet\.sock"):
        list_allocations("/tmp/nowhere/kubelet.sock", timeout=0.5)


def test_bus_ids_of_nvml_and_sysfs_compare_equal() -> None:
    assert normalise_bus_id("00000000:2A:00.0") == normalise_bus_id("0000:2a:00.0") == "0000:2a:00.0"


@pytest.mark.parametrize("cgroup, uid", [
    ("12:devices:/kubepods/burstable/pod3f1c2a44-9b7e-4c36-8f0e-7a1d2b3c4d5e/0123abcd\n",
     "3f1c2a44-9b7e-4c36-8f0e-7a1d2b3c4d5e"),
    ("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod3f1c2a44_9b7e_4c36_8f0e_7a1d2b3c4d5e"
     ".slice/cri-containerd-0123abcd.scope\n", "3f1c2a44-9b7e-4c36-8f0e-7a1d2b3c4d5e"),
    ("0::/user.slice/user-1000.slice/session-3.scope\n", None),
])
def test_cgroup_fallback_finds_the_pod_uid(tmp_path: Path, cgroup: str, uid: str | None) -> None:
    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "cgroup").write_text(cgroup)
    assert pod_uid_of(4242, tmp_path) == uid
    assert pod_uid_of(9999, tmp_path) is None  # the process is gone


def test_processes_attribute_a_gpu_without_an_allocation(tmp_path: Path) -> None:
    (tmp_path / "77").mkdir()
    (tmp_path / "77" / "cgroup").write_text("0::/kubepods/pod11111111-2222-3333-4444-555555555555/c\n")
    busy = NV1.model_copy(update={"processes": (GpuProcess(pid=77), GpuProcess(pid=78))})
    (sample,) = attribute([busy], None, proc_root=tmp_path)
    assert sample.pods == (PodRef(uid="11111111-2222-3333-4444-555555555555"),)
