"""What a simulated container does, decided from the pod alone, and the timeline a pod follows.

No process ever runs: a `PodPlan` says how long each container runs and how it exits (from the
`sandbox.kaiwo-ray.dev/*` annotations, else from its command), and a `PodTimeline` advances a
pod's containers through that plan in simulated seconds since the pod was bound. Both are pure:
the kubelet owns the clock and the store.
"""

from __future__ import annotations

import contextlib
import math
import re
import shlex
from dataclasses import dataclass, field
from typing import Literal

from kaiwo_sandbox.contracts import JsonObj

ANNOTATION_PREFIX = "sandbox.kaiwo-ray.dev/"
RUN_SECONDS = ANNOTATION_PREFIX + "run-seconds"
EXIT_CODE = ANNOTATION_PREFIX + "exit-code"
START_SECONDS = ANNOTATION_PREFIX + "start-seconds"
READY_SECONDS = ANNOTATION_PREFIX + "ready-seconds"
GPU_UTILIZATION = ANNOTATION_PREFIX + "gpu-utilization"

KILLED_EXIT_CODE = 137  # SIGKILL after the grace period: what a deleted pod's containers report
RESTART_BACKOFF_SECONDS = 10.0  # kubelet's CrashLoopBackOff starts at 10 s and doubles...
RESTART_BACKOFF_MAX_SECONDS = 300.0  # ...up to five minutes
SHELLS = frozenset({"sh", "bash", "ash", "dash", "zsh", "ksh"})
FOREVER_WORDS = frozenset({"inf", "infinity", "forever"})

_SLEEP = re.compile(r"^sleep\s+([0-9]*\.?[0-9]+)([smhd]?)$")
_EXIT = re.compile(r"^exit\s+(-?[0-9]+)$")
_FOREVER = re.compile(
    r"\bwhile\s+(true|:|\[\s*1\s*\]|\[\[\s*1\s*\]\])\s*;?\s*do\b|\btail\s+-f\b|\bsleep\s+infinity\b"
    r"|\bray\s+start\b.*--block\b")
_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


@dataclass(frozen=True, slots=True)
class ContainerPlan:
    name: str
    image: str
    run_seconds: float | None  # None: runs until the pod is deleted
    exit_code: int


@dataclass(frozen=True, slots=True)
class PodPlan:
    init_containers: tuple[ContainerPlan, ...]
    containers: tuple[ContainerPlan, ...]
    start_seconds: float  # bound -> first container starts (sandbox, image, create)
    ready_seconds: float  # container started -> ready
    restart_policy: str


@dataclass(frozen=True, slots=True)
class CommandBehaviour:
    run_seconds: float | None
    exit_code: int = 0
    known: bool = True  # False: nothing recognisable, the caller applies its default


def _float_annotation(annotations: dict[str, str], key: str) -> float | Literal["forever"] | None:
    raw = annotations.get(key)
    if raw is None:
        return None
    text = str(raw).strip().lower()
    if text in FOREVER_WORDS:
        return "forever"
    try:
        value = float(text)
    except ValueError:
        return None  # documented: malformed annotations are ignored
    if math.isnan(value) or value < 0:
        return None
    return "forever" if math.isinf(value) else value


def _statements(script: str) -> list[str]:
    """Split a shell script into simple statements, dropping comments and blank lines."""
    statements: list[str] = []
    for line in script.splitlines():
        line = line.split("#", 1)[0] if not line.lstrip().startswith("#!") else ""
        for part in re.split(r";|&&|\|\|", line):
            part = part.strip()
            if part and part not in ("do", "done", "then", "fi", "else"):
                statements.append(part)
    return statements


def _sleep_seconds(statement: str) -> float | None:
    match = _SLEEP.match(statement)
    if not match:
        return None
    return float(match.group(1)) * _UNITS[match.group(2)]


def script_behaviour(script: str) -> CommandBehaviour:
    """Endless loops run forever; a script ending in `sleep N` runs N seconds; one ending in
    `exit N` exits N after its sleeps; anything else is unknown (the caller's default)."""
    if _FOREVER.search(script):
        return CommandBehaviour(None)
    statements = _statements(script)
    if not statements:
        return CommandBehaviour(0.0)
    last = statements[-1]
    seconds = _sleep_seconds(last)
    if seconds is not None:
        return CommandBehaviour(seconds)
    exited = _EXIT.match(last)
    if exited:
        slept = sum(s for s in (_sleep_seconds(st) for st in statements) if s is not None)
        return CommandBehaviour(slept, int(exited.group(1)) % 256)
    if last in ("true", ":"):
        return CommandBehaviour(sum(s for s in (_sleep_seconds(st) for st in statements) if s is not None))
    if last == "false":
        return CommandBehaviour(0.0, 1)
    return CommandBehaviour(None, 0, known=False)


def command_behaviour(container: JsonObj) -> CommandBehaviour:
    """Interpret `command` + `args`: a shell `-c` script, a bare `sleep N`, or no command at all
    (the image entrypoint: reported as finishing at once)."""
    argv = [str(a) for a in (container.get("command") or [])] + [str(a) for a in (container.get("args") or [])]
    if not argv:
        return CommandBehaviour(0.0, known=False)
    program = argv[0].rsplit("/", 1)[-1]
    if program in SHELLS:
        for index, arg in enumerate(argv[1:], start=1):
            if arg.startswith("-") and "c" in arg[1:] and index + 1 < len(argv):
                # `bash -lc -- SCRIPT` (how KubeRay starts Ray pods): `--` ends the options
                script_at = index + 2 if argv[index + 1] == "--" else index + 1
                if script_at < len(argv):
                    return script_behaviour(argv[script_at])
        return CommandBehaviour(None, 0, known=False)
    return script_behaviour(shlex.join(argv) if program != "sleep" else " ".join(argv))


def plan_container(container: JsonObj, annotations: dict[str, str], restart_policy: str,
                   default_run_seconds: float, *, init: bool) -> ContainerPlan:
    name = str(container.get("name", ""))
    image = str(container.get("image", ""))
    behaviour = command_behaviour(container)
    exit_code = behaviour.exit_code
    if init:
        # Init containers run first and quickly: only an explicit sleep makes them take time.
        return ContainerPlan(name, image, behaviour.run_seconds if behaviour.known else 0.0, exit_code)
    run = _float_annotation(annotations, RUN_SECONDS)
    seconds: float | None
    if run == "forever":
        seconds = None
    elif run is not None:
        seconds = run
    elif behaviour.known and not (restart_policy == "Always" and not container.get("command")
                                  and not container.get("args")):
        seconds = behaviour.run_seconds
    elif restart_policy == "Always":
        seconds = None  # a long-running service: the image's entrypoint never ends on its own
    elif not container.get("command") and not container.get("args"):
        seconds = 0.0  # image entrypoint of a batch pod: treated as finishing at once
    else:
        seconds = default_run_seconds
    raw_exit = annotations.get(EXIT_CODE)
    if raw_exit is not None:
        with contextlib.suppress(ValueError):  # documented: malformed annotations are ignored
            exit_code = int(str(raw_exit).strip()) % 256
    return ContainerPlan(name, image, seconds, exit_code)


def plan_pod(pod: JsonObj, default_run_seconds: float, default_start_seconds: float) -> PodPlan:
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    annotations = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
    policy = str(spec.get("restartPolicy") or "Always")
    start = _float_annotation(annotations, START_SECONDS)
    ready = _float_annotation(annotations, READY_SECONDS)
    ready_seconds = ready if isinstance(ready, float) else 0.0
    if ready is None:
        # Without the annotation a readiness probe's initial delay decides when the pod turns Ready.
        probes = [c.get("readinessProbe") or {} for c in spec.get("containers") or []]
        ready_seconds = max([float(p.get("initialDelaySeconds") or 0) for p in probes] or [0.0])
    return PodPlan(
        init_containers=tuple(plan_container(c, annotations, policy, default_run_seconds, init=True)
                              for c in spec.get("initContainers") or []),
        containers=tuple(plan_container(c, annotations, policy, default_run_seconds, init=False)
                         for c in spec.get("containers") or []),
        start_seconds=start if isinstance(start, float) else default_start_seconds,
        ready_seconds=ready_seconds,
        restart_policy=policy,
    )


# --------------------------------------------------------------------------------------------
# Timeline

State = Literal["waiting", "running", "terminated"]


@dataclass(slots=True)
class Termination:
    started_at: float
    finished_at: float
    exit_code: int
    reason: str


@dataclass(slots=True)
class ContainerRun:
    """One container's simulated state. Times are simulated seconds since the pod was bound."""

    plan: ContainerPlan
    state: State = "waiting"
    waiting_reason: str = "ContainerCreating"
    waiting_message: str = ""  # the kubelet's message beside the reason (a real pod's config error)
    started_at: float | None = None
    ready_at: float | None = None
    terminated: Termination | None = None
    last_terminated: Termination | None = None
    restart_count: int = 0
    restart_at: float | None = None

    def ready(self, now: float) -> bool:
        return self.state == "running" and self.ready_at is not None and now >= self.ready_at

    def started(self, at: float, ready_at: float | None) -> None:
        """The container runs from `at` (ready from `ready_at`; None: not until a probe says so)."""
        self.state = "running"
        self.started_at = at
        self.ready_at = ready_at
        self.terminated = None
        self.restart_at = None
        self.waiting_reason = ""
        self.waiting_message = ""

    def refused(self, message: str, retry_at: float | None) -> None:
        """The container cannot be created (a missing Secret or ConfigMap, say): it waits, with the
        kubelet's reason and message, until `retry_at` (None: until something unblocks it)."""
        self.state = "waiting"
        self.restart_at = retry_at
        self.waiting_reason = "CreateContainerConfigError"
        self.waiting_message = message


def tell_once(told: dict[str, str], events: list[tuple[str, ...]], container: str, message: str) -> None:
    """A Failed event for `container`'s config error, once per distinct message (the kubelet's
    retries repeat it; the event would repeat too, every sync)."""
    if told.get(container) != message:
        told[container] = message
        events.append(("Warning", "Failed", container, f"Error: {message}"))


def restart_backoff(restart_count: int) -> float:
    """CrashLoopBackOff before restart number `restart_count + 1`: 10 s doubling, at most 5 min."""
    return float(min(RESTART_BACKOFF_SECONDS * 2 ** restart_count, RESTART_BACKOFF_MAX_SECONDS))


def _termination(started: float, finished: float, exit_code: int) -> Termination:
    return Termination(started, finished, exit_code, "Completed" if exit_code == 0 else "Error")


@dataclass(slots=True)
class PodTimeline:
    """Advances a pod through its plan: init containers one by one, then all main containers,
    restarts per restartPolicy (with CrashLoopBackOff delays), until the pod is terminal."""

    plan: PodPlan
    init: list[ContainerRun] = field(default_factory=list)
    main: list[ContainerRun] = field(default_factory=list)
    sandbox_ready_at: float | None = None
    killed_at: float | None = None
    clock: float = 0.0  # how far the timeline has been advanced
    events: list[tuple[str, ...]] = field(default_factory=list)  # (type, reason, container[, message])
    # container -> why its config cannot be built (a Secret, ConfigMap or key its env names is missing):
    # set by the kubelet before each advance; such a container waits in CreateContainerConfigError.
    blocked: dict[str, str] = field(default_factory=dict)
    _told: dict[str, str] = field(default_factory=dict)  # the config error last reported per container

    @classmethod
    def start(cls, plan: PodPlan) -> PodTimeline:
        initial_reason = "PodInitializing" if plan.init_containers else "ContainerCreating"
        return cls(
            plan=plan,
            init=[ContainerRun(p, waiting_reason="PodInitializing") for p in plan.init_containers],
            main=[ContainerRun(p, waiting_reason=initial_reason) for p in plan.containers],
        )

    # -- queries -------------------------------------------------------------------------------
    def initialized(self) -> bool:
        return all(run.state == "terminated" and run.terminated is not None and run.terminated.exit_code == 0
                   for run in self.init)

    def phase(self) -> str:
        if self.killed_at is not None or self._all_done():
            ok = all(run.terminated is not None and run.terminated.exit_code == 0 for run in self.main)
            return "Succeeded" if ok and self.main else "Failed"
        if self.initialized() and any(run.started_at is not None for run in self.main):
            return "Running"
        return "Pending"

    def terminal(self) -> bool:
        return self.phase() in ("Succeeded", "Failed")

    def _all_done(self) -> bool:
        return bool(self.main) and all(run.state == "terminated" and run.restart_at is None for run in self.main)

    def _next_step(self) -> float | None:
        """Simulated time of the next state change (start, exit, restart), or None."""
        if self.terminal():
            return None
        if self.sandbox_ready_at is None:
            return self.plan.start_seconds
        candidates: list[float] = []
        for run in self.main if self.initialized() else self.init:
            if run.state == "running" and run.started_at is not None and run.plan.run_seconds is not None:
                candidates.append(run.started_at + run.plan.run_seconds)
            elif run.restart_at is not None:
                candidates.append(run.restart_at)
        return min(candidates) if candidates else None

    def next_transition(self) -> float | None:
        """When the pod's status next changes (including a container turning ready), or None."""
        step = self._next_step()
        readiness = [run.ready_at for run in self.main
                     if run.state == "running" and run.ready_at is not None and run.ready_at > self.clock]
        candidates = [t for t in (step, *readiness) if t is not None]
        return min(candidates) if candidates else None

    # -- transitions ---------------------------------------------------------------------------
    def advance(self, now: float) -> None:
        """Apply every transition due at or before `now` (simulated seconds since binding)."""
        for _ in range(10_000):  # bounded even for a pod restarting in a tight loop
            due = self._next_step()
            if due is None or due > now:
                break
            self._step(max(due, self.clock))
        self.clock = max(self.clock, now)

    def _start(self, run: ContainerRun, at: float) -> None:
        message = self.blocked.get(run.plan.name)
        if message is not None:
            run.refused(message, None)
            tell_once(self._told, self.events, run.plan.name, message)
            return
        self._told.pop(run.plan.name, None)
        run.started(at, at + self.plan.ready_seconds)
        self.events.append(("Normal", "Started", run.plan.name))

    def _step(self, at: float) -> None:
        self.clock = at
        if self.sandbox_ready_at is None:
            self.sandbox_ready_at = at
            for run in self.init[:1] if self.init else self.main:
                self._start(run, at)
            return
        if not self.initialized():
            for index, run in enumerate(self.init):
                if run.state == "running" and run.started_at is not None and run.plan.run_seconds is not None \
                        and run.started_at + run.plan.run_seconds <= at:
                    run.state = "terminated"
                    run.terminated = _termination(run.started_at, at, 0)
                    for following in self.init[index + 1:index + 2] if index + 1 < len(self.init) else self.main:
                        self._start(following, at)
                    return
            return
        for run in self.main:
            if run.state == "running" and run.started_at is not None and run.plan.run_seconds is not None \
                    and run.started_at + run.plan.run_seconds <= at:
                run.state = "terminated"
                run.terminated = _termination(run.started_at, at, run.plan.exit_code)
                if self._restarts(run):
                    run.restart_at = at + restart_backoff(run.restart_count)
                    run.waiting_reason = "CrashLoopBackOff"
                    self.events.append(("Warning", "BackOff", run.plan.name))
                return
            if run.state == "terminated" and run.restart_at is not None and run.restart_at <= at:
                run.last_terminated = run.terminated
                run.restart_count += 1
                self._start(run, at)
                return

    def unblock(self, at: float) -> None:
        """Start each container waiting in CreateContainerConfigError whose config can now be built
        (the kubelet retries it on the pod's next sync); one still blocked keeps waiting."""
        if self.killed_at is not None or self.terminal():
            return
        for run in [*self.init, *self.main]:
            if run.state == "waiting" and run.waiting_reason == "CreateContainerConfigError":
                self._start(run, max(at, self.clock))

    def _restarts(self, run: ContainerRun) -> bool:
        if self.plan.restart_policy == "Always":
            return True
        return self.plan.restart_policy == "OnFailure" and run.plan.exit_code != 0

    def kill(self, at: float) -> None:
        """The pod was deleted: stop everything; containers that did not finish report 137."""
        if self.killed_at is not None or self.terminal():
            return  # already stopped: a finished pod keeps the phase it finished with
        self.killed_at = at
        for run in [*self.init, *self.main]:
            if run.state == "running" and run.started_at is not None:
                run.terminated = _termination(run.started_at, at, KILLED_EXIT_CODE)
                self.events.append(("Normal", "Killing", run.plan.name))
            elif run.state == "waiting" or run.restart_at is not None:
                started = run.started_at if run.started_at is not None else at
                if run.terminated is None:
                    run.terminated = _termination(started, at, KILLED_EXIT_CODE)
                    run.terminated.reason = "ContainerStatusUnknown"
            run.state = "terminated"
            run.restart_at = None
