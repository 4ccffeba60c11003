"""The sandbox's quantities are exact, as Kubernetes' are, however large."""

from __future__ import annotations

from decimal import Decimal

import pytest

from kaiwo_sandbox.semantics.quantity import format_quantity, parse_quantity, quantity_format


@pytest.mark.parametrize("text", ["9313229312Gi", "1164153664", "123456789012345678901234567890", "8Ei", "1.5e30"])
def test_large_quantities_parse_and_format_exactly(text: str) -> None:
    value = parse_quantity(text)
    again = format_quantity(value, quantity_format(text))
    assert parse_quantity(again) == value


def test_a_binary_quantity_beyond_28_digits_is_not_rounded() -> None:
    assert parse_quantity("9313229312Gi") == Decimal(9313229312) * 2**30
    assert format_quantity(parse_quantity("9313229312Gi"), "BinarySI") == "9313229312Gi"
