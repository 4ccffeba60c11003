"""Benchmark: the chaos soak (issue 14). N KaiwoJobs and N/20 KaiwoServices against the sandbox (its
simulated cluster: Kueue, Job and Deployment controllers, scheduler, kubelet) while the operator
runs as in production - each controller in its Ray actor (actors/, the supervisor), two instances
competing for the Leases - and faults run:

- every operator request: 5% answered 500, 2% 429 with Retry-After: 1, 10% of updates/patches 409;
- every watch stream cut every 10 s; one cut in three is followed by a 410 on each resumed watch;
- a controller actor killed (`ray.kill`; Ray restarts it) every 30-60 s, drawn (KaiwoJob's first, then
  in turn), of an instance drawn among the live ones;
- one leader failover: every actor of the instance leading the KaiwoJob controller killed for good,
  the second instance takes over once the Leases expire;
- one sandbox restart from `--state` (same URL and tokens; every resourceVersion the operator holds
  then gets 410).

Before the load, look-alike objects are created: objects with the names of children the operator
will want (a Job, a labelled Job, a PVC, a download ConfigMap, a Deployment, a RayService) and
labelled strangers, none owned by us. They must come out untouched, and the workloads whose child
names they hold end `ERROR` with `Schedulable=False/ChildNameConflict`. Some KaiwoJobs are deleted
during the faults: they and their children must be gone.

The same workloads first run once without faults (one instance, same Ray actors): its writes per
CR are the baseline of the soak's. Writes are counted from the sandbox's audit log by user (each
instance has its own token); the figures are printed one a line with their targets:
CRs that never reached their final phase (0), duplicated children (0), orphaned children (0),
foreign objects modified (0), seconds from the last fault to convergence (<= 30 s), writes per CR
against the fault-free run, and the peak RSS of each actor.

KaiwoJobs are made over the window at most 10 a second (window = N/10 s past 500), about what this
2-core machine drains, so that the convergence figure measures recovery rather than a backlog. The
cluster is sized for the load as an admin would size it: the KaiwoServices' pods run for good and a
node holds 110 pods, so there is one CPU node per 110 of (services + 100 for the jobs' pods); with
the single CPU node of the default cluster, 500 services could never all run (at N = 10,000 they
waited past the Deployments' progress deadline and ended ERROR) and at N = 2,000 the services left
the jobs 10 pod slots.
The fault schedule is in seconds of a production-like run; `--pace F` multiplies every interval
(the test in `make test` runs at 0.25 with a 3 s Lease). Figures are printed, never raised; the exit
status is 1 when a correctness figure is not 0 or the soak did not converge.

    .venv/bin/python benchmarks/chaos.py [--scale N (KaiwoJobs, default 200)] [--window S] [--pace F]
        [--lease-seconds S] [--seed N] [--json PATH] [--no-baseline]
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _chaos_verdict import (
    CHILD_KINDS,
    Snapshot,
    Verdict,
    Wanted,
    duplicate_count,
    fingerprint,
    foreign_key,
    foreign_modified,
    judge,
    unfinished,
)
from _machine import machine_load
from _objects import GROUP, VERSION, kaiwojob, setup_cluster_objects
from _runtime import api_client, k8s
from _sandbox import SandboxProcess, sandbox_process

from kaiwo_ray.api.jsonobj import JsonObj

TIME_FACTOR = 0.05
RUN = "sleep 20"  # a KaiwoJob's entrypoint: its pod runs 1 s at that time factor
# Small pods, so that Kueue's quota and the nodes' pod slots (110 a node) bound a run's throughput
# rather than the default 2 CPU / 16 Gi each (16 at a time on the CPU node): the soak measures the
# operator's recovery, not the queue's backlog.
SMALL = {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "100m", "memory": "128Mi"}}
NAMESPACES = ("chaos-0", "chaos-1")
OPERATORS = ("op-a", "op-b")  # one token (audit user) per instance
CONTROLLERS = ["kaiwojob", "kaiwoservice"]
TARGET_CONVERGENCE_S = 30.0
POD_SLOTS_PER_NODE = 110  # the kubelet's default maxPods, what the sandbox's nodes allow
JOB_POD_SLOTS = 100
# the faults every operator request may meet (FaultInjector.add_json specs), issue 14's rates
FAULT_RULES: list[dict[str, Any]] = [
    {"code": 500, "probability": 0.05, "users": list(OPERATORS)},
    {"code": 429, "probability": 0.02, "retryAfter": 1, "users": list(OPERATORS)},
    {"code": 409, "verbs": ["update", "patch"], "probability": 0.10, "users": list(OPERATORS)},
]
DATA_STORAGE = {"storageEnabled": True, "storageClassName": "standard", "data": {"storageSize": "1Gi"}}
HF_STORAGE = {"storageEnabled": True, "storageClassName": "standard",
              "huggingFace": {"storageSize": "1Gi", "preCacheRepos": [{"repoId": "org/model", "files": ["config.json"]}]}}
RUN_ID_LABEL, NAME_LABEL = "kaiwo.silogen.ai/run-id", "kaiwo.silogen.ai/name"


def cpu_nodes_for(services: int) -> int:
    """CPU nodes for a soak: the services' pods run for good, a node holds 110 pods, and 100 slots
    are left for the KaiwoJobs' pods (module docstring)."""
    return max(1, math.ceil((services + JOB_POD_SLOTS) / POD_SLOTS_PER_NODE))


def out(line: str) -> None:
    print(line, flush=True)


# -- the workloads and the look-alikes ----------------------------------------------------------


def kaiwoservice(name: str, namespace: str) -> JsonObj:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "KaiwoService",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"user": "bench@example.com", "image": "nginx:1.27", "entrypoint": "sleep infinity",
                     "resources": SMALL}}


def _suspended_job(name: str, namespace: str, labels: dict[str, str] | None = None) -> JsonObj:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": namespace,
                                                                  "labels": labels or {"app": "users-own"}},
            "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "main", "image": "busybox:1.36", "command": ["sleep", "5"]}]}}}}


def lookalikes(namespace: str) -> list[JsonObj]:
    """Objects a user made, named as children the operator will want (or labelled as ours), owned by
    nobody: they must come out of the soak exactly as they went in."""
    ours = {RUN_ID_LABEL: "not-a-run-of-ours", NAME_LABEL: "ghost"}
    return [
        _suspended_job("clash-job", namespace),  # the Job of KaiwoJob clash-job
        _suspended_job("clash-label", namespace, {**ours, NAME_LABEL: "clash-label"}),  # ... labelled as ours
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "clash-data-data", "namespace": namespace},
         "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "3Gi"}},
                  "storageClassName": "standard"}},  # the data PVC of KaiwoJob clash-data
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "clash-dl-download", "namespace": namespace},
         "data": {"users": "own"}},  # the download ConfigMap of KaiwoJob clash-dl
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "clash-svc", "namespace": namespace},
         "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "clash-svc"}}, "template": {
             "metadata": {"labels": {"app": "clash-svc"}},
             "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}},  # KaiwoService clash-svc's
        {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": "svc-0", "namespace": namespace},
         "spec": {"serveConfigV2": "applications: []\n", "rayClusterConfig": {"headGroupSpec": {
             "rayStartParams": {}, "template": {"spec": {"containers": [
                 {"name": "ray-head", "image": "rayproject/ray:2.47.1",
                  "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}}}]}}}}}},  # named as KaiwoService svc-0
        _suspended_job("ghost", namespace, ours),  # labelled as ours, no workload of that name
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ghost-download", "namespace": namespace,
                                                               "labels": ours}, "data": {"users": "own"}},
    ]


@dataclass(frozen=True, slots=True)
class Workload:
    obj: JsonObj
    wanted: Wanted


def workloads(jobs: int) -> tuple[list[Workload], list[Workload]]:
    """(services, jobs): N/20 KaiwoServices (at least 1) and N KaiwoJobs over the soak's namespaces,
    plus the workloads whose children the look-alikes (in the first namespace) hold."""
    first = NAMESPACES[0]
    services = [Workload(kaiwoservice(f"svc-{i}", ns := NAMESPACES[i % len(NAMESPACES)]),
                         Wanted("KaiwoService", ns, f"svc-{i}", "RUNNING", (("Deployment", 1),)))
                for i in range(max(1, jobs // 20))]
    services.append(Workload(kaiwoservice("clash-svc", first),
                             Wanted("KaiwoService", first, "clash-svc", "CONFLICT", (("Deployment", 1),))))
    plain = [Workload(kaiwojob(f"kj-{i}", ns := NAMESPACES[i % len(NAMESPACES)], RUN, resources=SMALL),
                      Wanted("KaiwoJob", ns, f"kj-{i}", "COMPLETE", (("Job", 1),))) for i in range(jobs)]
    clashes = [
        Workload(kaiwojob("clash-job", first, RUN, resources=SMALL), Wanted("KaiwoJob", first, "clash-job", "CONFLICT", (("Job", 1),))),
        Workload(kaiwojob("clash-label", first, RUN, resources=SMALL), Wanted("KaiwoJob", first, "clash-label", "CONFLICT", (("Job", 1),))),
        Workload(kaiwojob("clash-data", first, RUN, resources=SMALL, storage=DATA_STORAGE),
                 Wanted("KaiwoJob", first, "clash-data", "CONFLICT", (("Job", 1), ("PersistentVolumeClaim", 1)))),
        Workload(kaiwojob("clash-dl", first, RUN, resources=SMALL, storage=HF_STORAGE),
                 Wanted("KaiwoJob", first, "clash-dl", "CONFLICT",
                        (("Job", 2), ("PersistentVolumeClaim", 1), ("ConfigMap", 1)))),
    ]
    # the look-alikes' workloads go in among the first ones, so they meet the faults too
    return services, clashes + plain


# -- the operator: two instances of Ray actors --------------------------------------------------


class Instance:
    """One kaiwo-ray instance as `kaiwo-ray up` runs it: a Supervisor of the controller actors, in a
    Ray namespace of its own, with its own API identity (audit user) and Lease identity."""

    def __init__(self, label: str, kubeconfig: Path, lease_seconds: float, ray_namespace: str) -> None:
        from actors.supervisor import Supervisor
        from kaiwo_ray.controllers.manager import HostSettings

        self.label = label
        settings = HostSettings(kubeconfig=str(kubeconfig), identity=f"chaos-{label}", lease=True,
                                lease_seconds=lease_seconds, renew_every=max(0.2, lease_seconds / 7.5), tune_gc=True,
                                batch_scheduling=True)
        self.supervisor = Supervisor(settings, CONTROLLERS, namespace=ray_namespace, log_level=logging.ERROR)
        self.crashed = False

    def start(self) -> None:
        self.supervisor.start(timeout=180.0, leader_wait=0.0)

    def health(self) -> list[Any]:
        return [] if self.crashed else self.supervisor.health(timeout=5.0)

    def leads(self, name: str) -> bool:
        return any(row.name == name and row.alive and row.leader for row in self.health())

    def kill_actor(self, name: str) -> None:
        """As a crashed process: no graceful stop, no Lease release; Ray starts a new incarnation."""
        import ray

        ray.kill(self.supervisor.handle(name), no_restart=False)

    def crash(self) -> None:
        """Every actor killed for good: the instance is gone, its Leases left to expire."""
        import ray

        self.crashed = True
        for handle in self.supervisor.handles.values():
            with suppress(Exception):
                ray.kill(handle, no_restart=True)

    def stop(self) -> None:
        if not self.crashed:
            self.supervisor.stop(grace_seconds=3.0)


class RssPeaks:
    """Samples every live actor's RSS every `every` seconds in a thread; keeps the peak per actor."""

    def __init__(self, instances: list[Instance], every: float = 2.0) -> None:
        self.instances = instances
        self.every = every
        self.peaks: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def sample(self) -> None:
        for instance in list(self.instances):
            for row in instance.health():
                if row.alive and row.rss_bytes:
                    key = f"{instance.label}_{row.name}"
                    self.peaks[key] = max(self.peaks.get(key, 0.0), row.rss_bytes / 2**20)

    def _run(self) -> None:
        while not self._stop.wait(self.every):  # a sampling period, not synchronisation
            with suppress(Exception):
                self.sample()

    def __enter__(self) -> RssPeaks:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=15)
        with suppress(Exception):
            self.sample()


# -- the load client and the observer (the admin's and the loader's identities) -----------------


def retrying(call: Callable[[], Any], deadline: float) -> Any:
    """A user's client through a restart of the API server: 5xx, 429 and dropped connections are
    retried until `deadline`; AlreadyExists/NotFound mean an earlier attempt landed."""
    import urllib3

    kubernetes = k8s()
    delay = 0.1
    while True:
        try:
            return call()
        except kubernetes.client.ApiException as err:
            if err.status in (404, 409):
                return None
            if err.status not in (429, 500, 502, 503, 504) or time.monotonic() > deadline:
                raise
        except (urllib3.exceptions.HTTPError, OSError):  # refused/reset while the sandbox restarts
            if time.monotonic() > deadline:
                raise
        time.sleep(delay)  # a client's retry back-off
        delay = min(delay * 2, 1.0)


def request(client: Any, method: str, path: str, body: JsonObj | None = None) -> bytes:
    """One raw request through the `kubernetes` client (its auth and TLS); the body undecoded.
    ApiException for an error status, as the typed methods raise it."""
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    params = client.param_serialize(method, path, header_params=headers, body=body, auth_settings=["BearerToken"])
    response = client.call_api(*params, _request_timeout=60)
    data: bytes = response.read()
    if response.status >= 400:
        raise k8s().client.ApiException(status=response.status, reason=response.reason, body=data.decode())
    return data


class Cluster:
    """Raw JSON reads of the soak's namespaces (admin) and writes as the `loader` user."""

    def __init__(self, sandbox: SandboxProcess) -> None:
        kubernetes = k8s()
        self.admin = api_client(sandbox.kubeconfigs["admin"])
        self._loader_config = sandbox.kubeconfigs["loader"]
        self._local = threading.local()
        self.custom = kubernetes.client.CustomObjectsApi(self.admin)

    def loader(self) -> Any:
        api = getattr(self._local, "api", None)
        if api is None:
            api = self._local.api = api_client(self._loader_config)
        return api

    def get_raw(self, path: str) -> JsonObj:
        import orjson

        return dict(orjson.loads(request(self.admin, "GET", path)))

    def items(self, prefix: str, plural: str, kind: str) -> list[JsonObj]:
        found = []
        for obj in self.get_raw(f"{prefix}/{plural}")["items"]:
            if (obj.get("metadata") or {}).get("namespace") in NAMESPACES:
                obj["kind"] = kind
                found.append(obj)
        return found

    def snapshot(self, workloads_only: bool = False) -> Snapshot:
        """The workloads and (unless `workloads_only`) every object of a child kind."""
        snapshot = Snapshot()
        for plural, kind in (("kaiwojobs", "KaiwoJob"), ("kaiwoservices", "KaiwoService")):
            for obj in self.items(f"/apis/{GROUP}/{VERSION}", plural, kind):
                meta = obj["metadata"]
                snapshot.workloads[(kind, meta["namespace"], meta["name"])] = obj
        if workloads_only:
            return snapshot
        for prefix, plural, kind in CHILD_KINDS:
            snapshot.objects.extend(self.items(prefix, plural, kind))
        return snapshot

    def create(self, obj: JsonObj, deadline: float) -> None:
        client = self.loader()
        group_version = obj["apiVersion"]
        namespace = obj["metadata"]["namespace"]
        plural = {"KaiwoJob": "kaiwojobs", "KaiwoService": "kaiwoservices", "Job": "jobs", "Deployment": "deployments",
                  "PersistentVolumeClaim": "persistentvolumeclaims", "ConfigMap": "configmaps",
                  "RayService": "rayservices"}[obj["kind"]]
        prefix = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
        retrying(lambda: request(client, "POST", f"{prefix}/namespaces/{namespace}/{plural}", obj), deadline)

    def delete(self, wanted: Wanted, deadline: float) -> None:
        client = self.loader()
        plural = "kaiwojobs" if wanted.kind == "KaiwoJob" else "kaiwoservices"
        path = f"/apis/{GROUP}/{VERSION}/namespaces/{wanted.namespace}/{plural}/{wanted.name}"
        retrying(lambda: request(client, "DELETE", path), deadline)


def settled_lookalikes(cluster: Cluster, timeout: float = 30.0) -> dict[tuple[str, str, str], JsonObj]:
    """The look-alikes' fingerprints once the simulated cluster is done with them (the PVC bound, the
    Deployment's revision annotated): two reads a second apart that agree."""
    names = {foreign_key(obj) for ns in NAMESPACES[:1] for obj in lookalikes(ns)}

    def read() -> dict[tuple[str, str, str], JsonObj]:
        return {foreign_key(obj): fingerprint(obj) for prefix, plural, kind in CHILD_KINDS
                for obj in cluster.items(prefix, plural, kind) if foreign_key(obj) in names}

    deadline = time.monotonic() + timeout
    previous = read()
    while time.monotonic() < deadline:
        time.sleep(1.0)  # a second for the simulated controllers to act on them
        current = read()
        bound = all(key[0] != "PersistentVolumeClaim" or (current[key]["spec"] or {}).get("volumeName")
                    for key in current)
        if current == previous and len(current) == len(names) and bound:
            return current
        previous = current
    raise RuntimeError(f"the look-alikes did not settle within {timeout:.0f} s: {sorted(previous)}")


# -- the fault schedule --------------------------------------------------------------------------


@dataclass(slots=True)
class Plan:
    """When each fault happens, in seconds from the start of the load (already multiplied by pace)."""

    window: float
    cuts: list[float]
    kills: list[float]
    failover: float
    restart: float

    @classmethod
    def draw(cls, window: float, pace: float, rng: random.Random) -> Plan:
        cuts = [t * pace for t in range(10, int(window / pace) + 1, 10)]
        kills: list[float] = []
        t = rng.uniform(30, 60) * pace
        t = min(t, window * 0.85)  # the first kill falls inside the window, however short
        while t < window:
            kills.append(t)
            t += rng.uniform(30, 60) * pace
        # the restart comes last but for the final cut, while the last KaiwoJobs are being made
        return cls(window, cuts, kills, failover=window * 0.35, restart=window * 0.88)


@dataclass(slots=True)
class Log:
    """What happened when (seconds since the load started), for the run's report."""

    began: float = field(default_factory=time.monotonic)
    lines: list[str] = field(default_factory=list)
    last_fault: float = 0.0

    def now(self) -> float:
        return time.monotonic() - self.began

    def fault(self, what: str) -> None:
        self.last_fault = self.now()
        self.lines.append(f"  t={self.last_fault:5.1f} s  {what}")


def current_leader(instances: list[Instance], stop: threading.Event, patience: float) -> Instance | None:
    """The instance leading the KaiwoJob controller, waiting up to `patience` seconds for one (a
    killed actor's successor waits for its predecessor's Lease to expire)."""
    deadline = time.monotonic() + patience
    while not stop.is_set():
        leader = next((i for i in instances if i.leads("kaiwojob")), None)
        if leader is not None or time.monotonic() > deadline:
            return leader
        stop.wait(0.5)  # polling the actors' health
    return None


def run_faults(plan: Plan, log: Log, sandbox: SandboxProcess, instances: list[Instance],
               rng: random.Random, stop: threading.Event, done: dict[str, Any]) -> None:
    """Drive the discrete faults on schedule until the window ends; `done` says what was done (the
    failover's duration lands there once the standby leads)."""
    events: list[tuple[float, str]] = sorted(
        [(t, "cut") for t in plan.cuts] + [(t, "kill") for t in plan.kills]
        + [(plan.failover, "failover"), (plan.restart, "restart")])
    done.update({"cuts": 0, "streams_cut": 0, "expired_cuts": 0, "kills": 0, "failover_s": float("nan"),
                 "restart_s": float("nan")})
    for at, what in events:
        if stop.wait(max(0.0, at - log.now())):  # the schedule, not synchronisation
            break
        live = [i for i in instances if not i.crashed]
        if what == "cut":
            done["cuts"] += 1
            expire = done["cuts"] % 3 == 0
            done["expired_cuts"] += expire
            cut = sandbox.cut_watches(expire=expire)
            done["streams_cut"] += cut
            log.fault(f"cut {cut} watch streams{' + 410 on each resumed watch' if expire else ''}")
        elif what == "kill":
            instance = rng.choice(live)
            name = CONTROLLERS[done["kills"] % len(CONTROLLERS)]  # the busy KaiwoJob controller first
            instance.kill_actor(name)
            done["kills"] += 1
            log.fault(f"killed actor {name} of instance {instance.label} (Ray restarts it)")
        elif what == "failover":
            leader = current_leader(live, stop, patience=60.0)
            if leader is None or len(live) < 2:
                log.fault("failover skipped: no instance led the KaiwoJob controller within 60 s")
                continue
            leader.crash()
            crashed_at = time.monotonic()
            log.fault(f"crashed instance {leader.label} (every actor killed for good)")
            standby = next(i for i in live if i is not leader)

            def took_over(standby: Instance = standby, crashed_at: float = crashed_at) -> None:
                """Seconds until the standby leads the KaiwoJob controller (recorded even after the window)."""
                while time.monotonic() - crashed_at < 300:
                    with suppress(Exception):
                        if standby.leads("kaiwojob"):
                            done["failover_s"] = time.monotonic() - crashed_at
                            log.lines.append(f"  t={log.now():5.1f} s  instance {standby.label} leads the KaiwoJob "
                                             "controller")
                            return
                    time.sleep(0.25)  # polling the standby's health

            threading.Thread(target=took_over, daemon=True, name="failover-watch").start()
        elif what == "restart":
            done["restart_s"] = sandbox.restart()
            log.fault(f"sandbox restarted from --state in {done['restart_s']:.1f} s")


# -- one run --------------------------------------------------------------------------------------


@dataclass(slots=True)
class Result:
    label: str
    crs: int
    verdict: Verdict
    foreign: list[str]
    converged_after_s: float  # from the last fault (chaos) or the last create (baseline)
    writes: int
    failed_writes: dict[str, int]
    rss_peaks: dict[str, float]
    faults: dict[str, Any]
    fault_hits: dict[int, int]
    log: list[str]
    wall_s: float


def _operator_writes(sandbox: SandboxProcess, users: tuple[str, ...]) -> list[tuple[str, str, str, str, str]]:
    return [row for user in users for row in sandbox.writes(user)]


def run(label: str, crs: int, chaos: bool, window: float, pace: float, lease_seconds: float, seed: int,
        converge_timeout: float) -> Result:
    began = time.monotonic()
    rng = random.Random(seed)
    services, jobs = workloads(crs)
    every = services + jobs
    users = (*OPERATORS, "loader") if chaos else (OPERATORS[0], "loader")
    cpu_nodes = cpu_nodes_for(len(services))
    with sandbox_process(cluster=True, time_factor=TIME_FACTOR, users=users, state=chaos,
                         cpu_nodes=cpu_nodes) as sandbox:
        setup_cluster_objects(sandbox.kubeconfigs["admin"], list(NAMESPACES), cpu_nodes=cpu_nodes)
        cluster = Cluster(sandbox)
        far = time.monotonic() + 600
        for obj in lookalikes(NAMESPACES[0]):
            cluster.create(obj, far)
        before = settled_lookalikes(cluster)
        instances = [Instance(op[-1], sandbox.kubeconfigs[op], lease_seconds, f"kaiwo-{label}-{op}")
                     for op in (OPERATORS if chaos else OPERATORS[:1])]
        instances[0].start()  # the first instance leads; the second is its standby
        deadline = time.monotonic() + 60
        while not all(instances[0].leads(name) for name in CONTROLLERS):
            if time.monotonic() > deadline:
                raise RuntimeError(f"instance {instances[0].label} did not lead within 60 s")
            time.sleep(0.2)  # polling for the Leases
        for standby in instances[1:]:
            standby.start()
        to_delete = [w.wanted for w in jobs[4::20]]  # 5% of the KaiwoJobs, deleted mid-soak
        deleted = {w.key for w in to_delete}
        wanted = [w.wanted if w.wanted.key not in deleted else Wanted(w.wanted.kind, w.wanted.namespace,
                                                                      w.wanted.name, "GONE", w.wanted.children)
                  for w in every]
        plan = Plan.draw(window, pace, rng)
        log = Log()
        stop = threading.Event()
        faults: dict[str, Any] = {}
        with RssPeaks(instances) as rss, ThreadPoolExecutor(4, thread_name_prefix="loader") as pool:
            fault_thread = None
            if chaos:
                sandbox.set_faults(FAULT_RULES)
                log.fault("fault rules on: 5% 500, 2% 429 (Retry-After 1), 10% 409 on updates")

                def faulting() -> None:
                    run_faults(plan, log, sandbox, instances, rng, stop, faults)

                fault_thread = threading.Thread(target=faulting, name="faults", daemon=True)  # scheduled faults
                fault_thread.start()
            # services first, then the KaiwoJobs paced up to the sandbox restart (all at once without faults)
            spread = plan.restart if chaos else 0.0
            load_deadline = time.monotonic() + window + 300
            for w in services:
                cluster.create(w.obj, load_deadline)
            futures = []
            for i, w in enumerate(jobs):
                delay = log.began + spread * i / max(1, len(jobs)) - time.monotonic()
                if delay > 0:
                    time.sleep(delay)  # pacing the load, not synchronisation
                futures.append(pool.submit(cluster.create, w.obj, load_deadline))
            for future in futures:
                future.result()
            for gone in to_delete:  # while the faults still run
                cluster.delete(gone, load_deadline)
            log.lines.append(f"  t={log.now():5.1f} s  {len(jobs)} KaiwoJobs and {len(services)} KaiwoServices "
                             f"created, {len(to_delete)} KaiwoJobs deleted")
            if chaos:
                if log.now() < window:
                    time.sleep(window - log.now())  # the schedule: faults run until the window ends
                stop.set()
                if fault_thread is not None:
                    fault_thread.join(timeout=60)
                sandbox.set_faults([])
                log.fault("fault rules off")
            quiet_from = log.now()  # the last fault (chaos) or the last write of the load
            verdict = Verdict([], [], [])
            converged_at: float | None = None
            deadline = time.monotonic() + converge_timeout
            next_progress = time.monotonic() + 15
            while time.monotonic() < deadline:
                read_began = time.monotonic()
                try:
                    # the workloads alone while some are not final: the observer's lists cost the
                    # sandbox's CPU, which the operator needs
                    verdict = Verdict(unfinished(wanted, cluster.snapshot(workloads_only=True).workloads), [], [])
                    if not verdict.unfinished:
                        verdict = judge(wanted, cluster.snapshot())
                except Exception as err:  # the observer's own read failed (a loaded box): read again
                    log.lines.append(f"  t={log.now():5.1f} s  observer read failed: {err}")
                    time.sleep(1.0)  # polling the cluster
                    continue
                if verdict.converged:
                    converged_at = log.now()
                    break
                if time.monotonic() >= next_progress:  # a long run says where it stands
                    next_progress = time.monotonic() + 15
                    phases = Counter(line.rsplit("(phase ", 1)[1].split(",")[0] for line in verdict.unfinished)
                    rare = [line for line in verdict.unfinished if "(phase STARTING" not in line][:3]
                    out(f"  ({label} t={log.now():.0f} s: {len(verdict.unfinished)} CRs not final "
                        f"{dict(phases.most_common())}, {len(verdict.duplicates)} duplicates, "
                        f"{len(verdict.orphans)} orphans{'; e.g. ' + '; '.join(rare) if rare else ''})")
                time.sleep(max(0.5, 3 * (time.monotonic() - read_began)))  # polling, at most a quarter of the time
            if converged_at is not None:
                log.lines.append(f"  t={converged_at:5.1f} s  converged")
                time.sleep(2.0)  # then it must stay converged: read once more after a pause
                verdict = judge(wanted, cluster.snapshot())
            fault_hits = sandbox.fault_hits()
        op_users = tuple(u for u in users if u in OPERATORS)
        writes = _operator_writes(sandbox, op_users)
        operator_objects = {(resource, namespace, name) for _verb, resource, _sub, namespace, name in writes}
        foreign_now = [obj for prefix, plural, kind in CHILD_KINDS for obj in cluster.items(prefix, plural, kind)]
        foreign = foreign_modified(before, foreign_now, operator_objects)
        failed: dict[str, int] = {}
        for user in op_users:
            for code, count in sandbox.failed_writes(user).items():
                failed[code] = failed.get(code, 0) + count
        for instance in instances:
            with suppress(Exception):
                instance.stop()
        converged_after = (converged_at - quiet_from) if converged_at is not None else float("inf")
        return Result(label, len(every), verdict, foreign, max(0.0, converged_after), len(writes), failed,
                      rss.peaks, faults, fault_hits, log.lines, time.monotonic() - began)


# -- report ---------------------------------------------------------------------------------------


def figures(soak: Result, baseline: Result | None) -> dict[str, Any]:
    found = {
        "crs_not_final": len(soak.verdict.unfinished),
        "duplicated_children": duplicate_count(soak.verdict),
        "orphaned_children": len(soak.verdict.orphans),
        "foreign_objects_modified": len(soak.foreign),
        "seconds_last_fault_to_convergence": soak.converged_after_s,
        "writes_per_cr": soak.writes / soak.crs,
        "baseline_writes_per_cr": baseline.writes / baseline.crs if baseline else None,
        "actor_peak_rss_mb": soak.rss_peaks,
        "faults": soak.faults,
        "fault_hits": {str(k): v for k, v in soak.fault_hits.items()},
        "failed_writes": soak.failed_writes,
        "crs": soak.crs,
    }
    return found


def report(soak: Result, baseline: Result | None) -> bool:
    if baseline is not None:
        out(f"baseline (no faults): {baseline.crs} CRs, {baseline.writes} operator writes, converged "
            f"{baseline.converged_after_s:.1f} s after the last create; not final {len(baseline.verdict.unfinished)}, "
            f"duplicates {duplicate_count(baseline.verdict)}, orphans {len(baseline.verdict.orphans)}, foreign "
            f"modified {len(baseline.foreign)} ({baseline.wall_s:.0f} s)")
    out(f"soak timeline ({soak.crs} CRs):")
    for line in sorted(soak.log, key=lambda line: float(line.split("=", 1)[1].split(" s", 1)[0])):
        out(line)
    f = soak.faults
    out(f"faults: {f.get('cuts', 0)} watch cuts ({f.get('streams_cut', 0)} streams; {f.get('expired_cuts', 0)} followed "
        f"by 410), {f.get('kills', 0)} actor kills, failover took {f.get('failover_s', float('nan')):.1f} s, sandbox "
        f"restart {f.get('restart_s', float('nan')):.1f} s; requests hit by code {dict(sorted(soak.fault_hits.items()))}; "
        f"operator writes refused: {dict(sorted(soak.failed_writes.items()))}")
    for title, lines in (("not final", soak.verdict.unfinished), ("duplicate", soak.verdict.duplicates),
                         ("orphan", soak.verdict.orphans), ("foreign modified", soak.foreign)):
        for line in lines[:20]:
            out(f"  {title}: {line}")
    bad = [len(soak.verdict.unfinished), duplicate_count(soak.verdict), len(soak.verdict.orphans), len(soak.foreign)]
    out(f"crs_not_final: {bad[0]} CRs (target 0)")
    out(f"duplicated_children: {bad[1]} children (target 0)")
    out(f"orphaned_children: {bad[2]} children (target 0)")
    out(f"foreign_objects_modified: {bad[3]} objects (target 0; {len(lookalikes(NAMESPACES[0]))} look-alikes)")
    conv = soak.converged_after_s
    out(f"seconds_last_fault_to_convergence: {conv:.1f} s (target <= {TARGET_CONVERGENCE_S:.0f} s)"
        f"{' MISSED' if conv > TARGET_CONVERGENCE_S else ''}")
    per_cr = soak.writes / soak.crs
    if baseline is not None:
        base = baseline.writes / baseline.crs
        out(f"writes_per_cr_vs_fault_free: {per_cr / base:.2f}x ({per_cr:.2f} vs {base:.2f} successful writes per CR, "
            "Events included, both instances' users; no target)")
    else:
        out(f"writes_per_cr: {per_cr:.2f} successful writes per CR (no baseline run)")
    for key, mb in sorted(soak.rss_peaks.items()):
        out(f"actor_peak_rss_{key}: {mb:.0f} MB (instance {key.split('_')[0]}, sampled every 2 s; no target)")
    return not any(bad) and conv != float("inf")


@contextmanager
def ray_session() -> Iterator[None]:
    import ray

    from actors.supervisor import init_ray

    started = init_ray(num_cpus=2)
    try:
        yield
    finally:
        if started:
            ray.shutdown()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=int, default=200, metavar="N", help="KaiwoJobs (N/20 KaiwoServices)")
    parser.add_argument("--window", type=float, default=None,
                        help="seconds the faults run (default 50 x pace, or N/10 s past 500 KaiwoJobs)")
    parser.add_argument("--pace", type=float, default=1.0, help="multiplies every fault interval (0.25: 4x as often)")
    parser.add_argument("--lease-seconds", type=float, default=None, help="Lease duration (default 15 x pace, >= 3)")
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--converge-timeout", type=float, default=None, help="give up after (default 120 s + N/20)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("--no-baseline", action="store_true", help="skip the fault-free run")
    args = parser.parse_args()
    # KaiwoJobs are made at most 10 a second over the window: about what this 2-core machine (sandbox,
    # simulated cluster, operator and observer together) drains, so the convergence figure measures
    # the recovery from the faults rather than a backlog the load piled up
    window = args.window if args.window is not None else max(50.0 * args.pace, args.scale / 10)
    lease = args.lease_seconds if args.lease_seconds is not None else max(3.0, 15.0 * args.pace)
    timeout = args.converge_timeout if args.converge_timeout is not None else 120.0 + args.scale / 20
    out(f"run: {args.scale} KaiwoJobs + {max(1, args.scale // 20)} KaiwoServices (+5 beside look-alikes), faults for "
        f"{window:.0f} s at pace {args.pace}, Lease {lease:.0f} s; load average at start {machine_load()}")
    started = time.monotonic()
    with ray_session():
        baseline = None if args.no_baseline else run("base", args.scale, False, window, args.pace, lease, args.seed,
                                                     timeout)
        soak = run("soak", args.scale, True, window, args.pace, lease, args.seed, timeout)
    ok = report(soak, baseline)
    if args.json is not None:
        args.json.write_text(json.dumps(figures(soak, baseline), indent=2, default=str))
    out(f"machine load average: {machine_load()}")
    out(f"benchmark wall time: {time.monotonic() - started:.1f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
