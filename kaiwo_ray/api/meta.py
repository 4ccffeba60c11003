"""Kubernetes object metadata and status conditions (metav1.ObjectMeta, metav1.Condition)."""

from __future__ import annotations

import datetime
from typing import Any, Literal

from pydantic import Field

from kaiwo_ray.api._base import OpenModel, Time, WireModel


class ObjectMeta(OpenModel):
    """metav1.ObjectMeta. Extra keys (managedFields, generateName, ...) are kept, never rejected."""

    name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    generation: int | None = None
    resource_version: str | None = None
    creation_timestamp: Time | None = None
    owner_references: list[dict[str, Any]] = Field(default_factory=list)
    finalizers: list[str] = Field(default_factory=list)
    deletion_timestamp: Time | None = None


class NameOnlyMeta(OpenModel):
    """Metadata of Kueue objects embedded in a KaiwoQueueConfig: only the name is used."""

    name: str | None = None


ConditionStatus = Literal["True", "False", "Unknown"]


class Condition(WireModel):
    """metav1.Condition as written into `status.conditions`."""

    type: str
    status: ConditionStatus
    reason: str = ""
    message: str = ""
    last_transition_time: Time | None = None
    observed_generation: int | None = None


def parse_time(value: Any) -> datetime.datetime | None:
    """A metav1.Time/MicroTime string (`2026-11-21T12:00:00Z`) as an aware datetime (a stamp without an
    offset is UTC, as metav1.Time always is); None when absent or unreadable, so callers treat a
    malformed stamp like a missing one."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)
