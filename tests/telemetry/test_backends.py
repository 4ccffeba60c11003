"""The NVML and AMD SMI backends against stand-in vendor modules (vendor_stand_ins.py), errors included,
and the backend choice. The `gpu` marker runs the NVML backend on a real GPU when one is present."""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from vendor_stand_ins import (
    AMDSMI_STATUS_INIT_ERROR,
    AMDSMI_STATUS_NO_PERM,
    AMDSMI_STATUS_NOT_SUPPORTED,
    NVML_ERROR_DRIVER_NOT_LOADED,
    NVML_ERROR_GPU_IS_LOST,
    NVML_ERROR_LIBRARY_NOT_FOUND,
    NVML_ERROR_NO_PERMISSION,
    NVML_ERROR_NOT_SUPPORTED,
    amd_gpu,
    installed,
    make_amdsmi,
    make_pynvml,
    nvidia_gpu,
)

from kaiwo_ray.telemetry.backends import BackendUnavailable, NullBackend, select_backend
from kaiwo_ray.telemetry.backends.amd import AmdSmiBackend
from kaiwo_ray.telemetry.backends.nvidia import NvmlBackend

MIB = 1024 * 1024


def test_nvml_sample_reads_every_field() -> None:
    gpus = [nvidia_gpu(0, util=87, mem_used=40 * MIB, power_mw=312_500, temp=61,
                       procs=[(4242, 40 * MIB), (4243, None)]), nvidia_gpu(1)]
    backend = NvmlBackend(make_pynvml(gpus))
    first, second = backend.sample()
    assert first.uuid == "GPU-00000000-0000-0000-0000-000000000000"  # bytes decoded
    assert first.model == "NVIDIA H100 80GB HBM3" and first.bus_id == "00000000:18:00.0"
    assert (first.utilization, first.memory_used_bytes, first.power_watts, first.temperature_c) == (87, 40 * MIB,
                                                                                                    312.5, 61)
    assert first.memory_total_bytes == 81559 * MIB
    assert [(p.pid, p.memory_bytes) for p in first.processes] == [(4242, 40 * MIB), (4243, None)]
    assert second.utilization == 0 and second.index == 1 and not second.error
    assert [d.uuid for d in backend.devices()] == [first.uuid, second.uuid]


def test_nvml_unsupported_or_forbidden_field_is_none_not_zero() -> None:
    gpus = [nvidia_gpu(0, util=55, fail={"power_mw": NVML_ERROR_NOT_SUPPORTED,
                                         "procs": NVML_ERROR_NO_PERMISSION})]
    (sample,) = NvmlBackend(make_pynvml(gpus)).sample()
    assert sample.power_watts is None and sample.processes == ()
    assert sample.utilization == 55 and not sample.error


def test_nvml_lost_gpu_degrades_that_device_only_and_recovers() -> None:
    gpus = [nvidia_gpu(0, util=10), nvidia_gpu(1, util=20)]
    backend = NvmlBackend(make_pynvml(gpus))
    gpus[0]["fail"] = {"util": NVML_ERROR_GPU_IS_LOST}
    lost, fine = backend.sample()
    assert lost.error.startswith("GPU lost") and lost.utilization is None
    assert fine.utilization == 20 and not fine.error
    gpus[0]["fail"] = {}
    assert backend.sample()[0].utilization == 10


@pytest.mark.parametrize("code", [NVML_ERROR_LIBRARY_NOT_FOUND, NVML_ERROR_DRIVER_NOT_LOADED])
def test_nvml_init_failure_is_backend_unavailable(code: int) -> None:
    with pytest.raises(BackendUnavailable, match="nvmlInit failed"):
        NvmlBackend(make_pynvml([], init_error=code))


def test_nvml_closed_backend_samples_nothing_and_shuts_down_once() -> None:
    nvml = make_pynvml([nvidia_gpu(0)])
    backend = NvmlBackend(nvml)
    backend.close()
    backend.close()
    assert backend.sample() == [] and nvml.calls["shutdown"] == 1


def test_amd_sample_converts_units_and_na() -> None:
    gpus = [amd_gpu(0, gfx=93, vram_used_mb=1024, power_w=612, procs=[(777, "python3", 512 * MIB)]),
            amd_gpu(1, gfx="N/A", power_w="N/A")]
    backend = AmdSmiBackend(make_amdsmi(gpus))
    first, second = backend.sample()
    assert first.model == "AMD Instinct MI300X" and first.bus_id == "0000:05:00.0"
    assert first.utilization == 93 and first.memory_used_bytes == 1024 * MIB
    assert first.memory_total_bytes == 196592 * MIB
    assert first.power_watts == 612 and first.temperature_c == 41  # no edge sensor: hotspot
    assert [(p.pid, p.name, p.memory_bytes) for p in first.processes] == [(777, "python3", 512 * MIB)]
    assert second.utilization is None and second.power_watts is None  # "N/A" is unknown, not 0


def test_amd_per_call_errors_degrade_fields() -> None:
    gpus = [amd_gpu(0, gfx=50, fail={"power_w": AMDSMI_STATUS_NOT_SUPPORTED, "procs": AMDSMI_STATUS_NO_PERM})]
    (sample,) = AmdSmiBackend(make_amdsmi(gpus)).sample()
    assert sample.utilization == 50 and sample.power_watts is None and sample.processes == ()


def test_amd_unreadable_device_is_errored_then_recovers() -> None:
    gpus = [amd_gpu(0, gfx=5, fail={"uuid": AMDSMI_STATUS_NO_PERM}), amd_gpu(1, gfx=7)]
    backend = AmdSmiBackend(make_amdsmi(gpus))
    bad, good = backend.sample()
    assert bad.error and bad.utilization is None and good.utilization == 7
    gpus[0]["fail"] = {}
    assert backend.sample()[0].utilization == 5


def test_amd_init_error_is_backend_unavailable() -> None:
    with pytest.raises(BackendUnavailable, match="amdsmi_init failed"):
        AmdSmiBackend(make_amdsmi([], init_error=AMDSMI_STATUS_INIT_ERROR))


class _Raising(importlib.abc.MetaPathFinder):
    """`import amdsmi` as PyPI's amdsmi behaves without ROCm: a KeyError from its loader."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname == "amdsmi":
            raise self.error
        return None


@contextmanager
def _amdsmi_import_raises(error: BaseException) -> Iterator[None]:
    finder = _Raising(error)
    saved = sys.modules.pop("amdsmi", None)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
        if saved is not None:
            sys.modules["amdsmi"] = saved


@pytest.mark.parametrize("error", [KeyError("libamd_smi.so"), OSError("libdrm.so.2: cannot open"),
                                   ImportError("No module named 'amdsmi'")])
def test_amdsmi_import_failures_are_backend_unavailable(error: BaseException) -> None:
    with _amdsmi_import_raises(error), pytest.raises(BackendUnavailable, match=type(error).__name__):
        AmdSmiBackend()


def test_auto_picks_the_first_working_vendor_else_none() -> None:
    with installed("pynvml", make_pynvml([], init_error=NVML_ERROR_LIBRARY_NOT_FOUND)), \
            installed("amdsmi", make_amdsmi([amd_gpu(0, gfx=3)])):
        chosen = select_backend("auto")
        assert chosen.name == "amd" and chosen.sample()[0].utilization == 3
    with installed("pynvml", make_pynvml([], init_error=NVML_ERROR_DRIVER_NOT_LOADED)), \
            _amdsmi_import_raises(KeyError("libamd_smi.so")):
        chosen = select_backend("auto")
        assert isinstance(chosen, NullBackend) and chosen.sample() == []
        assert "nvidia" in chosen.reason and "amd" in chosen.reason


def test_named_backend_that_cannot_start_is_an_error_and_unknown_name_too() -> None:
    with installed("pynvml", make_pynvml([], init_error=NVML_ERROR_LIBRARY_NOT_FOUND)), \
            pytest.raises(BackendUnavailable):
        select_backend("nvidia")
    with pytest.raises(ValueError, match="unknown telemetry backend 'intel'"):
        select_backend("intel")
    assert isinstance(select_backend("none"), NullBackend)


@pytest.mark.gpu
def test_nvml_on_a_real_gpu() -> None:
    """Runs only where NVML finds a GPU (skips cleanly everywhere else)."""
    pytest.importorskip("pynvml")
    try:
        backend = NvmlBackend()
    except BackendUnavailable as err:
        pytest.skip(f"no NVIDIA GPU here: {err}")
    try:
        samples = backend.sample()
        if not samples:
            pytest.skip("NVML initialised but reports no GPU")
        for sample in samples:
            assert sample.uuid.startswith(("GPU-", "MIG-")) and sample.model
            assert sample.utilization is not None and 0 <= sample.utilization <= 100
            assert sample.memory_total_bytes and sample.memory_total_bytes > 0
    finally:
        backend.close()
