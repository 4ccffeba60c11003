"""Go `time.Duration` strings (`1h30m`, `500ms`, `-1.5s`), as used by metav1.Duration fields.

Kaiwo stores durations as Go duration strings in its CRDs (`spec.duration`,
`scheduling.pendingThresholdForPreemption`, ...). We keep the string on the wire and parse it where
a value is needed, with Go's grammar so that every manifest Go accepts we accept too.
"""

from __future__ import annotations

import datetime
import re
from decimal import Decimal, InvalidOperation

# Microseconds per unit; Go accepts both the micro sign and the Greek mu.
_UNIT_MICROS: dict[str, Decimal] = {
    "ns": Decimal("0.001"),
    "us": Decimal(1),
    "µs": Decimal(1),
    "μs": Decimal(1),
    "ms": Decimal(1_000),
    "s": Decimal(1_000_000),
    "m": Decimal(60_000_000),
    "h": Decimal(3_600_000_000),
}

_NUMBER = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
_UNIT = r"(?:ns|us|µs|μs|ms|s|m|h)"
# The whole-string grammar, also published as the CRD `pattern` of duration fields.
GO_DURATION_PATTERN = rf"^[-+]?(0|({_NUMBER}{_UNIT})+)$"
_WHOLE = re.compile(GO_DURATION_PATTERN)
_PART = re.compile(rf"({_NUMBER})({_UNIT})")


def parse_go_duration(text: str) -> datetime.timedelta:
    """Parse a Go duration string into a timedelta (nanoseconds are rounded to microseconds).

    Raises ValueError with a message fit to show a user, e.g. for `90` (no unit) or `1d`.
    """
    if not isinstance(text, str):
        raise ValueError(f"must be a duration string like 1h30m, got {type(text).__name__}")
    if not _WHOLE.match(text):
        raise ValueError(f'invalid duration "{text}" (expected e.g. 30s, 5m, 1h30m, 500ms)')
    sign = -1 if text.startswith("-") else 1
    body = text.lstrip("+-")
    if body == "0":
        return datetime.timedelta(0)
    try:
        micros = sum(
            (Decimal(number) * _UNIT_MICROS[unit] for number, unit in _PART.findall(body)), Decimal(0)
        )
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only valid decimals
        raise ValueError(f'invalid duration "{text}"') from exc
    try:
        return sign * datetime.timedelta(microseconds=int(micros.to_integral_value()))
    except OverflowError as exc:
        raise ValueError(f'duration "{text}" is too large') from exc


def format_go_duration(delta: datetime.timedelta) -> str:
    """Format like Go's `Duration.String()`: `1h30m0s`, `1.5s`, `500ms`, `0s`."""
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if micros == 0:
        return "0s"
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    if micros < 1_000_000:
        if micros % 1_000 == 0:
            return f"{sign}{micros // 1_000}ms"
        if micros >= 1_000:
            return f"{sign}{_trim(Decimal(micros) / 1_000)}ms"
        return f"{sign}{micros}µs"
    hours, rest = divmod(micros, 3_600_000_000)
    minutes, rest = divmod(rest, 60_000_000)
    seconds = _trim(Decimal(rest) / 1_000_000)
    out = sign
    if hours:
        out += f"{hours}h"
    if hours or minutes:
        out += f"{minutes}m"
    return f"{out}{seconds}s"


def _trim(value: Decimal) -> str:
    text = format(value, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def canonical_go_duration(text: str) -> str:
    """`text` as metav1.Duration writes it back (`5m` -> `5m0s`, `90s` -> `1m30s`, `15s` stays):
    what an operator in Go stores after parsing a duration. Raises ValueError like the parser."""
    return format_go_duration(parse_go_duration(text))

