"""NVIDIA GPUs through NVML (`nvidia-ml-py`, module `pynvml`; the `[nvidia]` extra).

Every NVML call can fail on its own: `NotSupported` (a field this GPU or driver lacks) and
`NoPermission` leave that one field None; `GpuIsLost` (and the driver going away) marks the device
as errored for this tick. None of them reaches the actor. A failing `nvmlInit` (library not found,
driver not loaded) is `BackendUnavailable`: the node has no usable NVIDIA GPU.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from kaiwo_ray.telemetry.backends import BackendUnavailable
from kaiwo_ray.telemetry.model import GpuProcess, GpuSample

T = TypeVar("T")

# NVML error codes that mean "this whole device is gone", not "this field is unavailable".
_DEVICE_LOST_CLASSES = ("NVMLError_GpuIsLost", "NVMLError_Uninitialized", "NVMLError_DriverNotLoaded",
                        "NVMLError_Unknown")


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


class _DeviceLost(Exception):
    pass


class NvmlBackend:
    name = "nvidia"

    def __init__(self, nvml: Any = None) -> None:
        if nvml is None:
            try:
                import pynvml  # the [nvidia] extra
            except ImportError as err:
                raise BackendUnavailable(f"nvidia-ml-py is not installed ({err})") from err
            nvml = pynvml
        self._nvml = nvml
        self._lost = tuple(getattr(nvml, n) for n in _DEVICE_LOST_CLASSES if hasattr(nvml, n))
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as err:
            raise BackendUnavailable(f"nvmlInit failed: {err}") from err
        self._lock = threading.Lock()  # NVML is thread-safe, but a close during a sample is not
        self._closed = False
        try:
            count = int(nvml.nvmlDeviceGetCount())
            self._handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except nvml.NVMLError as err:
            nvml.nvmlShutdown()
            raise BackendUnavailable(f"cannot enumerate NVIDIA GPUs: {err}") from err
        self._identity = [self._identify(i, h) for i, h in enumerate(self._handles)]

    def _call(self, fn: Callable[..., T], *args: Any) -> T | None:
        """One NVML call: its value, None when the field is unavailable, _DeviceLost when the GPU is."""
        try:
            return fn(*args)
        except self._lost as err:
            raise _DeviceLost(str(err)) from err
        except self._nvml.NVMLError:
            return None

    def _identify(self, index: int, handle: Any) -> GpuSample:
        nvml = self._nvml
        try:
            uuid = self._call(nvml.nvmlDeviceGetUUID, handle)
            name = self._call(nvml.nvmlDeviceGetName, handle)
            pci = self._call(nvml.nvmlDeviceGetPciInfo, handle)
        except _DeviceLost as err:
            return GpuSample(uuid=f"nvidia-index-{index}", index=index, vendor="nvidia", error=f"GPU lost: {err}")
        bus_id = _text(getattr(pci, "busId", "")) if pci is not None else ""
        return GpuSample(uuid=_text(uuid) if uuid else f"nvidia-index-{index}", index=index, vendor="nvidia",
                         model=_text(name or ""), bus_id=bus_id)

    def devices(self) -> list[GpuSample]:
        return list(self._identity)

    def sample(self) -> list[GpuSample]:
        with self._lock:
            if self._closed:
                return []
            return [self._sample_one(ident, handle) for ident, handle in zip(self._identity, self._handles,
                                                                               strict=True)]

    def _sample_one(self, ident: GpuSample, handle: Any) -> GpuSample:
        nvml = self._nvml
        try:
            rates = self._call(nvml.nvmlDeviceGetUtilizationRates, handle)
            memory = self._call(nvml.nvmlDeviceGetMemoryInfo, handle)
            power_mw = self._call(nvml.nvmlDeviceGetPowerUsage, handle)
            temperature = self._call(self._temperature, handle)
            procs = self._call(nvml.nvmlDeviceGetComputeRunningProcesses, handle) or []
        except _DeviceLost as err:
            return ident.model_copy(update={"error": f"GPU lost: {err}"})
        processes = tuple(
            GpuProcess(pid=int(p.pid), memory_bytes=_bytes_or_none(getattr(p, "usedGpuMemory", None)))
            for p in procs)
        return ident.model_copy(update={
            "utilization": float(rates.gpu) if rates is not None else None,
            "memory_used_bytes": int(memory.used) if memory is not None else None,
            "memory_total_bytes": int(memory.total) if memory is not None else None,
            "power_watts": power_mw / 1000.0 if power_mw is not None else None,
            "temperature_c": float(temperature) if temperature is not None else None,
            "processes": processes,
        })

    def _temperature(self, handle: Any) -> Any:
        nvml = self._nvml
        # ...GetTemperatureV replaces the deprecated ...GetTemperature (gone with CUDA 14).
        getter = getattr(nvml, "nvmlDeviceGetTemperatureV", None) or nvml.nvmlDeviceGetTemperature
        return getter(handle, nvml.NVML_TEMPERATURE_GPU)

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                with contextlib.suppress(self._nvml.NVMLError):
                    self._nvml.nvmlShutdown()


def _bytes_or_none(value: Any) -> int | None:
    # NVML reports NVML_VALUE_NOT_AVAILABLE (None in pynvml) where the driver hides per-process memory.
    return int(value) if isinstance(value, int) else None
