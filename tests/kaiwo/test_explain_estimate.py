"""The estimated-start line of `kaiwo explain` (pure rendering)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kaiwo_ray.cli.estimate import estimate_line
from kaiwo_ray.views.explain import StartEstimate

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_the_line_gives_the_start_the_80_percent_interval_and_the_forecasts_age() -> None:
    estimate = StartEstimate(start=NOW + timedelta(minutes=30), earliest=NOW + timedelta(minutes=20),
                             latest=NOW + timedelta(hours=3, minutes=5), computed=NOW - timedelta(seconds=70))
    assert estimate_line(estimate, NOW) == (
        "  estimated start: 2026-03-01 12:30Z (in 30m; 80 % interval 2026-03-01 12:20Z..2026-03-01 15:05Z; "
        "forecast 1m ago)")


def test_a_point_estimate_has_no_span_and_none_says_so() -> None:
    point = StartEstimate(start=NOW + timedelta(hours=5), earliest=NOW + timedelta(hours=5),
                          latest=NOW + timedelta(hours=5), computed=NOW)
    assert estimate_line(point, NOW) == "  estimated start: 2026-03-01 17:00Z (in 5h00m; forecast 0m ago)"
    assert estimate_line(StartEstimate(computed=NOW), NOW) == "  estimated start: not within the forecast's week"


def test_submit_wait_shows_the_estimate_after_the_queue_position() -> None:
    from kaiwo_ray.cli.progress import Observation, describe

    obs = Observation(workload={"status": {"status": "PENDING"}}, queue_position=(2, 3),
                      estimated_start=StartEstimate(start=datetime.now(UTC) + timedelta(minutes=90),
                                                    computed=datetime.now(UTC)))
    text = describe(obs)
    assert text.startswith("PENDING | queue position 2 of 3 | starts ~") and "(in 90m)" in text
