"""API-model throughput: how much of the renderer's budget parsing and dumping a KaiwoJob costs.

Workload: examples/gpu-job.yaml (the 8-GPU KaiwoJob with S3 + Hugging Face downloads that
benchmarks/render.py renders), parsed from JSON bytes. The renderer's target is >= 2,000 renders/s (500 us per render); parsing should use at most
a fifth of that, so the target here is >= 10,000 parses/s. Also reported: the dump back to wire JSON,
the error path (a bad manifest becoming a ManifestError) and CRD generation.
Run: `.venv/bin/python benchmarks/api_models.py` (about 10 s).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import yaml

from kaiwo_ray.api.crd import all_crds
from kaiwo_ray.api.errors import ManifestError
from kaiwo_ray.api.load import parse_object
from kaiwo_ray.api.workloads import KaiwoJob

MEASURE_SECONDS = 2.0
GPU_JOB = Path(__file__).resolve().parent.parent / "examples" / "gpu-job.yaml"
DOCUMENT: dict[str, Any] = yaml.safe_load(GPU_JOB.read_text())
DOCUMENT["metadata"]["uid"] = "U1"
MANIFEST = orjson.dumps(DOCUMENT)
BAD = {**DOCUMENT, "spec": {**DOCUMENT["spec"], "gpus": -1, "gpusPerReplika": 2}}


def rate(operation: Callable[[], object]) -> float:
    """Operations per second over MEASURE_SECONDS of wall time (after a warm-up)."""
    for _ in range(200):
        operation()
    count, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < MEASURE_SECONDS:
        for _ in range(100):
            operation()
        count += 100
    return count / elapsed


def bad_manifest() -> None:
    try:
        parse_object(BAD)
    except ManifestError:
        return
    raise AssertionError("the bad manifest parsed")


def main() -> None:
    job = KaiwoJob.model_validate_json(MANIFEST)
    figures = [
        ("KaiwoJob.model_validate_json(bytes)", rate(lambda: KaiwoJob.model_validate_json(MANIFEST)), 10_000),
        (
            "KaiwoJob.model_validate(orjson.loads(bytes))",
            rate(lambda: KaiwoJob.model_validate(orjson.loads(MANIFEST))),
            10_000,
        ),
        ("parse_object(dict)", rate(lambda: parse_object(DOCUMENT)), 10_000),
        ("KaiwoJob.to_wire()", rate(job.to_wire), 10_000),
        ("bad manifest -> ManifestError", rate(bad_manifest), 1_000),
        ("all_crds()", rate(all_crds), 5),
    ]
    for label, per_second, target in figures:
        verdict = "ok" if per_second >= target else "BELOW TARGET"
        print(
            f"{label:46s} {per_second:12,.0f} ops/s  ({1e6 / per_second:9.1f} us/op; target >= {target:,} ops/s) {verdict}"
        )


if __name__ == "__main__":
    main()
