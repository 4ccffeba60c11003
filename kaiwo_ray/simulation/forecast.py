"""When will a pending workload start (pure): the cluster's KaiwoJobs now, as traces a forward
simulation replays, and how sure that is (docs/simulate.md, "Estimated start times").

A KaiwoJob runs for its `spec.duration` when it declares one; else for a percentile of its user's
(else its queue's) past run times, conditioned on how long it has already run. Three scenarios (the
10th, 50th and 90th percentile run times) give the likely start (the 50th) and a span; that span,
widened by how far the cluster's past estimates missed (conformal calibration, below), is the 80 %
interval `earliest`..`latest`. A scenario that is the same trace as another is simulated once.

A KaiwoService (not Ray) is in the trace too, as a `service`: a running one holds its GPUs until its
`spec.duration` is over when it declares one, else to the forecast's horizon; a pending one is
estimated like a job (its start: all its pods admitted), and then runs for its `spec.duration` or for
ever. A service's past runs are no history (a service is deleted, not finished).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from statistics import NormalDist
from typing import Any, Literal

from pydantic import BaseModel

from kaiwo_ray.api.durations import parse_go_duration
from kaiwo_ray.simulation.shape import kaiwojob_shape, kaiwoservice_shape
from kaiwo_ray.simulation.trace import TraceEntry, TraceWorkload

DEFAULT_RUN_SECONDS = 3600.0
"""The run time assumed for a workload without `spec.duration` whose user and queue have no history."""
QUANTILES: tuple[float, float, float] = (0.1, 0.5, 0.9)
MIN_HISTORY = 5
"""Past runs of a user (else a queue) needed before their percentiles stand for its run times."""
PRIOR_SIGMA = 1.0
"""Shape of the log-normal run time assumed with fewer than `MIN_HISTORY` past runs (a factor of
e^1.28 = 3.6 either way between its median and its 10th/90th percentiles)."""
RUNNING = frozenset({"STARTING", "RUNNING", "READY"})
PENDING = frozenset({"", "DOWNLOADING", "PENDING"})
Basis = Literal["declared", "user", "queue", "few", "default"]
SizeClass = Literal["small", "medium", "large"]
SIZE_CLASSES: tuple[SizeClass, ...] = ("small", "medium", "large")
ASSUMED_NODE_GPUS = 8
"""A node's GPUs where the forecast knows no GPU node."""


@dataclass(frozen=True, slots=True)
class Job:
    """What the forecast knows of one KaiwoJob."""

    namespace: str
    name: str
    user: str
    queue: str
    priority: str | None
    gpus: int
    gpu_vendor: Literal["amd", "nvidia"]
    cpu: str
    memory: str
    created: datetime
    started: datetime | None
    declared: float | None  # spec.duration in seconds
    kind: Literal["job", "rayjob", "service"] = "job"
    replicas: int = 1  # pods of a job or service, GPU workers of a rayjob; `gpus`, `cpu`, `memory` each pod's

    @property
    def total_gpus(self) -> int:
        return self.gpus * self.replicas


def size_class(gpus: int, node_gpus: int) -> SizeClass:
    """A workload's size relative to the cluster's largest GPU node: at most a quarter of it "small",
    at most half "medium", more "large". Estimates are calibrated per size (below): a large job waits
    for a whole node to drain while smaller later arrivals go first, so its misses are larger."""
    node = node_gpus if node_gpus > 0 else ASSUMED_NODE_GPUS
    if 4 * gpus <= node:
        return "small"
    return "medium" if 2 * gpus <= node else "large"


@dataclass(frozen=True, slots=True)
class ClusterState:
    running: list[Job]
    pending: list[Job]  # in the order they were submitted
    history: list[tuple[str, str, float]]  # (user, queue, run seconds) of finished KaiwoJobs


class Estimate(BaseModel):
    """A pending workload's estimated start; None where the simulation did not start it before its
    horizon. `start` is the likely one (the scenario with median run times). `span_earliest` and
    `span_latest` span the starts of the three run-time scenarios (10th, 50th, 90th percentile run
    times); `earliest`..`latest` is that span widened by the cluster's past errors for workloads of its
    `size` (`size_class`) into an 80 % interval (`calibrated`)."""

    namespace: str
    name: str
    start: datetime | None
    earliest: datetime | None
    latest: datetime | None
    span_earliest: datetime | None = None
    span_latest: datetime | None = None
    size: SizeClass = "small"


def _time(text: object) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _job(obj: Mapping[str, Any], service: bool = False) -> Job | None:
    """The forecast's view of a KaiwoJob, batch (one pod, or `spec.job`'s pods) or Ray (a head and GPU
    workers), or with `service` of a KaiwoService's Deployment, shaped as `kaiwo_ray.simulation.shape`
    reads it; None without a creation time."""
    spec = obj.get("spec") or {}
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    created = _time(meta.get("creationTimestamp"))
    if created is None:
        return None
    declared: float | None = None
    if isinstance(spec.get("duration"), str):
        try:
            declared = parse_go_duration(spec["duration"]).total_seconds() or None
        except ValueError:
            declared = None
    requests = (spec.get("resources") or {}).get("requests") or {}
    shape = kaiwoservice_shape(spec) if service else kaiwojob_shape(spec)
    vendor: Literal["amd", "nvidia"] = "nvidia" if spec.get("gpuVendor") == "nvidia" else "amd"
    return Job(namespace=str(meta.get("namespace") or "default"), name=str(meta.get("name") or ""),
               user=str(spec.get("user") or "unknown"), queue=str(spec.get("clusterQueue") or "kaiwo"),
               priority=spec.get("priorityClass") or None, gpus=shape.gpus,
               gpu_vendor=vendor, cpu=str(requests.get("cpu") or "1"), memory=str(requests.get("memory") or "1Gi"),
               created=created, started=_time(status.get("startTime")), declared=declared,
               kind=shape.kind, replicas=shape.replicas)


def cluster_state(kaiwojobs: Iterable[Mapping[str, Any]],
                  kaiwoservices: Iterable[Mapping[str, Any]] = ()) -> ClusterState:
    """Running, pending and finished KaiwoJobs, and running and pending KaiwoServices, from their
    objects (phase is `status.status`). A Ray KaiwoService (an AppWrapper) is left out, and so is a
    KaiwoService named like a KaiwoJob of its namespace (the forecast's trace names each workload once)."""
    running: list[Job] = []
    pending: list[Job] = []
    history: list[tuple[str, str, float]] = []
    objects = [(obj, False) for obj in kaiwojobs]
    taken = {_key(obj) for obj, _ in objects}
    objects += [(obj, True) for obj in kaiwoservices if not _ray_service(obj) and _key(obj) not in taken]
    for obj, service in objects:
        job = _job(obj, service)
        if job is None:
            continue
        status = obj.get("status") or {}
        phase = str(status.get("status") or "")
        if phase in RUNNING and job.started is not None:
            running.append(job)
        elif phase in PENDING or (service and phase in RUNNING):
            # A preempted and requeued one keeps its first startTime; a service STARTING without one
            # waits for some of its pods (Kueue admits them one by one).
            pending.append(replace(job, started=None))
        elif phase == "COMPLETE" and job.started is not None and not service:
            done = _time(status.get("completionTime"))
            if done is not None and done > job.started:
                history.append((job.user, job.queue, (done - job.started).total_seconds()))
    running.sort(key=lambda j: (j.started or j.created, j.namespace, j.name))
    pending.sort(key=lambda j: (j.created, j.namespace, j.name))
    return ClusterState(running, pending, history)


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or "default"), str(meta.get("name") or "")


def _ray_service(obj: Mapping[str, Any]) -> bool:
    """A Ray KaiwoService (`ray: true` or `spec.rayService`): an AppWrapper the forecast does not model."""
    spec = obj.get("spec") or {}
    return bool(spec.get("ray")) or isinstance(spec.get("rayService"), dict)


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of a non-empty sequence."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 1))))
    return ordered[rank - 1]


def _lognormal_total(median: float, elapsed: float, q: float) -> float:
    """The q-th quantile of a log-normal run time (this median, shape `PRIOR_SIGMA`) given that it has
    already run `elapsed` seconds: F(t) = F(elapsed) + q * (1 - F(elapsed))."""
    dist = NormalDist(math.log(median), PRIOR_SIGMA)
    below = dist.cdf(math.log(elapsed)) if elapsed > 0 else 0.0
    level = min(below + q * (1.0 - below), 1.0 - 1e-9)
    return max(math.exp(dist.inv_cdf(level)), elapsed)


def run_seconds(job: Job, history: Sequence[tuple[str, str, float]], q: float,
                elapsed: float = 0.0) -> tuple[float, Basis]:
    """The q-th quantile of how long `job` runs in all, given that it has already run `elapsed` seconds.

    Its declared duration when it has one. Else from the past run times of its user (at least
    `MIN_HISTORY` of them), else of its queue: the q-th percentile of those longer than `elapsed` (a job
    that has run 50 min ends like the past runs that lasted more than 50 min); when it has outlived them
    all, `elapsed / (1 - q)` (the longer something has run, the longer it is likely to go on). With
    fewer runs to go by, a log-normal of shape `PRIOR_SIGMA` around their median ("few"), or around
    `DEFAULT_RUN_SECONDS` when there are none ("default"), conditioned the same way."""
    if job.declared is not None:
        return job.declared, "declared"
    mine = [s for user, _queue, s in history if user == job.user]
    queue = [s for _user, queue_name, s in history if queue_name == job.queue]
    choices: tuple[tuple[list[float], Basis], ...] = ((mine, "user"), (queue, "queue"))
    for sample, basis in choices:
        if len(sample) >= MIN_HISTORY:
            longer = [s for s in sample if s > elapsed]
            if longer:
                return percentile(longer, q), basis
            return elapsed / (1.0 - q), basis
    few = mine or queue
    if few:
        return _lognormal_total(percentile(few, 0.5), elapsed, q), "few"
    return _lognormal_total(DEFAULT_RUN_SECONDS, elapsed, q), "default"


def forecast_trace(state: ClusterState, now: datetime, q: float) -> list[TraceEntry]:
    """The trace that replays `state` from `now` (trace time 0): running jobs submitted at 0 for what
    is left of their run (at least 1 s), then the pending ones one second apart in their submission
    order (the simulated Kueue orders by whole-second creation stamps), for their whole estimated run."""
    entries: list[TraceEntry] = []
    for job in state.running:
        elapsed = max(0.0, (now - (job.started or now)).total_seconds())
        if job.kind == "service":  # held until its declared duration is over, else for ever
            left = None if job.declared is None else max(1.0, job.declared - elapsed)
            entries.append(TraceEntry(len(entries) + 1, _workload(job, 0.0, left)))
            continue
        total, _basis = run_seconds(job, state.history, q, elapsed)
        entries.append(TraceEntry(len(entries) + 1, _workload(job, 0.0, max(1.0, total - elapsed))))
    for index, job in enumerate(state.pending, start=1):
        total_or_none = job.declared if job.kind == "service" else run_seconds(job, state.history, q)[0]
        entries.append(TraceEntry(len(entries) + 1, _workload(job, float(index), total_or_none)))
    return entries


def _workload(job: Job, submit: float, duration: float | None) -> TraceWorkload:
    return TraceWorkload(name=job.name, namespace=job.namespace, submit=submit, user=job.user, queue=job.queue,
                         priority=job.priority, kind=job.kind, replicas=job.replicas, gpus=job.gpus,
                         gpu_vendor=job.gpu_vendor, cpu=job.cpu, memory=job.memory, duration=duration,
                         declared_duration=job.declared)


def estimates(state: ClusterState, now: datetime,
              starts: Mapping[float, Mapping[tuple[str, str], float | None]],
              widen: Mapping[SizeClass, Widening] | None = None,
              node_gpus: int = ASSUMED_NODE_GPUS) -> list[Estimate]:
    """Each pending job's estimate from the simulated starts (trace seconds after `now`) per quantile,
    its span widened by `widen` for its size class (see `calibrated`; the defaults when None)."""
    by_size = widen or DEFAULTS

    def at(q: float, key: tuple[str, str]) -> datetime | None:
        seconds = starts.get(q, {}).get(key)
        return None if seconds is None else now + timedelta(seconds=round(seconds))

    low, mid, high = QUANTILES
    out = []
    for job in state.pending:
        key = (job.namespace, job.name)
        known = [t for t in (at(low, key), at(mid, key), at(high, key)) if t is not None]
        # Shorter run times usually mean an earlier start, not always (a freed gap another job takes):
        # the span is that of the three scenarios.
        first, last = (min(known), max(known)) if known else (None, None)
        size = size_class(job.total_gpus, node_gpus)
        out.append(calibrated(Estimate(namespace=job.namespace, name=job.name, start=at(mid, key), earliest=first,
                                       latest=last, span_earliest=first, span_latest=last, size=size), now,
                              by_size.get(size, DEFAULTS[size])))
    return out


# Calibration (conformalized quantile regression, normalized, one side at a time, per size class): the
# run-time scenarios' span knows neither how run times really vary together nor what the forecast cannot
# see (later arrivals that go first, backfill ahead of a large job). How far each estimate's span missed
# its workload's real start, below and above, in units of how far ahead it looked, is its score; the
# span widened on each side by the SIDE_LEVEL quantile of past scores on that side misses at most 10 %
# below and 10 % above, so holds at least COVERAGE of starts, as far as the future errs like the past.
# Pooled over all sizes that holds on average only: large jobs (overtaken by smaller later arrivals)
# miss far more than small ones. So each size class is calibrated by its own scores (group-conditional,
# "Mondrian" conformal prediction) once it has MIN_CLASS_SCORES, by the pooled ones before, and never
# narrower than its defaults: measured (benchmarks/forecast.py), narrowing on a cluster's first scores
# lost coverage while its queue grew, as early waits are short.
COVERAGE = 0.8
SIDE_LEVEL = 1.0 - (1.0 - COVERAGE) / 2
MIN_SCORES = 10
"""Past scores (all sizes) needed before they may widen the interval beyond the defaults."""
MIN_CLASS_SCORES = 10
"""Past scores of one size class needed before that class is calibrated by its own alone."""
SCALE_FLOOR_SECONDS = 1800.0
"""The least horizon a score is measured in: a start estimated a minute away can still be an hour off."""

Score = tuple[float, float, str]
"""How far a real start fell before and after its estimate's span, in horizons, and its size class
("" where unknown: it counts in the pooled scores only)."""


@dataclass(frozen=True, slots=True)
class Widening:
    below: float
    above: float


DEFAULTS: dict[SizeClass, Widening] = {
    "small": Widening(0.25, 0.5),
    "medium": Widening(0.25, 3.5),
    "large": Widening(0.25, 4.0),
}
"""The least widening below and above the span per size class, in horizons, measured with
`benchmarks/forecast.py` (docs/simulate.md): real starts fall after the span far more often (and
further) than before it, and the larger the job the further."""


def horizon(now: datetime, start: datetime) -> float:
    """The unit of an estimate's score and widening: how far ahead it looks, at least SCALE_FLOOR_SECONDS."""
    return max((start - now).total_seconds(), SCALE_FLOOR_SECONDS)


def score(estimate: Estimate, computed: datetime, actual: datetime) -> Score | None:
    """How far the real start fell before and after its scenarios' span (negative: inside), in horizons,
    with the estimate's size class; None for an estimate without a start."""
    if estimate.start is None or estimate.span_earliest is None or estimate.span_latest is None:
        return None
    unit = horizon(computed, estimate.start)
    return ((estimate.span_earliest - actual).total_seconds() / unit,
            (actual - estimate.span_latest).total_seconds() / unit, estimate.size)


def _conformal(values: Sequence[float]) -> float:
    """The ceil((n + 1) * SIDE_LEVEL)-th smallest of n values (the largest when that is past n)."""
    ordered = sorted(values)
    return ordered[min(len(ordered), math.ceil((len(ordered) + 1) * SIDE_LEVEL)) - 1]


def widening(scores: Sequence[Score]) -> dict[SizeClass, Widening]:
    """Per size class, each side's conformal quantile of that class's past scores once it has
    `MIN_CLASS_SCORES`, else of all past scores once there are `MIN_SCORES`, never below the class's
    defaults; the defaults alone before."""
    out: dict[SizeClass, Widening] = {}
    for size in SIZE_CLASSES:
        own = [sc for sc in scores if sc[2] == size]
        sample = own if len(own) >= MIN_CLASS_SCORES else scores if len(scores) >= MIN_SCORES else ()
        floor = DEFAULTS[size]
        out[size] = floor if not sample else Widening(max(floor.below, _conformal([sc[0] for sc in sample])),
                                                      max(floor.above, _conformal([sc[1] for sc in sample])))
    return out


def calibrated(estimate: Estimate, now: datetime, widen: Widening) -> Estimate:
    """`earliest`..`latest`: the scenarios' span widened by `widen` horizons on each side, never before
    `now` and always holding `start`."""
    if estimate.start is None or estimate.span_earliest is None or estimate.span_latest is None:
        return estimate
    unit = horizon(now, estimate.start)
    below, above = timedelta(seconds=round(widen.below * unit)), timedelta(seconds=round(widen.above * unit))
    return estimate.model_copy(update={"earliest": max(now, min(estimate.start, estimate.span_earliest - below)),
                                       "latest": max(estimate.start, estimate.span_latest + above)})

Key = tuple[str, str]


def settle(first: Mapping[Key, tuple[datetime, Estimate]], kaiwojobs: Iterable[Mapping[str, Any]],
           ) -> tuple[dict[Key, tuple[datetime, Estimate]], list[Score]]:
    """The scores of first estimates (when made, the estimate) whose KaiwoJob has started since, and the
    first estimates still waiting: a KaiwoJob still pending keeps its own, one that ended otherwise (or
    is gone) drops it."""
    waiting: dict[Key, tuple[datetime, Estimate]] = {}
    scores: list[Score] = []
    for obj in kaiwojobs:
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace") or "default"), str(meta.get("name") or ""))
        if key not in first:
            continue
        computed, estimate = first[key]
        status = obj.get("status") or {}
        started = _time(status.get("startTime"))
        if str(status.get("status") or "") in PENDING:
            waiting[key] = first[key]
        elif started is not None and started >= computed:  # not a requeued job's first startTime
            found = score(estimate, computed, started)
            if found is not None:
                scores.append(found)
    return waiting, scores
