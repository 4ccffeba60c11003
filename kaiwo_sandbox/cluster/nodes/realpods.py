"""A pod whose containers run as real processes (`--local-image`): the same timeline the kubelet
renders for simulated pods (`podsim.PodTimeline`), advanced by what the processes do instead of by a
plan. Init containers run one by one, then every main container; an exit is seen on the next
relist; restartPolicy and CrashLoopBackOff apply; probes decide readiness and kill unhealthy
containers; deletion sends SIGTERM, then SIGKILL after the grace period.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from kaiwo_sandbox.cluster.nodes.podsim import (
    KILLED_EXIT_CODE,
    ContainerRun,
    PodPlan,
    PodTimeline,
    Termination,
    restart_backoff,
    tell_once,
)
from kaiwo_sandbox.contracts import JsonObj
from kaiwo_sandbox.runtime.podspec import ContainerConfigError
from kaiwo_sandbox.runtime.probes import Prober, ProbeState
from kaiwo_sandbox.runtime.processes import ContainerProcess, LocalPod, LocalRuntime

RELIST_SECONDS = 0.5  # how often a running real pod is looked at (the kubelet's PLEG relists every 1 s)
PROBE_KINDS = (("readinessProbe", "readiness"), ("livenessProbe", "liveness"), ("startupProbe", "startup"))

Starter = Callable[[JsonObj], ContainerProcess]  # container spec -> its process; ContainerConfigError


def _exec_in(runtime: LocalRuntime, uid: str, container: str,
             argv: list[str]) -> tuple[list[str], dict[str, str], str] | None:
    return runtime.exec_command(uid, container, argv)


def _termination(started: float, finished: float, exit_code: int) -> Termination:
    return Termination(started, finished, exit_code, "Completed" if exit_code == 0 else "Error")


@dataclass(slots=True)
class RealPodTimeline(PodTimeline):
    specs: dict[str, JsonObj] = field(default_factory=dict)
    local: LocalPod | None = None
    runtime: LocalRuntime | None = None
    prober: Prober | None = None
    starter: Starter | None = None
    grace: float = 30.0
    init_failed: bool = False
    probes: dict[str, list[ProbeState]] = field(default_factory=dict)
    config_errors: dict[str, str] = field(default_factory=dict)  # container -> last reported error

    @classmethod
    def for_pod(cls, plan: PodPlan, pod: JsonObj, local: LocalPod, runtime: LocalRuntime, prober: Prober,
                starter: Starter) -> RealPodTimeline:
        spec = pod.get("spec") or {}
        specs = {str(c.get("name", "")): c for c in [*(spec.get("initContainers") or []),
                                                        *(spec.get("containers") or [])]}
        grace = spec.get("terminationGracePeriodSeconds")
        initial = "PodInitializing" if plan.init_containers else "ContainerCreating"
        return cls(plan=plan, init=[ContainerRun(p, waiting_reason="PodInitializing") for p in plan.init_containers],
                   main=[ContainerRun(p, waiting_reason=initial) for p in plan.containers], specs=specs, local=local,
                   runtime=runtime, prober=prober, starter=starter,
                   grace=float(grace) if isinstance(grace, (int, float)) else 30.0)

    # -- queries -----------------------------------------------------------------------------------
    def phase(self) -> str:
        if self.init_failed:
            return "Failed"
        return PodTimeline.phase(self)

    def next_transition(self) -> float | None:
        return None if self.terminal() else self.clock + RELIST_SECONDS

    def process(self, name: str) -> ContainerProcess | None:
        return self.local.processes.get(name) if self.local else None

    # -- transitions -------------------------------------------------------------------------------
    def advance(self, now: float) -> None:
        self.clock = max(self.clock, now)
        if self.killed_at is not None or self.terminal():
            return
        if self.sandbox_ready_at is None:
            self.sandbox_ready_at = now
        if not self.initialized():
            self._advance_init(now)
            if not self.initialized():
                return
        for run in self.main:
            self._advance_container(run, now, init=False)
        for run in self.main:
            if run.state == "running":
                self._advance_probes(run, now)

    def _advance_init(self, now: float) -> None:
        for run in self.init:
            if run.state == "terminated" and run.terminated is not None and run.terminated.exit_code == 0 \
                    and run.restart_at is None:
                continue
            self._advance_container(run, now, init=True)
            return  # one init container at a time

    def _advance_container(self, run: ContainerRun, now: float, *, init: bool) -> None:
        if run.state == "running":
            process = self.process(run.plan.name)
            code = process.poll() if process is not None else KILLED_EXIT_CODE
            if code is None:
                return
            started = run.started_at if run.started_at is not None else now
            run.state = "terminated"
            run.terminated = _termination(started, now, code)
            run.ready_at = None
            if init and code == 0:
                return
            if self._restarts(run):
                run.restart_at = now + restart_backoff(run.restart_count)
                run.waiting_reason = "CrashLoopBackOff"
                self.events.append(("Warning", "BackOff", run.plan.name))
            elif init:
                self.init_failed = True
            return
        if run.state == "waiting" and run.started_at is None and run.restart_at is None:
            self._start(run, now)
        elif run.state == "waiting" and run.restart_at is not None and run.restart_at <= now:
            self._start(run, now)  # a start that failed on its configuration, retried
        elif run.state == "terminated" and run.restart_at is not None and run.restart_at <= now:
            run.last_terminated = run.terminated
            run.restart_count += 1
            self._start(run, now)

    def _restarts(self, run: ContainerRun) -> bool:
        if self.plan.restart_policy == "Always":
            return True
        code = run.terminated.exit_code if run.terminated is not None else 0
        return self.plan.restart_policy == "OnFailure" and code != 0

    def _start(self, run: ContainerRun, at: float) -> None:
        spec = self.specs.get(run.plan.name) or {}
        assert self.starter is not None
        try:
            self.starter(spec)
        except ContainerConfigError as err:
            message = str(err)
            run.refused(message, at + 1.0)  # the kubelet retries on its next sync
            tell_once(self.config_errors, self.events, run.plan.name, message)
            return
        self.config_errors.pop(run.plan.name, None)
        probes = [ProbeState(kind, spec[key], at) for key, kind in PROBE_KINDS if spec.get(key)]
        self.probes[run.plan.name] = probes
        run.started(at, None if any(p.kind == "readiness" for p in probes) else at)
        self.events.append(("Normal", "Started", run.plan.name))

    def _advance_probes(self, run: ContainerRun, now: float) -> None:
        name = run.plan.name
        process = self.process(name)
        if process is None or self.prober is None or self.local is None or self.runtime is None:
            return
        spec = self.specs.get(name) or {}
        runtime, uid = self.runtime, self.local.uid
        for probe in self.probes.get(name) or []:
            if probe.in_flight is not None and probe.in_flight.done():
                flipped = probe.record(probe.in_flight.result())
                probe.in_flight = None
                for message in probe.reports:
                    self.events.append(("Warning", "Unhealthy", name,
                                        f"{probe.kind.capitalize()} probe failed: {message}"))
                probe.reports.clear()
                if probe.kind == "readiness":
                    run.ready_at = now if probe.passed else None
                elif flipped and not probe.passed and not process.stop_requested:
                    self.events.append(("Normal", "Killing", name,
                                        f"Container {name} failed {probe.kind} probe, will be restarted"))
                    runtime.stop_container(process, self.grace)
            if probe.in_flight is None and now >= probe.next_due:
                probe.next_due = now + probe.period
                probe.in_flight = self.prober.submit(probe.spec, self.local.ip, spec,
                                                     partial(_exec_in, runtime, uid, name))

    def kill(self, at: float) -> None:
        """The pod is being deleted: SIGTERM every container, SIGKILL after the grace period."""
        if self.killed_at is not None or self.terminal():
            return
        self.killed_at = at
        for run in [*self.init, *self.main]:
            process = self.process(run.plan.name)
            if run.state == "running" and process is not None and self.runtime is not None:
                self.runtime.stop_container(process, self.grace)
                started = run.started_at if run.started_at is not None else at
                run.terminated = _termination(started, at, KILLED_EXIT_CODE)
                self.events.append(("Normal", "Killing", run.plan.name))
            elif run.terminated is None:
                run.terminated = Termination(at, at, KILLED_EXIT_CODE, "ContainerStatusUnknown")
            run.state = "terminated"
            run.restart_at = None
