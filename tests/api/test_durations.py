from __future__ import annotations

import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kaiwo_ray.api.durations import canonical_go_duration, format_go_duration, parse_go_duration

td = datetime.timedelta


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1h30m", td(hours=1, minutes=30)),
        ("1s", td(seconds=1)),
        ("500ms", td(milliseconds=500)),
        ("0", td(0)),
        ("0s", td(0)),
        ("24h", td(hours=24)),
        ("1.5h", td(minutes=90)),
        ("-2m", td(minutes=-2)),
        ("+3s", td(seconds=3)),
        ("1h2m3s4ms5us", td(hours=1, minutes=2, seconds=3, milliseconds=4, microseconds=5)),
        ("300µs", td(microseconds=300)),
        ("1500ns", td(microseconds=2)),  # nanoseconds round to the nearest microsecond
        (".5s", td(milliseconds=500)),
    ],
)
def test_parses_go_durations(text: str, expected: datetime.timedelta) -> None:
    assert parse_go_duration(text) == expected


@pytest.mark.parametrize("text", ["", "90", "1d", "h", "1h 30m", "1.h.", "--1s", "5 m", "1H"])
def test_rejects_what_go_rejects_with_an_example(text: str) -> None:
    with pytest.raises(ValueError, match=r'invalid duration ".*" \(expected e\.g\. 30s, 5m'):
        parse_go_duration(text)


@pytest.mark.parametrize(
    ("delta", "text"),
    [
        (td(0), "0s"),
        (td(hours=1, minutes=30), "1h30m0s"),
        (td(seconds=1.5), "1.5s"),
        (td(milliseconds=500), "500ms"),
        (td(microseconds=1500), "1.5ms"),
        (td(microseconds=7), "7µs"),
        (td(minutes=-2), "-2m0s"),
        (td(days=2), "48h0m0s"),
    ],
)
def test_formats_like_go(delta: datetime.timedelta, text: str) -> None:
    assert format_go_duration(delta) == text


@given(st.timedeltas(min_value=td(days=-3000), max_value=td(days=3000)))
def test_format_then_parse_is_identity(delta: datetime.timedelta) -> None:
    assert parse_go_duration(format_go_duration(delta)) == delta


@pytest.mark.parametrize(("text", "written"), [
    ("5m", "5m0s"), ("15s", "15s"), ("1h30m", "1h30m0s"), ("90s", "1m30s"), ("1h", "1h0m0s"), ("0", "0s"),
    ("300ms", "300ms"), ("1.5s", "1.5s"), ("-90s", "-1m30s"), ("25h", "25h0m0s"), ("1h2m0.3s", "1h2m0.3s"),
])
def test_canonical_form_is_what_metav1_duration_writes_back(text: str, written: str) -> None:
    assert canonical_go_duration(text) == written
