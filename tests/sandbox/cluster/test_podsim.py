"""What simulated containers do (pure): command interpretation, annotations, pod timelines."""

from __future__ import annotations

import pytest

from kaiwo_sandbox.cluster.nodes.podsim import (
    EXIT_CODE,
    READY_SECONDS,
    RUN_SECONDS,
    START_SECONDS,
    PodTimeline,
    command_behaviour,
    plan_pod,
)
from kaiwo_sandbox.contracts import JsonObj


def container(command: list[str] | None = None, args: list[str] | None = None, name: str = "main") -> JsonObj:
    out: JsonObj = {"name": name, "image": "busybox"}
    if command is not None:
        out["command"] = command
    if args is not None:
        out["args"] = args
    return out


@pytest.mark.parametrize(("command", "args", "seconds"), [
    (["sleep", "2"], None, 2.0),
    (["sleep", "1.5m"], None, 90.0),
    (["/bin/sh", "-c", "echo hi\nsleep 5\n"], None, 5.0),
    (["/bin/sh", "-c"], ["echo start; sleep 3 # wait a bit"], 3.0),
    (["bash", "-lc", "python train.py && sleep 7"], None, 7.0),
    (["sleep", "infinity"], None, None),
    (["/bin/sh", "-c", "while true; do echo x; sleep 1; done"], None, None),
    (["tail", "-f", "/dev/null"], None, None),
    (["/bin/sh", "-c", "ray start --head --block"], None, None),
    # KubeRay's own form: `--` ends bash's options and the script comes in args
    (["/bin/bash", "-lc", "--"], ["ulimit -n 65536; ray start --head --dashboard-host=0.0.0.0 --block"], None),
    (["/bin/bash", "-lc", "--"], ["sleep 30"], 30.0),
])
def test_commands_with_a_known_duration(command: list[str], args: list[str] | None, seconds: float | None) -> None:
    behaviour = command_behaviour(container(command, args))
    assert behaviour.known
    assert behaviour.run_seconds == seconds
    assert behaviour.exit_code == 0


def test_script_ending_in_exit_code_fails_after_its_sleeps() -> None:
    behaviour = command_behaviour(container(["/bin/sh", "-c", "sleep 2\necho boom\nexit 3"]))
    assert (behaviour.run_seconds, behaviour.exit_code) == (2.0, 3)


def test_unknown_command_and_no_command_are_not_known() -> None:
    assert not command_behaviour(container(["python", "train.py"])).known
    assert not command_behaviour(container()).known


def pod(containers: list[JsonObj], *, policy: str = "Never", annotations: dict[str, str] | None = None,
        init: list[JsonObj] | None = None) -> JsonObj:
    spec: JsonObj = {"restartPolicy": policy, "containers": containers}
    if init:
        spec["initContainers"] = init
    return {"metadata": {"name": "p", "annotations": annotations or {}}, "spec": spec}


def test_defaults_for_unknown_commands_entrypoints_and_services() -> None:
    batch = plan_pod(pod([container(["python", "x.py"], name="a"), container(name="b")]), 15.0, 0.5)
    assert [c.run_seconds for c in batch.containers] == [15.0, 0.0]
    service = plan_pod(pod([container(["python", "serve.py"], name="a"), container(name="b")], policy="Always"),
                       15.0, 0.5)
    assert [c.run_seconds for c in service.containers] == [None, None]
    assert service.start_seconds == 0.5


def test_annotations_override_commands() -> None:
    plan = plan_pod(pod([container(["sleep", "100"])], annotations={
        RUN_SECONDS: "4", EXIT_CODE: "2", START_SECONDS: "1", READY_SECONDS: "3"}), 15.0, 0.5)
    assert (plan.containers[0].run_seconds, plan.containers[0].exit_code) == (4.0, 2)
    assert (plan.start_seconds, plan.ready_seconds) == (1.0, 3.0)
    forever = plan_pod(pod([container(["sleep", "1"])], annotations={RUN_SECONDS: "forever"}), 15.0, 0.5)
    assert forever.containers[0].run_seconds is None


def test_malformed_annotations_are_ignored() -> None:
    plan = plan_pod(pod([container(["sleep", "2"])], annotations={RUN_SECONDS: "soon", EXIT_CODE: "bad",
                                                                 START_SECONDS: "-1"}), 15.0, 0.5)
    assert (plan.containers[0].run_seconds, plan.containers[0].exit_code, plan.start_seconds) == (2.0, 0, 0.5)


def test_readiness_probe_delay_is_the_default_ready_time() -> None:
    spec = container(["sleep", "9"])
    spec["readinessProbe"] = {"initialDelaySeconds": 4}
    assert plan_pod(pod([spec]), 15.0, 0.5).ready_seconds == 4.0


def test_timeline_runs_init_then_main_and_succeeds() -> None:
    plan = plan_pod(pod([container(["sleep", "2"])], init=[container(["sleep", "1"], name="init")]), 15.0, 0.5)
    timeline = PodTimeline.start(plan)
    assert timeline.phase() == "Pending"
    assert timeline.next_transition() == 0.5
    timeline.advance(1.0)
    assert timeline.init[0].state == "running" and timeline.phase() == "Pending"
    timeline.advance(1.6)
    assert timeline.initialized() and timeline.phase() == "Running"
    assert timeline.main[0].started_at == 1.5
    timeline.advance(10)
    assert timeline.phase() == "Succeeded"
    assert timeline.main[0].terminated is not None
    assert (timeline.main[0].terminated.exit_code, timeline.main[0].terminated.reason) == (0, "Completed")
    assert timeline.next_transition() is None


def test_timeline_fails_with_the_exit_code() -> None:
    timeline = PodTimeline.start(plan_pod(pod([container(["sleep", "1"])], annotations={EXIT_CODE: "1"}), 15, 0))
    timeline.advance(5)
    assert timeline.phase() == "Failed"
    assert timeline.main[0].terminated is not None and timeline.main[0].terminated.reason == "Error"


def test_restart_policy_always_restarts_with_backoff() -> None:
    timeline = PodTimeline.start(plan_pod(pod([container(["sleep", "1"])], policy="Always"), 15, 0))
    timeline.advance(1.0)
    assert timeline.main[0].restart_at == 11.0  # 10 s CrashLoopBackOff
    timeline.advance(11.0)
    assert (timeline.main[0].state, timeline.main[0].restart_count) == ("running", 1)
    assert timeline.phase() == "Running"


def test_on_failure_restarts_only_failed_containers() -> None:
    ok = PodTimeline.start(plan_pod(pod([container(["sleep", "1"])], policy="OnFailure"), 15, 0))
    ok.advance(2)
    assert ok.phase() == "Succeeded"
    bad = PodTimeline.start(plan_pod(pod([container(["sleep", "1"])], policy="OnFailure",
                                         annotations={EXIT_CODE: "1"}), 15, 0))
    bad.advance(12)
    assert bad.phase() == "Running" and bad.main[0].restart_count == 1


def test_readiness_is_a_wake_up_time() -> None:
    timeline = PodTimeline.start(plan_pod(pod([container(["sleep", "infinity"])],
                                              annotations={READY_SECONDS: "2"}), 15, 0.5))
    timeline.advance(0.5)
    assert not timeline.main[0].ready(0.5)
    assert timeline.next_transition() == 2.5
    timeline.advance(2.5)
    assert timeline.main[0].ready(2.5)
    assert timeline.next_transition() is None


def test_killing_a_pod_terminates_running_containers_with_137() -> None:
    timeline = PodTimeline.start(plan_pod(pod([container(["sleep", "infinity"])]), 15, 0))
    timeline.advance(3)
    timeline.kill(3)
    assert timeline.phase() == "Failed"
    assert timeline.main[0].terminated is not None and timeline.main[0].terminated.exit_code == 137
