"""kubectl's plain-text table and age formats (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from kaiwo_ray.api.meta import parse_time


def render_table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, no_headers: bool = False) -> str:
    """Columns left-aligned and separated by three spaces, as kubectl's tabwriter prints them;
    no trailing blanks."""
    table = ([list(headers)] if not no_headers else []) + [list(r) for r in rows]
    if not table:
        return ""
    widths = [max(len(row[i]) for row in table) for i in range(len(headers))]
    lines = []
    for row in table:
        cells = [cell.ljust(widths[i]) if i < len(row) - 1 else cell for i, cell in enumerate(row)]
        lines.append("   ".join(cells).rstrip())
    return "\n".join(lines) + "\n"


def human_duration(seconds: float) -> str:
    """k8s.io/apimachinery duration.HumanDuration."""
    if seconds < -1:
        return "<invalid>"
    s = int(max(seconds, 0))
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


def age(timestamp: object, now: datetime) -> str:
    when = parse_time(timestamp)
    return "<unknown>" if when is None else human_duration((now - when).total_seconds())
