"""Go value formatting used in every field error message."""

from __future__ import annotations

from typing import Any

import pytest

from kaiwo_sandbox.semantics.field_errors import (
    aggregate_text,
    go_float,
    go_quote,
    go_value,
    invalid,
    not_supported,
)


@pytest.mark.parametrize(
    ("x", "text"),
    [(0.0, "0"), (1.0, "1"), (0.5, "0.5"), (100.0, "100"), (123456.0, "123456"), (1e6, "1e+06"),
     (1234567.0, "1.234567e+06"), (2147483647.0, "2.147483647e+09"), (0.0001, "0.0001"), (0.00001, "1e-05"),
     (-2.5, "-2.5"), (1e21, "1e+21")],
)
def test_go_float(x: float, text: str) -> None:
    assert go_float(x) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [(None, "null"), (True, "true"), (-1, "-1"), ("a\"b", '"a\\"b"'), ("é", '"é"'), ("\x01", '"\\x01"'),
     ({"name": "a", "n": 1}, 'map[string]interface {}{"n":1, "name":"a"}'), (["a", 1], '[]interface {}{"a", 1}')],
)
def test_go_value(value: Any, text: str) -> None:
    assert go_value(value) == text


def test_quote_escapes_like_strconv() -> None:
    assert go_quote("tab\there\n") == '"tab\\there\\n"'


def test_cause_shapes_and_aggregate() -> None:
    a = invalid("spec.x", 1, "bad")
    b = not_supported("spec.y", "z", ["a", "b"])
    assert a == {"reason": "FieldValueInvalid", "message": "Invalid value: 1: bad", "field": "spec.x"}
    assert b["message"] == 'Unsupported value: "z": supported values: "a", "b"'
    assert aggregate_text([a]) == "spec.x: Invalid value: 1: bad"
    assert aggregate_text([a, b, a]) == ('[spec.x: Invalid value: 1: bad, spec.y: Unsupported value: "z": '
                                         'supported values: "a", "b"]')
