from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kaiwo_ray.api.quantity import (
    format_quantity,
    normalize_quantity,
    parse_quantity,
    quantities_equal,
    quantity_format,
)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("100m", Decimal("0.1")),
        ("16Gi", Decimal(16 * 2**30)),
        ("1e3", Decimal(1000)),
        ("2", Decimal(2)),
        ("1.5", Decimal("1.5")),
        ("500k", Decimal(500_000)),
        ("1M", Decimal(1_000_000)),
        ("3Ki", Decimal(3072)),
        ("12n", Decimal("0.000000012")),
        ("5u", Decimal("0.000005")),
        ("-1", Decimal(-1)),
        ("1E-3", Decimal("0.001")),
        ("30923764531", Decimal(30923764531)),
        (8, Decimal(8)),
        (2.5, Decimal("2.5")),
    ],
)
def test_parses_kubernetes_quantities(text: str | int | float, value: Decimal) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "Gi", "1GB", "1.2.3", "abc", "1 Gi", "0x10"])
def test_rejects_malformed_quantities_naming_them(text: str) -> None:
    with pytest.raises(ValueError, match="invalid quantity"):
        parse_quantity(text)


def test_rejects_booleans_which_yaml_produces_for_yes_no() -> None:
    with pytest.raises(ValueError, match="invalid quantity"):
        parse_quantity(True)


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("1024Mi", "1Gi"),
        ("1000m", "1"),
        ("1.5", "1500m"),
        ("0.1", "100m"),
        ("1500Mi", "1500Mi"),
        ("2000", "2k"),
        ("1e3", "1e3"),
        ("0Gi", "0"),
        ("1536", "1536"),
        ("512Ki", "512Ki"),
    ],
)
def test_normalizes_to_the_spelling_the_api_server_writes(text: str, canonical: str) -> None:
    assert normalize_quantity(text) == canonical


def test_binary_format_falls_back_to_decimal_for_fractions() -> None:
    assert format_quantity(Decimal("1.5"), "BinarySI") == "1500m"


def test_detects_formats() -> None:
    assert quantity_format("1Gi") == "BinarySI"
    assert quantity_format("1e3") == "DecimalExponent"
    assert quantity_format("1k") == "DecimalSI"
    assert quantity_format(3) == "DecimalSI"


def test_semantic_equality() -> None:
    assert quantities_equal("1Gi", "1024Mi")
    assert quantities_equal("1", "1000m")
    assert not quantities_equal("1G", "1Gi")


@given(
    st.integers(min_value=0, max_value=2**62), st.sampled_from(["BinarySI", "DecimalSI", "DecimalExponent"])
)
def test_format_then_parse_is_identity_for_integers(value: int, fmt: str) -> None:
    assert parse_quantity(format_quantity(value, fmt)) == value  # type: ignore[arg-type]


@given(st.decimals(min_value=-(10**12), max_value=10**12, places=3, allow_nan=False, allow_infinity=False))
def test_format_then_parse_is_identity_for_millis(value: Decimal) -> None:
    assert parse_quantity(format_quantity(value)) == value
