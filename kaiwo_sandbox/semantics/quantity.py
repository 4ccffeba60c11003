"""Kubernetes `resource.Quantity` as the sandbox understands it, in one place.

Two views of one quantity, for two jobs:
- `parse_quantity` / `format_quantity` / `quantity_format` / `normalize_quantity`: exact decimals and
  the canonical spelling the apiserver writes back (defaulting and validation of built-in objects);
- `parse_milli` / `format_milli`: integer milli-units (cpu "500m" -> 500, memory "1Ki" -> 1_024_000,
  "nvidia.com/gpu: 8" -> 8000) for the simulated cluster's arithmetic (scheduler fit, Kueue quota),
  so sums never drift and one unit works for every resource. `QuantityError` is what they raise.

A copy of the product's quantity semantics, deliberately: the sandbox judges the operator and shares
no code with it.
"""

from __future__ import annotations

import functools
import re
from decimal import ROUND_CEILING, Context, Decimal, InvalidOperation
from typing import Any, Literal

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
# Quantities are exact in Kubernetes (inf.Dec): a memory of 9313229312Gi, quantized to nano units, needs
# more digits than the default context's 28 (it raised InvalidOperation, a 500).
_EXACT = Context(prec=100)


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
        return value.fma(_EXACT.power(1024, _BINARY[suffix]), 0, context=_EXACT)  # exact, however large
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
    nano = value.quantize(_NANO, rounding=ROUND_CEILING, context=_EXACT)
    if value != nano:
        value = nano
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


# --- milli-units, for the simulated cluster's arithmetic ---

_MILLI_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_MILLI_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
            "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
            "P": Decimal("1e15"), "E": Decimal("1e18")}


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse_milli(value: Any) -> int:
    """Parse a Kubernetes quantity ("500m", "1Gi", "8", 2, "1e3") into milli-units, rounding up
    as the apiserver does for sub-milli precision."""
    if isinstance(value, bool):
        raise QuantityError(f"quantities must be numbers or strings, not {value!r}")
    if isinstance(value, int | float):
        number = Decimal(str(value))
    elif isinstance(value, str):
        text = value.strip()
        if not text:
            raise QuantityError("empty quantity")
        number = _parse_text(text)
    else:
        raise QuantityError(f"quantities must be numbers or strings, not {value!r}")
    return int((number * 1000).to_integral_value(rounding=ROUND_CEILING))


def _parse_text(text: str) -> Decimal:
    for suffix, factor in _MILLI_BINARY.items():
        if text.endswith(suffix):
            return _number(text[: -len(suffix)], text) * factor
    if text[-1] in _MILLI_DECIMAL and not text[-1].isdigit():
        return _number(text[:-1], text) * _MILLI_DECIMAL[text[-1]]
    return _number(text, text)


def _number(digits: str, original: str) -> Decimal:
    try:
        number = Decimal(digits)
    except InvalidOperation:
        raise QuantityError(f"quantities must match the regular expression "
                            f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {original!r}") from None
    if not number.is_finite():
        raise QuantityError(f"quantity {original!r} is not finite")
    return number


def format_milli(resource: str, milli: int) -> str:
    """Canonical-looking text for an amount: cpu in cores or millicores, memory-like resources
    with the largest exact binary suffix, counts (GPUs, pods) as plain integers."""
    if milli % 1000:
        return f"{milli}m"
    whole = milli // 1000
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        for suffix, factor in reversed(_MILLI_BINARY.items()):
            if whole and whole % factor == 0:
                return f"{whole // factor}{suffix}"
    return str(whole)
