"""AMD GPUs through AMD SMI (`amdsmi`, only in the `[amd]` extra).

`import amdsmi` without ROCm raises KeyError (and OSError where the shared library is broken), not
ImportError, so the import is guarded by all three and happens only when this backend is chosen.
Per-call `AmdSmiException`s leave the field None; "N/A" strings (unsupported metrics) are None too.
An exception while reading a device's identity marks the device as errored for this tick.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from kaiwo_ray.telemetry.backends import BackendUnavailable
from kaiwo_ray.telemetry.model import GpuProcess, GpuSample

T = TypeVar("T")
MIB = 1024 * 1024


def load_amdsmi() -> Any:
    try:
        import amdsmi
    except (ImportError, KeyError, OSError) as err:  # KeyError: 'libamd_smi.so' without ROCm
        raise BackendUnavailable(f"amdsmi is not usable here ({type(err).__name__}: {err})") from err
    return amdsmi


def _number(value: Any) -> float | None:
    """AMD SMI reports unsupported metrics as the string "N/A" (and some as dicts {value, unit})."""
    if isinstance(value, dict):
        value = value.get("value")
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


class AmdSmiBackend:
    name = "amd"

    def __init__(self, amdsmi: Any = None) -> None:
        smi = amdsmi if amdsmi is not None else load_amdsmi()
        self._smi = smi
        try:
            smi.amdsmi_init(smi.AmdSmiInitFlags.INIT_AMD_GPUS)
            self._handles = list(smi.amdsmi_get_processor_handles())
        except smi.AmdSmiException as err:
            raise BackendUnavailable(f"amdsmi_init failed: {err}") from err
        self._lock = threading.Lock()
        self._closed = False
        self._identity = [self._identify(i, h) for i, h in enumerate(self._handles)]

    def _call(self, fn: Callable[..., T], *args: Any) -> T | None:
        try:
            return fn(*args)
        except self._smi.AmdSmiException:
            return None

    def _identify(self, index: int, handle: Any) -> GpuSample:
        smi = self._smi
        try:
            uuid = str(smi.amdsmi_get_gpu_device_uuid(handle))
        except smi.AmdSmiException as err:
            return GpuSample(uuid=f"amd-index-{index}", index=index, vendor="amd", error=f"unreadable: {err}")
        bdf = self._call(smi.amdsmi_get_gpu_device_bdf, handle) or ""
        asic = self._call(smi.amdsmi_get_gpu_asic_info, handle) or {}
        return GpuSample(uuid=uuid, index=index, vendor="amd", model=str(asic.get("market_name") or ""),
                         bus_id=str(bdf))

    def devices(self) -> list[GpuSample]:
        return list(self._identity)

    def sample(self) -> list[GpuSample]:
        with self._lock:
            if self._closed:
                return []
            return [self._sample_one(ident, h) for ident, h in zip(self._identity, self._handles, strict=True)]

    def _sample_one(self, ident: GpuSample, handle: Any) -> GpuSample:
        smi = self._smi
        if ident.error:  # identity never read: try again (a GPU that came back after a reset)
            fresh = self._identify(ident.index, handle)
            if fresh.error:
                return fresh
            ident = fresh
            self._identity[ident.index] = fresh
        activity = self._call(smi.amdsmi_get_gpu_activity, handle)
        vram = self._call(smi.amdsmi_get_gpu_vram_usage, handle)
        power = self._call(smi.amdsmi_get_power_info, handle) or {}
        temperature = self._call(smi.amdsmi_get_temp_metric, handle, smi.AmdSmiTemperatureType.EDGE,
                                 smi.AmdSmiTemperatureMetric.CURRENT)
        if _number(temperature) is None:  # MI300 reports no edge sensor; its hotspot is the one that counts
            temperature = self._call(smi.amdsmi_get_temp_metric, handle, smi.AmdSmiTemperatureType.HOTSPOT,
                                     smi.AmdSmiTemperatureMetric.CURRENT)
        processes = self._call(smi.amdsmi_get_gpu_process_list, handle) or []
        used_mb = _number((vram or {}).get("vram_used"))
        total_mb = _number((vram or {}).get("vram_total"))
        watts = _number(power.get("current_socket_power"))
        if watts is None:
            watts = _number(power.get("average_socket_power"))
        if watts is None:
            watts = _number(power.get("socket_power"))
        return ident.model_copy(update={
            "utilization": _number((activity or {}).get("gfx_activity")),
            "memory_used_bytes": int(used_mb * MIB) if used_mb is not None else None,
            "memory_total_bytes": int(total_mb * MIB) if total_mb is not None else None,
            "power_watts": watts,
            "temperature_c": _number(temperature),
            "processes": tuple(_process(p) for p in processes if isinstance(p, dict) and "pid" in p),
        })

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                with contextlib.suppress(self._smi.AmdSmiException):
                    self._smi.amdsmi_shut_down()


def _process(entry: dict[str, Any]) -> GpuProcess:
    vram = _number((entry.get("memory_usage") or {}).get("vram_mem"))
    if vram is None:
        vram = _number(entry.get("mem"))
    return GpuProcess(pid=int(entry["pid"]), memory_bytes=int(vram) if vram is not None else None,
                      name=str(entry.get("name") or ""))
