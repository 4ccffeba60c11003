"""GPU backends behind one protocol, and the choice between them.

`select_backend("auto")` tries NVML, then AMD SMI, and falls back to `NullBackend`: a node without
a GPU (or without a driver) runs the same actor, reporting no devices. Vendor modules are imported
inside the backends, so importing this package never loads `pynvml` or `amdsmi` (the latter breaks
`import ray` where ROCm is absent: reference/apis.md §6).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from kaiwo_ray.telemetry.model import GpuSample

log = logging.getLogger(__name__)

BACKEND_NAMES = ("auto", "nvidia", "amd", "sandbox", "none")


class BackendUnavailable(RuntimeError):
    """The backend cannot run on this node (library missing, driver not loaded, no permission)."""


@runtime_checkable
class GpuBackend(Protocol):
    name: str

    def devices(self) -> list[GpuSample]:
        """The GPUs of this node with their identity (uuid, model, bus id) and no measurements."""
        ...

    def sample(self) -> list[GpuSample]:
        """Every GPU with its current measurements; per-field failures leave that field None, a
        lost device comes back with `error` set. Never raises for a per-call error."""
        ...

    def close(self) -> None: ...


class NullBackend:
    """No GPUs here (or no way to see them): an empty sample every tick."""

    name = "none"

    def __init__(self, reason: str = "") -> None:
        self.reason = reason

    def devices(self) -> list[GpuSample]:
        return []

    def sample(self) -> list[GpuSample]:
        return []

    def close(self) -> None:
        return None


def _nvidia() -> GpuBackend:
    from kaiwo_ray.telemetry.backends.nvidia import NvmlBackend

    return NvmlBackend()


def _amd() -> GpuBackend:
    from kaiwo_ray.telemetry.backends.amd import AmdSmiBackend

    return AmdSmiBackend()


HARDWARE: dict[str, Callable[[], GpuBackend]] = {"nvidia": _nvidia, "amd": _amd}


def select_backend(name: str = "auto") -> GpuBackend:
    """The backend called `name`; "auto" is the first hardware backend whose init succeeds, else
    NullBackend (with the reasons, for the actor's health report). "sandbox" is built by the caller
    (it needs a cluster connection), so it is not chosen here."""
    if name == "none":
        return NullBackend("telemetry disabled")
    if name in HARDWARE:
        return HARDWARE[name]()  # BackendUnavailable propagates: the operator asked for this one
    if name != "auto":
        raise ValueError(f"unknown telemetry backend {name!r}; choose from {', '.join(BACKEND_NAMES)}")
    reasons: list[str] = []
    for vendor, make in HARDWARE.items():
        try:
            return make()
        except BackendUnavailable as err:
            reasons.append(f"{vendor}: {err}")
    log.info("no GPU backend on this node (%s)", "; ".join(reasons))
    return NullBackend("; ".join(reasons))
