"""The one error the renderer raises: a workload that cannot be turned into valid children."""

from __future__ import annotations


class RenderError(ValueError):
    """A manifest that would yield children the API server rejects (or that upstream crashes on).

    `field` is the offending path in wire names (`spec.rayJob.spec.rayClusterSpec`) so the message
    reads like a validation error: `spec.rayJob.spec.rayClusterSpec: required when ...`.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.reason = message
