"""The actor class itself, without Ray: it is a plain class whose methods run on one event loop, so
its life cycle (start from `__init__`, ready, health, idempotent stop, start-up failure) is tested
here directly against the sandbox, in a fraction of a second."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from actors.controller import ACTOR_OPTIONS, ControllerActor
from kaiwo_ray.controllers.manager import HostSettings
from kaiwo_sandbox.testing import RunningSandbox


def test_ray_options_reserve_no_cpu_and_restart_forever() -> None:
    assert ACTOR_OPTIONS["num_cpus"] == 0
    assert ACTOR_OPTIONS["max_restarts"] == -1 and ACTOR_OPTIONS["max_task_retries"] == -1


def test_the_actor_starts_from_init_reports_health_and_stops_idempotently(sandbox: RunningSandbox) -> None:
    settings = HostSettings(kubeconfig=str(sandbox.kubeconfig_path), identity="unit", renew_every=0.5)

    async def scenario() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
        actor = ControllerActor("kaiwoconfig", settings)  # no call yet: __init__ alone starts it
        await asyncio.wait_for(_started(actor), 30)
        ready = await actor.ready(leader_wait=10.0)
        stopped = await actor.stop(grace_seconds=2.0)
        again = await actor.stop(grace_seconds=2.0)
        after = await actor.ready()
        return ready, stopped, again, after

    ready, stopped, again, after = asyncio.run(scenario())
    assert ready["name"] == "kaiwoconfig" and ready["identity"] == "unit"
    assert ready["started"] and ready["alive"] and ready["synced"] and ready["leader"]
    assert ready["rss_bytes"] > 1 << 20 and ready["pid"] > 0 and "error" not in ready
    assert ready["batch_scheduling"] is False  # not asked for: this test's own thread keeps its class
    assert stopped["error"] == "stopped" and not stopped["leader"]
    assert again["error"] == "stopped" and after["error"] == "stopped"


async def _started(actor: ControllerActor) -> None:
    while not (await actor.health()).get("started"):
        await asyncio.sleep(0.05)  # polling period, bounded by the caller's wait_for


def test_a_start_up_failure_is_raised_by_ready_and_reported_by_health(tmp_path: Path) -> None:
    settings = HostSettings(kubeconfig=str(tmp_path / "missing-kubeconfig"), identity="unit")

    async def scenario() -> tuple[BaseException | None, dict[str, Any], dict[str, Any]]:
        actor = ControllerActor("kaiwojob", settings)
        raised: BaseException | None = None
        try:
            await actor.ready()
        except Exception as err:
            raised = err
        health = await actor.health()
        stopped = await actor.stop(grace_seconds=0.5)
        return raised, health, stopped

    raised, health, stopped = asyncio.run(scenario())
    assert raised is not None
    assert health["started"] is False and health["error"].startswith("start failed: ")
    assert "missing-kubeconfig" in health["error"] or type(raised).__name__ in health["error"]
    assert stopped["alive"]  # stopping a host that never started is harmless
