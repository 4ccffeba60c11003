"""GPU accounting end to end against the sandbox's simulated GPUs (time factor 0.1: a `60s` of the
utilization annotation lasts 6 s): the accounting controller (and GPU preemption) in-process, reading
the sandbox's GPUs through our sandbox sampler, checkpointing its ledger into ConfigMaps; the admin
API (auth on, RBAC enforced by the sandbox) answering /api/v1/usage and /metrics from them.

Expected figures come from the schedules and the pods' runtimes, not from the ledger: a workload
accrues allocated, used and idle GPU-seconds within one telemetry interval per GPU of them."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serve"))

from admin_support import RunningApp, serve_app
from e2e_harness import RunningOperator, in_process_operator
from e2e_support import Kube
from late_source import LateSource

from kaiwo_ray.api.labels import SUBMITTED_BY
from kaiwo_ray.controllers.accounting import AccountingSettings
from kaiwo_ray.controllers.gpupreemption import GpuPreemptionSettings
from kaiwo_ray.controllers.manager import HostSettings
from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.reconcile.gpupreemption import PREFIX
from kaiwo_ray.telemetry.aggregator import Aggregator
from kaiwo_ray.telemetry.sampler import SandboxSampler
from kaiwo_ray.telemetry.sources import SamplerFeed, SamplingSource
from kaiwo_sandbox.cluster.nodes.gpusim import ANNOTATION
from kaiwo_sandbox.testing import RunningSandbox, eventually, start_sandbox

pytestmark = pytest.mark.slow
TIME_FACTOR = 0.1
INTERVAL = 0.25  # telemetry interval of these tests: the tolerance, per GPU
HORIZON = 120.0  # GPU_ACCOUNTING_RECLAIM_HORIZON of these tests
GPUS = 2


class Feed:
    """The sandbox sampler once its client exists (built on the operator's loop), minus the nodes in
    `blocked`: a node whose telemetry actor is gone, as far as the ledger can tell."""

    name = "test-feed"

    def __init__(self) -> None:
        self.inner: Any = None
        self.blocked: set[str] = set()

    async def node_samples(self) -> list[Any]:
        if self.inner is None:
            return []
        return [s for s in await self.inner.node_samples() if s[0] not in self.blocked]


def settings(namespace: str, **overrides: Any) -> AccountingSettings:
    values: dict[str, Any] = {"enabled": True, "namespace": namespace, "interval": INTERVAL,
                              "checkpoint_seconds": 0.5, "stale_after": 1.0, "reclaim_horizon": HORIZON,
                              **overrides}
    return AccountingSettings(**values)


def attach(running: RunningOperator, sb: RunningSandbox, feed: Feed) -> None:
    client = running.run(KubeClient.from_kubeconfig(str(sb.kubeconfig_path)))
    feed.inner = SamplerFeed(SandboxSampler(client))


@pytest.fixture(scope="module")
def sb() -> Iterator[RunningSandbox]:
    with start_sandbox(cluster=True, time_factor=TIME_FACTOR, authorization="RBAC") as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
def operator(sb: RunningSandbox) -> Iterator[tuple[RunningOperator, Feed]]:
    feed, source = Feed(), LateSource()
    options = {"accounting": {"settings": settings("kube-system"), "feed": feed},
               "gpuworkload": {"settings": GpuPreemptionSettings(enabled=True, polling_interval=0.3),
                               "source": source}}
    host = HostSettings(kubeconfig=str(sb.kubeconfig_path), lease=False, controller_options=options)
    with in_process_operator(host, names=["accounting", "gpuworkload"]) as running:
        attach(running, sb, feed)
        client = running.run(KubeClient.from_kubeconfig(str(sb.kubeconfig_path)))
        source.inner = SamplingSource(SandboxSampler(client), Aggregator(stale_after=30))
        yield running, feed


@pytest.fixture(scope="module")
def kube(sb: RunningSandbox) -> Kube:
    return Kube(sb.api_client())


@pytest.fixture(scope="module")
def api(sb: RunningSandbox, operator: Any) -> Iterator[RunningApp]:
    from serve.state import AdminSettings

    running = serve_app(AdminSettings(kubeconfig=str(sb.kubeconfig_path), auth="kubernetes",
                                      ledger_namespace="kube-system", auth_cache_seconds=30.0))
    yield running
    running.stop()


@pytest.fixture(scope="module")
def admin_http(sb: RunningSandbox, api: RunningApp) -> Iterator[httpx.Client]:
    with api.client(headers={"Authorization": f"Bearer {sb.token}"}) as client:
        yield client


def job(name: str, utilization: str, *, sleep: int = 100000, submitter: str = "alice@example.com",
        declared: str = "") -> dict[str, Any]:
    labels = {"kaiwo.silogen.ai/user": declared} if declared else {}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "annotations": {SUBMITTED_BY: submitter}, "labels": labels},
            "spec": {"backoffLimit": 0, "template": {
                "metadata": {"annotations": {ANNOTATION: utilization}},
                "spec": {"restartPolicy": "Never", "containers": [{
                    "name": "main", "image": "busybox", "command": ["sleep", str(sleep)],
                    "resources": {"limits": {"amd.com/gpu": str(GPUS)}, "requests": {"amd.com/gpu": str(GPUS)}}}]}}}}


def namespace(kube: Kube, name: str, annotations: dict[str, str] | None = None) -> str:
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "annotations": annotations or {}}})
    return name


def pod_of(kube: Kube, ns: str, job_name: str) -> dict[str, Any] | None:
    pods = [p for p in kube.items("v1", "Pod", ns) if (p["metadata"].get("labels") or {}).get("job-name") == job_name]
    return pods[0] if pods else None


def pod_phase(kube: Kube, ns: str, job_name: str) -> str:
    return ((pod_of(kube, ns, job_name) or {}).get("status") or {}).get("phase") or ""


class PodTimeline:
    """When the Job's pod was bound, ran and finished, as a 50 ms poll of the API sees them (wall clock):
    the reference the ledger is held to. `start_time` is the pod's `status.startTime`, from which the
    sandbox runs the utilization schedule."""

    def __init__(self, sb: RunningSandbox, ns: str, job_name: str) -> None:
        import threading

        self.sb, self.path = sb, f"/api/v1/namespaces/{ns}/pods?labelSelector=job-name%3D{job_name}"
        self.bound = self.running = self.finished = self.start_time = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        import json
        from datetime import datetime

        while not self._stop.is_set() and not self.finished:
            asked = time.time()
            code, _, body = self.sb.http("GET", self.path)
            now = (asked + time.time()) / 2  # when the API server answered, as near as the client can tell
            pods = json.loads(body).get("items") or [] if code == 200 else []
            status = (pods[0].get("status") or {}) if pods else {}
            if pods and pods[0]["spec"].get("nodeName") and not self.bound:
                self.bound = now
            if status.get("phase") == "Running" and not self.running:
                self.running = now
                self.start_time = datetime.fromisoformat(status["startTime"].replace("Z", "+00:00")).timestamp()
            if status.get("phase") in ("Succeeded", "Failed") and not self.finished:
                self.finished = now
            self._stop.wait(0.05)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def usage_row(http: httpx.Client, key: str, by: str = "workload") -> dict[str, Any] | None:
    response = http.get("/api/v1/usage", params={"groupBy": by, "since": "1h"})
    assert response.status_code == 200, response.text
    return next((r for r in response.json()["items"] if r["key"] == key), None)


def settled(http: httpx.Client, key: str, timeout: float = 30.0) -> dict[str, Any]:
    """The row once two reads a checkpoint apart agree (the workload stopped accruing)."""
    last: list[Any] = [None]

    def check() -> dict[str, Any] | None:
        row = usage_row(http, key)
        same = row is not None and last[0] == row
        last[0] = row
        return row if same else None

    return eventually(check, timeout, f"{key}'s usage to settle", interval=2.5)


def seconds(row: dict[str, Any], field: str) -> float:
    return float(row[f"{field}_gpu_hours"]) * 3600


def test_a_known_schedule_accrues_its_gpu_seconds_within_one_interval(sb: RunningSandbox, kube: Kube,
                                                                      admin_http: httpx.Client) -> None:
    ns = namespace(kube, "acct-schedule")
    timeline = PodTimeline(sb, ns, "sched")
    kube.create(job("sched", "90 for 60s, then 0", sleep=90, declared="bob"), ns)  # 9 s: 6 s busy, 3 s idle
    eventually(lambda: timeline.finished, 60, "the pod to finish", interval=0.2)
    timeline.stop()
    row = settled(admin_http, f"{ns}/Job/sched")
    held = timeline.finished - timeline.bound  # the GPUs were bound to the pod for this long
    busy = timeline.start_time + 60 * TIME_FACTOR - timeline.running  # 90 % from running until 60s after startTime
    tolerance = GPUS * (INTERVAL + 0.05)  # one telemetry interval (+ the reference's poll period) per GPU
    assert held == pytest.approx(90 * TIME_FACTOR, abs=1.0)  # the reference itself is sane
    assert seconds(row, "allocated") == pytest.approx(GPUS * held, abs=tolerance), row
    assert seconds(row, "used") == pytest.approx(GPUS * 0.9 * busy, abs=tolerance), row
    assert seconds(row, "idle") == pytest.approx(GPUS * (held - busy), abs=tolerance), row
    assert seconds(row, "unknown") == 0, row
    by_user = usage_row(admin_http, "alice@example.com", by="user")
    assert by_user is not None and by_user["declared_users"] == ["bob"]  # shown beside, never charged
    assert usage_row(admin_http, "bob", by="user") is None


def test_a_preempted_idle_workload_counts_its_reclaimed_time_with_its_cause(kube: Kube,
                                                                           admin_http: httpx.Client) -> None:
    ns = namespace(kube, "acct-preempt", {PREFIX + "enabled": "true", PREFIX + "grace-period": "3s",
                                          PREFIX + "policy": "Always"})
    kube.create(job("idle", "0"), ns)

    def preempted() -> bool:
        return any((t.get("status") or {}).get("phase") == "Preempted"
                   for t in kube.items("kaiwo.silogen.ai/v1alpha1", "GpuWorkload", ns))

    eventually(preempted, 90, "the idle Job preempted", interval=0.3)
    key = f"{ns}/Job/idle"
    row = eventually(lambda: (r := usage_row(admin_http, key)) and r["reclaimed_gpu_hours"] and r, 30,
                     "the reclaim booked", interval=0.5)
    assert row["reclaimed_gpu_hours"] == {"gpu-preemption": pytest.approx(GPUS * HORIZON / 3600, abs=1e-6)}
    everything = admin_http.get("/api/v1/usage", params={"groupBy": "workload", "since": "1h"}).json()["items"]
    assert seconds(row, "idle") > 0 and seconds(row, "used") == 0, everything
    report = admin_http.get("/api/v1/usage", params={"groupBy": "namespace", "since": "1h"}).json()
    holder = next(h for h in report["top_idle"] if h["name"] == "idle")
    assert holder["preemption_enabled"] and holder["user"] == "alice@example.com"


def test_a_node_whose_telemetry_stops_is_unknown_for_that_time(sb: RunningSandbox, kube: Kube,
                                                              admin_http: httpx.Client,
                                                              operator: tuple[RunningOperator, Feed]) -> None:
    _, feed = operator
    ns = namespace(kube, "acct-dark")
    kube.create(job("dark", "80"), ns)
    eventually(lambda: pod_phase(kube, ns, "dark") == "Running", 60, "the pod running", interval=0.2)
    node = str((pod_of(kube, ns, "dark") or {})["spec"]["nodeName"])
    time.sleep(2.0)  # the workload's known time before the outage (a duration under test, not a wait)
    feed.blocked.add(node)
    dark_from = time.monotonic()
    time.sleep(3.0)  # the outage's length
    feed.blocked.discard(node)
    dark = time.monotonic() - dark_from
    time.sleep(2.0)
    code, _, text = sb.http("DELETE", f"/apis/batch/v1/namespaces/{ns}/jobs/dark",
                            {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"})
    assert code == 200, text
    eventually(lambda: pod_of(kube, ns, "dark") is None, 60, "the pod gone", interval=0.2)
    row = settled(admin_http, f"{ns}/Job/dark")
    unknown = seconds(row, "unknown") / GPUS
    # from the last sample before the outage to the first after it: [dark, dark + 2 intervals]
    assert dark - 0.05 <= unknown <= dark + 2 * INTERVAL + 0.05, row
    known = seconds(row, "allocated") - seconds(row, "unknown")
    assert seconds(row, "used") + 0.8 * seconds(row, "idle") == pytest.approx(0.8 * known, abs=GPUS * INTERVAL)


def test_restart_and_failover_neither_lose_nor_double_count(sb: RunningSandbox, kube: Kube,
                                                            admin_http: httpx.Client) -> None:
    from kaiwo_ray.telemetry.ledger_store import assemble

    namespace(kube, "acct-ledger")
    namespace(kube, "acct-lease")
    ns = namespace(kube, "acct-failover")

    def operator_host() -> tuple[HostSettings, Feed]:
        feed = Feed()
        options = {"accounting": {"settings": settings("acct-ledger"), "feed": feed}}
        return HostSettings(kubeconfig=str(sb.kubeconfig_path), lease=True, lease_namespace="acct-lease",
                            lease_seconds=3.0, renew_every=0.5, controller_options=options), feed

    def stored() -> dict[str, Any] | None:
        code, _, body = sb.http("GET", "/api/v1/namespaces/acct-ledger/configmaps?labelSelector="
                                       "kaiwo.silogen.ai/gpu-ledger")
        assert code == 200
        import json

        ledger, _ = assemble(json.loads(body)["items"])
        job_uid = next((k for k, o in ledger.owners.items() if o.namespace == ns), None)
        if job_uid is None:
            return None
        rows = [v for (_, o, _, _), v in ledger.rows.items() if o == job_uid]
        return {"allocated": sum(r[0] for r in rows), "unknown": sum(r[3] for r in rows)}

    with ExitStack() as leader_a, ExitStack() as leader_b, ExitStack() as leader_c:
        host_a, feed_a = operator_host()
        first = leader_a.enter_context(in_process_operator(host_a, names=["accounting"]))
        attach(first, sb, feed_a)
        host_b, feed_b = operator_host()
        standby = leader_b.enter_context(in_process_operator(host_b, names=["accounting"]))
        attach(standby, sb, feed_b)
        eventually(lambda: first.operator.host("accounting").controller.ticks > 2, 30, "the first leader accounting",
                   interval=0.2)
        timeline = PodTimeline(sb, ns, "long")
        kube.create(job("long", "50", sleep=200), ns)  # 20 s
        eventually(lambda: timeline.running, 60, "the pod running", interval=0.2)
        eventually(lambda: (s := stored()) and s["allocated"] > 2 * GPUS, 30, "the leader accounting", interval=0.3)
        assert standby.operator.host("accounting").controller.ledger is None  # the standby keeps no books
        crashed = first.operator.host("accounting")

        async def crash() -> None:  # as a SIGKILL would leave it: no last checkpoint, the Lease not given back
            assert crashed._election is not None and crashed.controller is not None
            crashed._election.cancel()
            loop = crashed.controller._loop
            assert loop is not None
            loop.cancel()
            await asyncio.gather(crashed._election, loop, return_exceptions=True)

        first.run(crash())  # the standby takes the Lease once it expires, and the books from the last checkpoint
        eventually(lambda: standby.operator.host("accounting").controller.ticks > 0, 30, "the standby leading",
                   interval=0.2)
        time.sleep(3.0)  # the new leader accounting for a while (a duration under test)
        leader_b.close()  # and a clean restart: a new operator, from the stored watermarks
        host_c, feed_c = operator_host()
        restarted = leader_c.enter_context(in_process_operator(host_c, names=["accounting"]))
        attach(restarted, sb, feed_c)
        eventually(lambda: timeline.finished, 60, "the pod to finish", interval=0.2)
        timeline.stop()
        eventually(lambda: restarted.operator.host("accounting").controller.ticks > 8, 30,
                   "the restarted operator accounting", interval=0.2)
        time.sleep(2 * INTERVAL + 1.0)  # past the last sample that holds the pod, and a checkpoint
        totals = stored()
    assert totals is not None
    held = timeline.finished - timeline.bound
    assert held == pytest.approx(200 * TIME_FACTOR, abs=1.0)  # the reference itself is sane
    # every second the pod held its GPUs is in the books once (a handover slower than stale_after as unknown)
    assert totals["allocated"] == pytest.approx(GPUS * held, abs=GPUS * (INTERVAL + 0.05)), totals
    # the crash's gap (from the last checkpoint until the standby's first sample, past the Lease's 3 s)
    # went unobserved, and at most the restart's besides
    assert GPUS * 2.0 < totals["unknown"] < GPUS * 10.0, totals


def test_a_user_sees_only_the_namespaces_they_may_read(sb: RunningSandbox, api: RunningApp,
                                                        admin_http: httpx.Client) -> None:
    eventually(lambda: usage_row(admin_http, "acct-schedule", by="namespace"), 60, "acct-schedule accounted")
    carol_token = sb.grant("carol", "acct-schedule", [
        {"apiGroups": ["kaiwo.silogen.ai"], "resources": ["kaiwojobs", "kaiwoservices"], "verbs": ["list"]}],
        role="reader")
    everything = {r["key"] for r in admin_http.get("/api/v1/usage", params={"groupBy": "namespace"}).json()["items"]}
    assert {"acct-schedule", "acct-preempt"} <= everything
    with api.client(headers={"Authorization": f"Bearer {carol_token}"}) as carol:
        mine = carol.get("/api/v1/usage", params={"groupBy": "namespace"})
        assert mine.status_code == 200 and [r["key"] for r in mine.json()["items"]] == ["acct-schedule"]
        csv = carol.get("/api/v1/usage", params={"groupBy": "workload", "format": "csv"})
        assert csv.headers["content-type"].startswith("text/csv")
        assert [line.split(",")[0] for line in csv.text.splitlines()] == ["workload", "acct-schedule/Job/sched"]
        bad = carol.get("/api/v1/usage", params={"groupBy": "team", "since": "yesterday"})
        assert bad.status_code == 422 and bad.json()["details"]["causes"][0]["field"] == "query.groupBy"
    with api.client(headers={"Authorization": f"Bearer {sb.mint_token('dave')}"}) as dave:
        assert dave.get("/api/v1/usage").json()["items"] == []


def test_metrics_count_gpu_hours_per_namespace_user_queue_and_vendor(admin_http: httpx.Client) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    eventually(lambda: usage_row(admin_http, "acct-schedule", by="namespace"), 60, "acct-schedule accounted")
    text = admin_http.get("/metrics").text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for name in ("allocated", "used", "idle", "unknown", "reclaimed"):
        assert families[f"kaiwo_gpu_hours_{name}"].type == "counter"
    sample = next(s for s in families["kaiwo_gpu_hours_allocated"].samples if s.labels["namespace"] == "acct-schedule")
    assert sample.name == "kaiwo_gpu_hours_allocated_total"
    assert sample.labels == {"namespace": "acct-schedule", "user": "alice@example.com", "queue": "", "vendor": "amd"}
    assert sample.value == pytest.approx(GPUS * 9 / 3600, abs=GPUS * INTERVAL / 3600)
    causes = {s.labels["cause"] for s in families["kaiwo_gpu_hours_reclaimed"].samples}
    assert causes == {"gpu-preemption"}
    from promtool_support import PROMTOOL, assert_scrapeable

    if PROMTOOL is not None:
        assert_scrapeable(text)


def test_kaiwo_status_usage_prints_the_ledger_as_a_table(sb: RunningSandbox, admin_http: httpx.Client,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from kaiwo_ray.cli.kaiwo import main

    row = eventually(lambda: usage_row(admin_http, "acct-schedule", by="namespace"), 60, "acct-schedule accounted")
    monkeypatch.setenv("KUBECONFIG", str(sb.kubeconfig_path))
    capsys.readouterr()
    assert main(["status", "usage", "--by", "namespace", "--since", "1h"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["NAMESPACE", "ALLOCATED", "USED", "IDLE", "UNKNOWN", "RECLAIMED", "USED%", "WORKLOADS",
                                "DECLARED-USERS"]
    mine = next(line.split() for line in lines[1:] if line.startswith("acct-schedule "))
    assert mine[1] == f"{row['allocated_gpu_hours']:.4f}" and mine[7] == "1" and mine[8] == "bob"
    assert main(["status", "usage", "-o", "csv", "--by", "user"]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("user,allocated_gpu_hours,")
    assert main(["status", "usage", "--since", "last week"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--since 'last week'" in err[0]
