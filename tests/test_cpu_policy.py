"""hosts.runtime.cpu_policy: the controller's thread in SCHED_BATCH, and only that thread.

Each case runs in a thread of its own, because the policy is per thread and inherited: set on
pytest's thread, it would stay for the rest of the session."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from collections.abc import Callable
from typing import TypeVar

import pytest

from hosts.runtime.controller_host import ControllerHost
from hosts.runtime.cpu_policy import BATCH_VARIABLE, batch_wanted, is_batch, run_as_batch
from kaiwo_ray.controllers.manager import HostSettings
from kaiwo_sandbox.testing import RunningSandbox

T = TypeVar("T")

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SCHED_BATCH is Linux's")


def in_thread(work: Callable[[], T]) -> T:
    results: list[T] = []
    thread = threading.Thread(target=lambda: results.append(work()))
    thread.start()
    thread.join(60)
    assert results, "the thread did not finish"
    return results[0]


def test_the_calling_thread_and_the_threads_it_starts_run_batch_and_no_other() -> None:
    def work() -> tuple[bool, bool, bool]:
        before = is_batch()
        assert run_as_batch()
        started_after = in_thread(is_batch)
        return before, is_batch(), started_after

    before, after, started_after = in_thread(work)
    assert (before, after, started_after) == (False, True, True)
    assert not is_batch() and os.sched_getscheduler(0) == os.SCHED_OTHER  # this thread kept its class


def test_a_host_with_batch_scheduling_runs_its_controller_batch_and_one_without_does_not(
        sandbox: RunningSandbox) -> None:
    def host_thread(batch: bool) -> tuple[bool, bool]:
        async def scenario() -> tuple[bool, bool]:
            settings = HostSettings(kubeconfig=str(sandbox.kubeconfig_path), lease=False, batch_scheduling=batch)
            host = ControllerHost("kaiwoconfig", settings)
            await host.start()
            try:
                assert host.controller is not None
                return batch, is_batch()
            finally:
                await host.stop()

        return asyncio.run(scenario())

    assert in_thread(lambda: host_thread(True)) == (True, True)
    assert in_thread(lambda: host_thread(False)) == (False, False)


@pytest.mark.parametrize(("value", "wanted"), [(None, True), ("", True), ("true", True), ("YES", True), ("1", True),
                                               ("false", False), ("No", False), ("0", False)])
def test_batch_is_wanted_unless_the_variable_says_false(value: str | None, wanted: bool) -> None:
    env = {} if value is None else {BATCH_VARIABLE: value}
    assert batch_wanted(env) is wanted


def test_a_wrong_batch_value_names_the_variable() -> None:
    with pytest.raises(ValueError, match="KAIWO_BATCH_SCHEDULING must be true or false, not 'sometimes'"):
        batch_wanted({BATCH_VARIABLE: "sometimes"})
