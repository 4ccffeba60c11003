"""What a decision asks the shell to record as a Kubernetes Event on the object it decided for."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PlannedEvent:
    type: str  # Normal | Warning
    reason: str
    message: str
