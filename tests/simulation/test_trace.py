"""The trace format (parsing, its one-line errors), synthetic traces and the report's pure parts."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from hosts.cli.main import main
from kaiwo_ray.simulation.generate import GeneratorSettings, generate
from kaiwo_ray.simulation.report import (
    Interval,
    Recording,
    WorkloadRecord,
    allocation_timeline,
    build_report,
    percentile,
)
from kaiwo_ray.simulation.trace import (
    NodeRoom,
    TraceError,
    TraceWorkload,
    check_feasible,
    dump_line,
    parse_trace,
)

GOOD = {"submit": 0, "user": "alice", "queue": "team-a", "gpus": 2, "duration": 60}


def line(**fields: object) -> str:
    return json.dumps({**GOOD, **fields})


def test_a_line_parses_with_defaults_and_its_name_comes_from_the_line_number() -> None:
    entries = parse_trace(["# a comment", "", line(utilization=[{"percent": 90, "seconds": 30}, {"percent": 10}])])
    assert [(e.line, e.name) for e in entries] == [(3, "w-00003")]
    workload = entries[0].workload
    assert (workload.namespace, workload.kind, workload.replicas, workload.gpu_vendor) == ("default", "job", 1, "amd")
    assert workload.utilization_annotation() == "90 for 30s, then 10"
    assert workload.utilization_at(29.9) == 90 and workload.utilization_at(30) == 10
    # 2 GPUs: 30 s at 90 % then 30 s at 10 %
    assert workload.used_gpu_seconds(60) == pytest.approx(2 * (30 * 0.9 + 30 * 0.1))


@pytest.mark.parametrize(("text", "expected"), [
    ("{not json", "line 2: not JSON"),
    ("[1, 2]", "line 2: expected a JSON object"),
    (json.dumps({"submit": 0, "queue": "q", "duration": 1}), "line 2: user: Field required"),
    (line(duration=0), "line 2: duration: Input should be greater than 0"),
    (line(gpus=-1), "line 2: gpus: Input should be greater than or equal to 0"),
    (line(memory="lots"), "line 2: memory: Value error, 'lots' is not a quantity"),
    (line(namespace="Team_A"), "line 2: namespace: Value error, must be a DNS label"),
    (line(utilization=[{"percent": 120}]), "line 2: utilization.0.percent: Input should be less than or equal to 100"),
    (line(colour="red"), "line 2: colour: Extra inputs are not permitted"),
    (line(name="w-00001"), "line 2: name: 'w-00001' in namespace 'default' is already line 1"),
    (line(kind="rayservice"), "line 2: kind: Input should be 'job', 'rayjob' or 'service'"),
    (line(replicas=0), "line 2: replicas: Input should be greater than or equal to 1"),
])
def test_a_bad_line_is_one_message_naming_the_line_and_the_field(text: str, expected: str) -> None:
    with pytest.raises(TraceError) as caught:
        parse_trace([line(), text])
    assert str(caught.value).startswith(expected), str(caught.value)


def test_unknown_queues_priorities_and_impossible_requests_are_refused_by_line() -> None:
    entries = parse_trace([line(), line(name="x", queue="nope")])
    with pytest.raises(TraceError, match=r"^line 2: queue: unknown queue 'nope' \(the configuration has: team-a\)"):
        check_feasible(entries, ["team-a"], {"amd": 8})
    entries = parse_trace([line(gpus=9)])
    with pytest.raises(TraceError, match=r"^line 1: gpus: 9 amd GPUs in one pod, but no node has more than 8"):
        check_feasible(entries, ["team-a"], {"amd": 8, "nvidia": 16})
    entries = parse_trace([line(priority="urgent")])
    with pytest.raises(TraceError, match=r"^line 1: priority: unknown WorkloadPriorityClass 'urgent'"):
        check_feasible(entries, ["team-a"], {"amd": 8}, ["high"])


def test_kinds_count_gpus_per_pod_and_a_rayjob_whose_workers_never_fit_together_is_refused() -> None:
    entries = parse_trace([line(kind="rayjob", replicas=3, gpus=4, utilization=[{"percent": 50}]),
                           line(name="j", replicas=2, gpus=8), line(name="big", kind="rayjob", replicas=3, gpus=5)])
    ray, job, _big = (e.workload for e in entries)
    assert (ray.total_gpus, job.total_gpus) == (12, 16)
    assert ray.used_gpu_seconds(10) == pytest.approx(12 * 10 * 0.5)  # every worker's GPUs
    sizes = {"amd": [8, 8], "nvidia": [8]}
    check_feasible(entries[:2], ["team-a"], {"amd": 8}, gpus_per_node=sizes)  # pods fit one node each
    # three workers of 5 GPUs: one per 8-GPU node, and only two amd nodes; a Ray cluster starts whole
    with pytest.raises(TraceError, match=r"^line 3: replicas: 3 Ray workers of 5 amd GPUs must run together, "
                                         r"but the nodes hold at most 2 such pods"):
        check_feasible(entries, ["team-a"], {"amd": 8}, gpus_per_node=sizes)
    with pytest.raises(TraceError, match=r"^line 1: gpus: 4 amd GPUs in one pod, but no node has more than 2"):
        check_feasible(entries, ["team-a"], {"amd": 2})


def test_a_pod_whose_cpu_or_memory_no_node_has_beside_its_gpus_is_refused() -> None:
    """Kueue would admit such a pod on quota and it would wait for a node for ever."""
    rooms = [NodeRoom({"amd": 8}, Decimal(64), Decimal(2**40)), NodeRoom({}, Decimal(256), Decimal(2**41))]
    fits = parse_trace([line(cpu="64", memory="1Ti", gpus=8), line(name="cpu-only", cpu="200", gpus=0)])
    check_feasible(fits, ["team-a"], {"amd": 8}, rooms=rooms)
    cases: list[tuple[dict[str, object], str]] = [
        ({"cpu": "300"}, r"^line 1: cpu: 300 CPU in one pod, but no node has more than 256$"),
        ({"memory": "3Ti"}, r"^line 1: memory: 3Ti of memory in one pod, but no node has more than 2Ti$"),
        ({"cpu": "100", "gpus": 1}, r"^line 1: cpu: no node has 100 CPU and 1Gi of memory beside 1 amd GPUs$")]
    for fields, expected in cases:
        with pytest.raises(TraceError, match=expected):
            check_feasible(parse_trace([line(**fields)]), ["team-a"], {"amd": 8}, rooms=rooms)


def test_generated_rayjobs_and_replicas_keep_the_trace_they_were_drawn_into() -> None:
    plain = list(generate(GeneratorSettings(workloads=200, seed=4)))
    mixed = list(generate(GeneratorSettings(workloads=200, seed=4, rayjob_share=0.2, replica_counts=(1, 2),
                                            replica_weights=(3.0, 1.0))))
    # the same arrivals, sizes and durations; only the kinds and replica counts differ
    assert [(w.submit, w.gpus, w.duration) for w in mixed] == [(w.submit, w.gpus, w.duration) for w in plain]
    assert {(w.kind, w.replicas) for w in plain} == {("job", 1)}
    rayjobs = sum(1 for w in mixed if w.kind == "rayjob")
    doubled = sum(1 for w in mixed if w.replicas == 2)
    assert 25 <= rayjobs <= 55 and 30 <= doubled <= 70, (rayjobs, doubled)  # 20 % and 25 % of 200
    assert GeneratorSettings(rayjob_share=1.5).problems() == ["--rayjob-share must be between 0 and 1"]
    assert GeneratorSettings(replica_counts=(1, 2)).problems() == [
        "--replica-weights needs one positive weight per --replicas count"]


def test_generated_traces_repeat_per_seed_and_parse_back() -> None:
    settings = GeneratorSettings(workloads=50, queues=("team-a", "team-b"), idle_fraction=0.5, seed=11)
    first = [dump_line(w) for w in generate(settings)]
    assert first == [dump_line(w) for w in generate(settings)]
    assert first != [dump_line(w) for w in generate(GeneratorSettings(workloads=50, seed=12))]
    entries = parse_trace(first)
    assert [e.workload for e in entries] == list(generate(settings))
    submits = [e.workload.submit for e in entries]
    assert submits == sorted(submits)
    assert {e.workload.queue for e in entries} == {"team-a", "team-b"}
    idle = sum(1 for e in entries if e.workload.utilization and e.workload.utilization[0].percent == 0)
    assert 10 <= idle <= 40  # half of 50, give or take


def test_trace_generate_command_is_byte_identical_per_seed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t.jsonl"
    assert main(["trace", "generate", "--workloads", "20", "--seed", "5", "-o", str(out)]) == 0
    assert main(["trace", "generate", "--workloads", "20", "--seed", "5"]) == 0
    assert capsys.readouterr().out == out.read_text()
    assert len(out.read_text().splitlines()) == 20
    assert main(["trace", "generate", "--idle-fraction", "2"]) == 2
    assert capsys.readouterr().err.strip() == "kaiwo-ray trace generate: --idle-fraction must be between 0 and 1"
    assert main(["trace", "generate", "--workloads", "40", "--rayjob-share", "0.5", "--replicas", "1,3",
                 "--replica-weights", "1,1"]) == 0
    kinds = {(w.kind, w.replicas) for w in (e.workload for e in parse_trace(capsys.readouterr().out.splitlines()))}
    assert kinds == {("job", 1), ("job", 3), ("rayjob", 1), ("rayjob", 3)}


def test_percentiles_are_nearest_rank() -> None:
    assert percentile([], 0.5) is None
    assert percentile([5.0, 1.0, 3.0, 2.0], 0.5) == 2.0
    assert percentile([float(v) for v in range(1, 21)], 0.95) == 19.0
    assert percentile([7.0], 0.95) == 7.0


def test_report_counts_waits_allocation_and_what_never_started() -> None:
    entries = parse_trace([line(name="a", utilization=[{"percent": 50}]), line(name="b", submit=10, gpus=4),
                           line(name="c", submit=20, queue="team-b")])
    recording = Recording([
        WorkloadRecord(1, "a", 0.0, [Interval(0.0, 1800.0, "InClusterQueue"), Interval(3600.0, 5400.0)], 5400.0),
        WorkloadRecord(2, "b", 10.0, [Interval(1800.0, 3600.0)], 3600.0),
        WorkloadRecord(3, "c", 20.0),
    ], 7200.0)
    report = build_report(entries, recording, 8)
    overall = report["overall"]
    assert overall["wait_seconds"] == {"p50": 0.0, "p95": 1790.0, "max": 1790.0}
    assert (overall["workloads"], overall["started"], overall["never_started"]) == (3, 2, 1)
    assert overall["preemptions"] == {"InClusterQueue": 1}
    # a: 2 GPUs x 1 h at 50 %; b: 4 GPUs x 0.5 h at 0 %
    assert overall["gpu_hours"] == {"allocated": 4.0, "used": 1.0, "allocated_idle": 3.0, "capacity": 16.0,
                                    "unallocated": 12.0, "idle": 15.0}
    assert overall["allocation"]["peak_gpus"] == 4  # a ends as b starts: never 6 at once
    assert allocation_timeline(list(zip(entries, recording.workloads, strict=True)), 7200.0) == [1.0 + 2.0, 1.0]  # GPUs on average, hour by hour
    assert report["never_started"] == [{"line": 3, "name": "c", "namespace": "default", "queue": "team-b"}]
    assert set(report["queues"]) == {"team-a", "team-b"}


def test_trace_lines_round_trip() -> None:
    workload = TraceWorkload.model_validate({**GOOD, "cpu": 4, "declared_duration": 3600})
    assert json.loads(dump_line(workload)) == {**GOOD, "cpu": "4", "declared_duration": 3600.0, "duration": 60.0,
                                               "submit": 0.0}
