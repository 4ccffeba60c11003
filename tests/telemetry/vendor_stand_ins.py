"""Stand-ins for the vendor libraries `pynvml` and `amdsmi`, built as real modules for `sys.modules`.

They behave as reference/apis.md §7 describes the real ones: NVML's error class hierarchy (one
subclass per code, `NVMLError(code)` mapping to it), bytes-or-str returns, `usedGpuMemory` None
where the driver hides it; AMD SMI's "N/A" strings for unsupported metrics, MB units for VRAM,
`AmdSmiLibraryException(err_code)`. Each GPU is a dict the test mutates between samples; a key
whose value is an exception *class* makes that call raise it.
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# NVML return codes (nvml.h)
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_GPU_IS_LOST = 15


def make_pynvml(gpus: list[dict[str, Any]], *, init_error: int | None = None) -> types.ModuleType:
    mod = types.ModuleType("pynvml")

    class NVMLError(Exception):
        _valClassMapping: dict[int, type] = {}

        def __new__(cls, value: int) -> Any:
            if cls is NVMLError:
                cls = NVMLError._valClassMapping.get(value, cls)
            obj = Exception.__new__(cls)
            obj.value = value
            return obj

        def __str__(self) -> str:
            return f"NVML error {self.value}"

    mod.NVMLError = NVMLError
    for code, name in [(NVML_ERROR_UNINITIALIZED, "Uninitialized"), (NVML_ERROR_NOT_SUPPORTED, "NotSupported"),
                       (NVML_ERROR_NO_PERMISSION, "NoPermission"), (NVML_ERROR_DRIVER_NOT_LOADED, "DriverNotLoaded"),
                       (NVML_ERROR_LIBRARY_NOT_FOUND, "LibraryNotFound"), (NVML_ERROR_GPU_IS_LOST, "GpuIsLost")]:
        sub = type(f"NVMLError_{name}", (NVMLError,), {})
        NVMLError._valClassMapping[code] = sub
        setattr(mod, sub.__name__, sub)
    mod.NVML_TEMPERATURE_GPU = 0
    mod.calls = {"init": 0, "shutdown": 0}
    state = {"initialised": False}

    def check(gpu: dict[str, Any], key: str) -> Any:
        if not state["initialised"]:
            raise NVMLError(NVML_ERROR_UNINITIALIZED)
        failing = gpu.get("fail", {}).get(key)
        if failing is not None:
            raise NVMLError(failing)
        return gpu[key]

    def nvmlInit() -> None:
        if init_error is not None:
            raise NVMLError(init_error)
        state["initialised"] = True
        mod.calls["init"] += 1

    def nvmlShutdown() -> None:
        state["initialised"] = False
        mod.calls["shutdown"] += 1

    def nvmlDeviceGetCount() -> int:
        if not state["initialised"]:
            raise NVMLError(NVML_ERROR_UNINITIALIZED)
        return len(gpus)

    def nvmlDeviceGetHandleByIndex(i: int) -> dict[str, Any]:
        return gpus[i]

    mod.nvmlInit, mod.nvmlShutdown, mod.nvmlDeviceGetCount = nvmlInit, nvmlShutdown, nvmlDeviceGetCount
    mod.nvmlDeviceGetHandleByIndex = nvmlDeviceGetHandleByIndex
    mod.nvmlDeviceGetUUID = lambda h: check(h, "uuid")
    mod.nvmlDeviceGetName = lambda h: check(h, "name")
    mod.nvmlDeviceGetPciInfo = lambda h: types.SimpleNamespace(busId=check(h, "bus_id"))
    mod.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=check(h, "util"), memory=0)
    mod.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(
        used=check(h, "mem_used"), total=h["mem_total"], free=h["mem_total"] - h["mem_used"])
    mod.nvmlDeviceGetPowerUsage = lambda h: check(h, "power_mw")
    mod.nvmlDeviceGetTemperatureV = lambda h, sensor: check(h, "temp")
    mod.nvmlDeviceGetComputeRunningProcesses = lambda h: [
        types.SimpleNamespace(pid=pid, usedGpuMemory=mem, gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF)
        for pid, mem in check(h, "procs")]
    return mod


def nvidia_gpu(index: int, **overrides: Any) -> dict[str, Any]:
    gpu: dict[str, Any] = {
        "uuid": f"GPU-{index:08d}-0000-0000-0000-000000000000".encode(),  # older bindings return bytes
        "name": "NVIDIA H100 80GB HBM3", "bus_id": f"00000000:{0x18 + index:02X}:00.0",
        "util": 0, "mem_used": 0, "mem_total": 81559 * 1024 * 1024, "power_mw": 70000, "temp": 30,
        "procs": [], "fail": {},
    }
    gpu.update(overrides)
    return gpu


# --- amdsmi ---------------------------------------------------------------------------------------

AMDSMI_STATUS_NOT_SUPPORTED = 2
AMDSMI_STATUS_NO_PERM = 10
AMDSMI_STATUS_INIT_ERROR = 8


def make_amdsmi(gpus: list[dict[str, Any]], *, init_error: int | None = None) -> types.ModuleType:
    mod = types.ModuleType("amdsmi")

    class AmdSmiException(Exception):
        pass

    class AmdSmiLibraryException(AmdSmiException):
        def __init__(self, err_code: int) -> None:
            super().__init__(f"AMD SMI error {err_code}")
            self.err_code = err_code

    mod.AmdSmiException, mod.AmdSmiLibraryException = AmdSmiException, AmdSmiLibraryException
    mod.AmdSmiInitFlags = types.SimpleNamespace(INIT_AMD_GPUS=2)
    mod.AmdSmiTemperatureType = types.SimpleNamespace(EDGE=0, HOTSPOT=1, JUNCTION=1, VRAM=2)
    mod.AmdSmiTemperatureMetric = types.SimpleNamespace(CURRENT=0)
    mod.calls = {"init": 0, "shutdown": 0}

    def check(gpu: dict[str, Any], key: str) -> Any:
        failing = gpu.get("fail", {}).get(key)
        if failing is not None:
            raise AmdSmiLibraryException(failing)
        return gpu[key]

    def amdsmi_init(flags: int) -> None:
        if init_error is not None:
            raise AmdSmiLibraryException(init_error)
        mod.calls["init"] += 1

    def amdsmi_shut_down() -> None:
        mod.calls["shutdown"] += 1

    def temp(h: dict[str, Any], sensor: int, metric: int) -> Any:
        return check(h, "temp_edge" if sensor == 0 else "temp_hotspot")

    mod.amdsmi_init, mod.amdsmi_shut_down = amdsmi_init, amdsmi_shut_down
    mod.amdsmi_get_processor_handles = lambda: list(gpus)
    mod.amdsmi_get_gpu_device_uuid = lambda h: check(h, "uuid")
    mod.amdsmi_get_gpu_device_bdf = lambda h: check(h, "bdf")
    mod.amdsmi_get_gpu_asic_info = lambda h: {"market_name": check(h, "market_name"), "device_id": "0x74a1",
                                              "num_compute_units": 304}
    mod.amdsmi_get_gpu_activity = lambda h: {"gfx_activity": check(h, "gfx"), "umc_activity": 0,
                                             "mm_activity": "N/A"}
    mod.amdsmi_get_gpu_vram_usage = lambda h: {"vram_total": h["vram_total_mb"], "vram_used": check(h, "vram_used_mb")}
    mod.amdsmi_get_power_info = lambda h: {"current_socket_power": check(h, "power_w"), "average_socket_power": "N/A",
                                           "socket_power": "N/A", "power_limit": 750}
    mod.amdsmi_get_temp_metric = temp
    mod.amdsmi_get_gpu_process_list = lambda h: [
        {"name": name, "pid": pid, "mem": vram, "engine_usage": {"gfx": 0, "enc": 0},
         "memory_usage": {"gtt_mem": 0, "cpu_mem": 0, "vram_mem": vram}, "cu_occupancy": 0}
        for pid, name, vram in check(h, "procs")]
    return mod


def amd_gpu(index: int, **overrides: Any) -> dict[str, Any]:
    gpu: dict[str, Any] = {
        "uuid": f"{index:02x}ff74a1-0000-1000-80ca-4b9c5f8e0a{index:02x}", "bdf": f"0000:{0x05 + index * 0x10:02x}:00.0",
        "market_name": "AMD Instinct MI300X", "gfx": 0, "vram_total_mb": 196592, "vram_used_mb": 283,
        "power_w": 140, "temp_edge": "N/A", "temp_hotspot": 41, "procs": [], "fail": {},
    }
    gpu.update(overrides)
    return gpu


@contextmanager
def installed(name: str, module: types.ModuleType | None) -> Iterator[None]:
    """Put `module` in sys.modules under `name` (None: make the import fail) for the block."""
    import sys

    missing = object()
    previous = sys.modules.get(name, missing)
    sys.modules[name] = module  # type: ignore[assignment]
    try:
        yield
    finally:
        if previous is missing:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = previous  # type: ignore[assignment]
