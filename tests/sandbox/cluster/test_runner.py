"""ControllerRunner retry policy: failed reconciles back off per key, success resets."""

from __future__ import annotations

import logging
import time
from typing import cast

import pytest

from kaiwo_sandbox.cluster.base import (
    MAX_ERROR_BACKOFF,
    SLICE_KEYS,
    ClusterSettings,
    Controller,
    ControllerRunner,
    Key,
)
from kaiwo_sandbox.contracts import ApiError, Clock, Store


class Flaky(Controller):
    """Fails (with `error`) while `failing`, then succeeds with no requeue."""

    name = "flaky"
    watches = ()

    def __init__(self, error: Exception) -> None:
        super().__init__(cast(Store, None), cast(Clock, None), ClusterSettings())
        self.error = error
        self.failing = True

    def reconcile(self, key: Key) -> float | None:
        if self.failing:
            raise self.error
        return None


class RecordingRunner(ControllerRunner):
    """Records requeue delays instead of arming timers (no event loop needed)."""

    def __init__(self) -> None:
        super().__init__(cast(Store, None), cast(Clock, None))
        self.delays: list[float] = []

    def _schedule(self, controller: Controller, key: Key, delay: float) -> None:
        self.delays.append(delay)


def run(runner: RecordingRunner, controller: Controller, times: int) -> None:
    for _ in range(times):
        runner._dirty[controller.name][("ns", "x")] = None
        runner.drain_once()


def test_a_write_the_store_keeps_refusing_backs_off_instead_of_spinning() -> None:
    runner, controller = RecordingRunner(), Flaky(ApiError.bad_request("cannot be handled as a Job"))
    runner.add(controller)
    run(runner, controller, 14)
    assert runner.delays[:4] == [0.05, 0.1, 0.2, 0.4]
    assert runner.delays[-1] == MAX_ERROR_BACKOFF
    assert runner.errors == 0  # API refusals are expected outcomes, not controller bugs


def test_success_resets_the_back_off() -> None:
    runner, controller = RecordingRunner(), Flaky(ApiError.bad_request("no"))
    runner.add(controller)
    run(runner, controller, 3)
    controller.failing = False
    run(runner, controller, 1)
    controller.failing = True
    run(runner, controller, 1)
    assert runner.delays == [0.05, 0.1, 0.2, 0.05]


def test_exceptions_count_as_errors_and_back_off_from_a_second() -> None:
    runner, controller = RecordingRunner(), Flaky(RuntimeError("bug"))
    runner.add(controller)
    run(runner, controller, 3)
    assert runner.delays == [1.0, 2.0, 4.0]
    assert runner.errors == 3


def test_a_lasting_refusal_is_warned_about_once_races_stay_quiet(caplog: pytest.LogCaptureFixture) -> None:
    refused, racing = Flaky(ApiError.bad_request("cannot be handled as a Job")), Flaky(ApiError(409, "Conflict", "x"))
    racing.name = "racing"
    runner = RecordingRunner()
    runner.add(refused)
    runner.add(racing)
    with caplog.at_level(logging.DEBUG, logger="kaiwo_sandbox.cluster.base"):
        for _ in range(3):
            for controller in (refused, racing):
                runner._dirty[controller.name][("ns", "x")] = None
            runner.drain_once()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ["flaky: ('ns', 'x') -> 400 cannot be handled as a Job"]


class Counting(Controller):
    """Records the keys it reconciles (in a log shared by several), each taking `cost` seconds."""

    watches = ()

    def __init__(self, name: str, log: list[tuple[str, Key]], cost: float = 0.0) -> None:
        super().__init__(cast(Store, None), cast(Clock, None), ClusterSettings())
        self.name = name
        self.log = log
        self.cost = cost

    def reconcile(self, key: Key) -> float | None:
        self.log.append((self.name, key))
        if self.cost:
            end = time.perf_counter() + self.cost
            while time.perf_counter() < end:  # burning CPU as a slow reconcile does
                pass
        return None


def test_a_slice_stops_at_its_budget_and_the_controllers_take_turns() -> None:
    """A slice runs at most SLICE_KEYS of one controller before the next one's turn, stops once its
    budget is spent (saying keys are left), and the next slice goes on where it stopped: a busy
    controller neither holds the loop nor starves the others."""
    log: list[tuple[str, Key]] = []
    runner = RecordingRunner()
    busy, quiet = Counting("busy", log, cost=0.001), Counting("quiet", log)
    runner.add(busy)
    runner.add(quiet)
    for n in range(200):
        runner.enqueue(busy, n)
    runner.enqueue(quiet, "q")
    assert runner.drain_slice(0.005) is True
    # a batch costs more than the budget: the slice ends after it (how long it ran past the budget
    # is benchmarks/timings.py's runner_slice_overrun_worst)
    assert len(log) == SLICE_KEYS
    slices = 1
    while runner.drain_slice(0.005):
        slices += 1
    assert log[SLICE_KEYS] == ("quiet", "q")  # the next slice opened with the other controller
    assert [k for name, k in log if name == "busy"] == list(range(200))
    assert slices > 1
    assert runner.drain_slice(0.005) is False
