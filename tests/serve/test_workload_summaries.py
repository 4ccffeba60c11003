"""WorkloadSummary as an object, a Table row and watch events (serve/workload_summaries.py), pure."""

from __future__ import annotations

from datetime import UTC, datetime

from kaiwo_ray.views.queues import ClusterQueueView, PendingWorkload
from kaiwo_ray.views.workloads import WorkloadSummary
from serve import workload_summaries as ws

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
WAITING = PendingWorkload(position=2, local_queue_position=1, namespace="team-a", name="job-big-1", local_queue="kaiwo",
                          kaiwo_workload="big", message="couldn't assign flavors: insufficient unused quota")


def _row(name: str, **fields: object) -> WorkloadSummary:
    return WorkloadSummary(kind="KaiwoJob", namespace="team-a", name=name, uid=f"uid-{name}", user="ann",
                           queue="kaiwo", created="2026-01-01T11:00:00Z", **fields)


def test_a_waiting_workload_shows_its_place_and_why() -> None:
    index = ws.queue_index([ClusterQueueView(name="kaiwo", pending=[WAITING])])
    obj = ws.to_object(_row("big", phase="PENDING", gpus=8), "41", index)
    assert obj["metadata"] == {"name": "job.big", "namespace": "team-a", "uid": "uid-big", "resourceVersion": "41",
                               "creationTimestamp": "2026-01-01T11:00:00Z"}
    assert (obj["phase"], obj["queuePosition"], obj["whyPending"], obj["estimatedStart"]) == (
        "PENDING", 2, "couldn't assign flavors: insufficient unused quota", None)
    running = ws.to_object(_row("small", phase="RUNNING"), "7", index)
    assert (running["queuePosition"], running["whyPending"]) == (None, None)
    failing = ws.to_object(_row("bad", phase="FAILED", message="image not found"), "8", index)
    assert failing["whyPending"] == "image not found"  # the workload's own problem, when Kueue says nothing


def test_names_say_the_kind() -> None:
    assert ws.summary_name("KaiwoService", "llm") == "service.llm"
    assert ws.parse_name("service.llm.v2") == ("KaiwoService", "llm.v2")
    assert ws.parse_name("job.") is None and ws.parse_name("pod.x") is None and ws.parse_name("big") is None


def test_the_table_follows_kubectls_conventions() -> None:
    obj = ws.to_object(_row("big", phase="PENDING"), "41", {("team-a", "big"): WAITING})
    table = ws.to_table([obj], {"resourceVersion": "41"}, "Metadata", NOW)
    assert [c["name"] for c in table["columnDefinitions"] if c["priority"] == 0] == [
        "Name", "Phase", "Queue", "Position", "Why-Pending", "Age"]
    assert table["columnDefinitions"][0]["format"] == "name"
    row = table["rows"][0]
    assert row["cells"][:6] == ["job.big", "PENDING", "kaiwo", 2, WAITING.message, "60m"]
    assert row["object"] == {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": obj["metadata"]}
    assert "object" not in ws.to_table([obj], {}, "None", NOW)["rows"][0]
    assert ws.wants_table("application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
    assert not ws.wants_table("application/json")


def test_watch_events_are_the_differences() -> None:
    a, b = ws.to_object(_row("a"), "1", {}), ws.to_object(_row("b"), "2", {})
    b2 = ws.to_object(_row("b", phase="RUNNING"), "3", {})
    c = ws.to_object(_row("c"), "4", {})
    events = ws.watch_events({"team-a/job.a": a, "team-a/job.b": b}, {"team-a/job.b": b2, "team-a/job.c": c})
    assert [(kind, obj["metadata"]["name"]) for kind, obj in events] == [
        ("DELETED", "job.a"), ("MODIFIED", "job.b"), ("ADDED", "job.c")]
    assert ws.watch_events({"team-a/job.a": a}, {"team-a/job.a": a}) == []
