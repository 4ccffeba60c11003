"""The aggregator core: liveness (unknown is never idle), per-pod readings, bounded history, and the
metrics it exports under the exporters' names."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families
from promtool_support import assert_scrapeable, needs_promtool

from kaiwo_ray.telemetry.aggregator import Aggregator
from kaiwo_ray.telemetry.exposition import render
from kaiwo_ray.telemetry.history import GpuHistory, HistorySettings
from kaiwo_ray.telemetry.model import GpuSample, NodeSample, PodRef

T0 = 1_800_000_000.0
TRAIN = PodRef(namespace="ml", pod="train-0", container="main")


def _node(node: str, at: float, util: float | None, *, vendor: str = "amd", pods: tuple[PodRef, ...] = (TRAIN,),
          error: str = "") -> NodeSample:
    gpus = (GpuSample(uuid=f"{node}-g0", index=0, vendor=vendor, model="M", utilization=util,
                      memory_used_bytes=2 * 1024 ** 3, memory_total_bytes=8 * 1024 ** 3, power_watts=300.0,
                      temperature_c=50.0, pods=pods, error=error),
            GpuSample(uuid=f"{node}-g1", index=1, vendor=vendor, utilization=0.0))
    return NodeSample(node=node, timestamp=at, backend=vendor, gpus=gpus)


def test_measured_zero_is_idle_but_stale_or_forgotten_nodes_are_unknown() -> None:
    agg = Aggregator(stale_after=5.0)
    agg.ingest(_node("n1", T0, 0.0), received=T0)
    (reading,) = agg.pod_readings("ml", "train-0", now=T0 + 1)
    assert reading.utilization == 0.0 and reading.gpu_id == "0" and reading.container == "main"
    assert agg.pod_readings("ml", "train-0", now=T0 + 6)[0].utilization is None  # no sample for 6 s
    agg.ingest(_node("n1", T0 + 6, 40.0), received=T0 + 6)
    assert agg.pod_readings("ml", "train-0", now=T0 + 7)[0].utilization == 40.0
    agg.forget_node("n1")  # its Ray node died
    assert agg.pod_readings("ml", "train-0", now=T0 + 7)[0].utilization is None
    assert agg.pod_readings("ml", "nobody", now=T0 + 7) == []  # no source knows this pod


def test_unreadable_device_or_node_is_unknown() -> None:
    agg = Aggregator()
    agg.ingest(_node("n1", T0, None, error="GPU lost"), received=T0)
    assert agg.pod_readings("ml", "train-0", now=T0)[0].utilization is None
    agg.ingest(NodeSample(node="n2", timestamp=T0, backend="amd", error="driver gone"), received=T0)
    assert not agg.is_live("n2", T0) and agg.is_live("n1", T0)


def test_late_samples_are_ignored_and_uid_lookup_works() -> None:
    agg = Aggregator()
    by_uid = (PodRef(uid="1234"),)
    agg.ingest(_node("n1", T0 + 10, 70.0, pods=by_uid), received=T0 + 10)
    agg.ingest(_node("n1", T0 + 5, 0.0, pods=by_uid), received=T0 + 10)  # a backlog push
    (reading,) = agg.pod_readings("ml", "train-0", uid="1234", now=T0 + 10)
    assert reading.utilization == 70.0


def test_forget_nodes_except_the_live_set() -> None:
    agg = Aggregator()
    for name in ("a", "b", "c"):
        agg.ingest(_node(name, T0, 1.0), received=T0)
    assert agg.forget_nodes_except(["a", "c"]) == ["b"]
    assert agg.live_nodes(T0) == ["a", "c"]


def test_history_is_bounded_fine_then_coarse() -> None:
    history = GpuHistory(HistorySettings(fine_seconds=60, bucket_seconds=60, coarse_seconds=600))
    for second in range(3600):  # an hour at 1 Hz
        history.add(T0 + second, float(second % 2) * 100 if second % 7 else None)
    assert len(history.fine) == 61 and history.fine[0][0] == T0 + 3600 - 1 - 60
    assert len(history.coarse) == 10  # 10 one-minute buckets kept of 60
    _start, mean, low, high, count = history.summary()[-1]
    assert low == 0 and high == 100 and 0 < mean < 100 and count < 60  # unknowns not averaged in
    history.add(T0, 5.0)  # out of order: ignored
    assert history.fine[-1][0] == T0 + 3599


def test_metrics_use_the_exporters_names_and_leave_out_unknowns() -> None:
    agg = Aggregator()
    agg.ingest(_node("amd-1", T0, 93.0), received=T0)
    agg.ingest(_node("nv-1", T0, 12.0, vendor="nvidia"), received=T0)
    agg.ingest(_node("gone", T0, 50.0), received=T0)
    agg.forget_node("gone")
    families = {f.name: f.samples for f in text_string_to_metric_families(render(agg, now=T0 + 1).decode())}
    amd = [s for s in families["gpu_gfx_activity"] if s.labels["pod"] == "train-0"]
    assert [(s.labels["hostname"], s.labels["namespace"], s.labels["container"], s.labels["gpu_id"], s.value)
            for s in amd] == [("amd-1", "ml", "main", "0", 93.0)]
    nv = [s for s in families["DCGM_FI_DEV_GPU_UTIL"] if s.labels["pod"] == "train-0"]
    assert [(s.labels["Hostname"], s.labels["UUID"], s.labels["gpu"], s.value) for s in nv] == [
        ("nv-1", "nv-1-g0", "0", 12.0)]
    neutral = {(s.labels["node"], s.labels["gpu_id"]): s.value for s in families["kaiwo_gpu_utilization_percent"]}
    assert neutral == {("amd-1", "0"): 93.0, ("amd-1", "1"): 0.0, ("nv-1", "0"): 12.0, ("nv-1", "1"): 0.0}
    up = {s.labels["node"]: s.value for s in families["kaiwo_gpu_telemetry_up"]}
    assert up == {"amd-1": 1.0, "nv-1": 1.0, "gone": 0.0}
    assert families["kaiwo_gpu_memory_used_bytes"][0].value == 2 * 1024 ** 3


@needs_promtool
def test_the_aggregators_exposition_passes_promtool() -> None:
    agg = Aggregator()
    agg.ingest(_node("amd-1", T0, 93.0), received=T0)
    agg.ingest(_node("nv-1", T0, 12.0, vendor="nvidia"), received=T0)
    assert_scrapeable(render(agg, now=T0 + 1).decode())
