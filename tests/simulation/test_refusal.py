"""A queue configuration that Kueue would refuse: `kaiwo-ray simulate` stops at once with one line
naming the object and Kueue's reason, exit 2 (the sandbox's Kueue refuses it as a real one does;
the operator reports it on the KaiwoQueueConfig; kaiwo_ray/simulation/refusal.py reads that)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hosts.cli.main import main
from kaiwo_ray.simulation.refusal import queue_config_refusal

DATA = Path(__file__).parent / "data"
GOOD = DATA / "cohort.yaml"
REASON = ('admission webhook "vclusterqueue.kb.io" denied the request: '
          'spec.resourceGroups[0].flavors[0].resources[2].lendingLimit: Invalid value: "12": '
          "must be less than or equal to the nominalQuota")


def event(reason: str, message: str, *, kind: str = "KaiwoQueueConfig", name: str = "kaiwo", when: str = "1",
          kind_of_event: str = "Warning") -> dict[str, object]:
    return {"type": kind_of_event, "reason": reason, "message": message, "firstTimestamp": when,
            "involvedObject": {"kind": kind, "name": name}}


def test_the_refusal_is_read_from_the_operators_events() -> None:
    refused = event("KaiwoQueueConfigClusterQueueCreateFailed",
                    f"Failed to create ClusterQueue /team-b: 403 Forbidden: {REASON}", when="2")
    earlier = event("KaiwoQueueConfigClusterQueueCreateFailed",
                    'Failed to create ClusterQueue /team-a: 422 Invalid: ClusterQueue.kueue.x-k8s.io "team-a" is '
                    "invalid: spec: Invalid value: \"object\": borrowingLimit must be nil when cohort is empty")
    assert queue_config_refusal([refused], "kaiwo") == f"Kueue refused ClusterQueue team-b: {REASON}"
    assert queue_config_refusal([refused, earlier], "kaiwo") == (
        'Kueue refused ClusterQueue team-a: ClusterQueue.kueue.x-k8s.io "team-a" is invalid: spec: Invalid value: '
        '"object": borrowingLimit must be nil when cohort is empty')
    # Not refusals: a transient failure, a LocalQueue, another object, a Normal event.
    assert queue_config_refusal([
        event("KaiwoQueueConfigClusterQueueCreateFailed", "Failed to create ClusterQueue /a: 404 NotFound: gone"),
        event("KaiwoQueueConfigLocalQueueCreateFailed", f"Failed to create LocalQueue ns/a: 403 Forbidden: {REASON}"),
        event("KaiwoQueueConfigClusterQueueCreateFailed", f"Failed to create ClusterQueue /a: {REASON}", name="x"),
        event("KaiwoQueueConfigClusterQueueCreated", "Created ClusterQueue /a", kind_of_event="Normal"),
    ], "kaiwo") is None
    assert queue_config_refusal([event("KaiwoQueueConfigInvalidSpec", "invalid spec: bad\n  more")], "kaiwo") == \
        "KaiwoQueueConfig kaiwo: invalid spec: bad more"


@pytest.fixture
def refused_config(tmp_path: Path) -> Path:
    config = tmp_path / "lend-too-much.yaml"
    config.write_text(GOOD.read_text().replace("- {name: amd.com/gpu, nominalQuota: 8}",
                                               "- {name: amd.com/gpu, nominalQuota: 8, lendingLimit: 12}", 1))
    return config


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "trace.jsonl"
    path.write_text('{"submit": 0, "user": "u", "queue": "team-a", "gpus": 1, "duration": 5}\n')
    return path


def test_simulate_stops_at_once_with_kueues_reason(refused_config: Path, trace: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Kueue's reason, not "did not get ready within 600 simulated seconds" after waiting for it."""
    code = main(["simulate", "--trace", str(trace), "--queue-config", str(refused_config)])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    assert captured.err == f"kaiwo-ray simulate: --queue-config: Kueue refused ClusterQueue team-a: {REASON}\n"


def test_compare_names_the_refused_file(refused_config: Path, trace: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", "--trace", str(trace), "--compare", str(GOOD), str(refused_config), "-o", "json"])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert captured.err == (f"kaiwo-ray simulate: {refused_config}: --queue-config: Kueue refused ClusterQueue "
                            f"team-a: {REASON}\n")
