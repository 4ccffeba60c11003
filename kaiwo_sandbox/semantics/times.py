"""Reading timestamps out of objects, in one place: RFC 3339 text as the apiserver writes it
(`2024-01-02T03:04:05Z`, with or without fractional seconds or an offset).

A missing or malformed timestamp is None rather than an error: a controller must not crash on a bad
timestamp (it just cannot resume from it), and a table prints `<unknown>`. A timestamp without an
offset is read as UTC, the only zone Kubernetes writes.
"""

from __future__ import annotations

from datetime import UTC, datetime


def parse_time(value: object) -> datetime | None:
    """The moment `value` names, timezone-aware; None when absent or not RFC 3339."""
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
