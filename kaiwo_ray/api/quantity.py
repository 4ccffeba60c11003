"""Kubernetes `resource.Quantity` semantics: `100m`, `16Gi`, `1e3`, `2`, `1.5`.

Quantities arrive as strings (or bare numbers in YAML) in `resources`, storage sizes and Kueue
quotas. Renderers do arithmetic on them (GPU-derived CPU/memory, flavor quotas) and the sandbox
compares them, so both need exact decimal values and the canonical spelling the API server
would write back.
"""

from __future__ import annotations

import functools
import re
from decimal import ROUND_CEILING, Decimal
from typing import Literal

QuantityFormat = Literal["BinarySI", "DecimalSI", "DecimalExponent"]

_BINARY: dict[str, int] = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL: dict[str, int] = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_DECIMAL_BY_EXP: dict[int, str] = {exp: suffix for suffix, exp in _DECIMAL.items()}

# The regex Kubernetes publishes for quantities in its OpenAPI (kept in sync with kubebuilder output).
QUANTITY_PATTERN = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
_QUANTITY = re.compile(
    r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$"
)
_NANO = Decimal("1e-9")


@functools.lru_cache(maxsize=4096)
def check_quantity_text(text: str) -> None:
    """Raise ValueError unless `text` is a valid quantity; cached because manifests repeat a few spellings."""
    if _QUANTITY.match(text.strip()) is None:
        raise ValueError(f'invalid quantity "{text}" (expected e.g. 2, 500m, 16Gi)')


def parse_quantity(quantity: str | int | float | Decimal) -> Decimal:
    """Exact value of a quantity. Raises ValueError naming the bad text."""
    if isinstance(quantity, bool):
        raise ValueError(f"invalid quantity {quantity!r} (expected e.g. 2, 500m, 16Gi)")
    if isinstance(quantity, Decimal):
        return quantity
    if isinstance(quantity, int):
        return Decimal(quantity)
    if isinstance(quantity, float):
        return Decimal(repr(quantity))
    if not isinstance(quantity, str):
        raise ValueError(f"invalid quantity {quantity!r} (expected e.g. 2, 500m, 16Gi)")
    match = _QUANTITY.match(quantity.strip())
    if match is None:
        raise ValueError(f'invalid quantity "{quantity}" (expected e.g. 2, 500m, 16Gi)')
    number, suffix = match.group(1), match.group(2) or ""
    value = Decimal(number)
    if suffix in _BINARY:
        return value * Decimal(1024) ** _BINARY[suffix]
    if suffix in _DECIMAL:
        return value.scaleb(_DECIMAL[suffix])
    return value.scaleb(int(suffix[1:]))


def quantity_format(quantity: str | int | float | Decimal) -> QuantityFormat:
    """The format Kubernetes would keep for this spelling (`Gi` -> BinarySI, `e3` -> DecimalExponent)."""
    if isinstance(quantity, str):
        text = quantity.strip()
        if text.endswith("i"):
            return "BinarySI"
        if re.search(r"[eE][+-]?[0-9]+$", text):
            return "DecimalExponent"
    return "DecimalSI"


def format_quantity(value: Decimal | int, fmt: QuantityFormat = "DecimalSI") -> str:
    """Canonical spelling, as the API server writes a quantity back.

    Values finer than a nano unit are rounded up (like Kubernetes). BinarySI falls back to
    DecimalSI for fractional values or ones that are not a whole number of KiB.
    """
    value = Decimal(value)
    if value != value.quantize(_NANO, rounding=ROUND_CEILING):
        value = value.quantize(_NANO, rounding=ROUND_CEILING)
    if value == 0:
        return "0"
    if fmt == "BinarySI" and value == value.to_integral_value() and abs(value) >= 1024:
        integer = int(value)
        power = 0
        while power < 6 and integer % 1024 == 0:
            integer //= 1024
            power += 1
        if power:
            suffix = next(s for s, p in _BINARY.items() if p == power)
            return f"{integer}{suffix}"
        return str(integer)
    mantissa, exponent = _decimal_mantissa(value)
    if fmt == "DecimalExponent":
        return f"{mantissa}e{exponent}" if exponent else str(mantissa)
    return f"{mantissa}{_DECIMAL_BY_EXP[exponent]}"


def normalize_quantity(quantity: str | int | float | Decimal) -> str:
    """Canonical spelling keeping the input's format: `1024Mi` -> `1Gi`, `1000m` -> `1`, `1.5` -> `1500m`."""
    return format_quantity(parse_quantity(quantity), quantity_format(quantity))


def quantities_equal(left: str | int | float | Decimal, right: str | int | float | Decimal) -> bool:
    """Semantic equality (`1Gi` == `1024Mi`), what a reconciler should compare instead of strings."""
    return parse_quantity(left) == parse_quantity(right)


def _decimal_mantissa(value: Decimal) -> tuple[int, int]:
    """Largest exponent (multiple of 3, -9..18) that leaves an integer mantissa."""
    for exponent in range(18, -10, -3):
        scaled = value.scaleb(-exponent)
        if scaled == scaled.to_integral_value():
            return int(scaled), exponent
    return int(value.scaleb(9).to_integral_value(rounding=ROUND_CEILING)), -9  # pragma: no cover
