"""`kaiwo submit --wait` shows where a pending workload stands in its queue (Kueue's admission order),
against the sandbox's simulated Kueue: holders take every GPU node's 8 GPUs (the default queue's
whole quota), and one more 8-GPU job waits behind them."""

from __future__ import annotations

import json
import re
from pathlib import Path

from e2e_harness import OperatorSandbox
from test_commands import Run, job, write


def cluster_gpus(cluster: OperatorSandbox) -> int:
    status, _, body = cluster.sb.http("GET", "/api/v1/nodes")
    assert status == 200, body
    return sum(int((n["status"].get("allocatable") or {}).get("amd.com/gpu", 0)) for n in json.loads(body)["items"])


def test_wait_shows_the_queue_position(kaiwo: Run, cluster: OperatorSandbox, tmp_path: Path) -> None:
    status, _, body = cluster.sb.http("POST", "/api/v1/namespaces", {"metadata": {"name": "ns-queue-position"}})
    assert status in (201, 409), body
    total = cluster_gpus(cluster)
    holders = [f"holder-{i}" for i in range(total // 8)]  # whole 8-GPU nodes: the queue's quota, all of it
    assert holders
    try:
        for name in holders:
            manifest = job(name, "ns-queue-position", entrypoint="sleep infinity", gpus=8)
            assert kaiwo("submit", "-f", write(tmp_path, manifest, f"{name}.yaml"))[0] == 0
        waiter = write(tmp_path, job("waiter", "ns-queue-position", entrypoint="sleep infinity", gpus=8), "w.yaml")
        code, _, err = kaiwo("submit", "-f", waiter, "--wait", "--timeout", "8")
        assert code == 1 and "job/waiter is still PENDING after 8 s" in err, err
        positions = [line for line in err.splitlines() if "queue position" in line]
        assert positions and positions[-1].startswith("PENDING"), err
        assert re.search(r"queue position [1-9]\d* of [1-9]\d*", positions[-1]), positions
    finally:
        for name in ("waiter", *holders):
            kaiwo("delete", f"job/{name}", "-n", "ns-queue-position", "--wait")
