"""`kaiwo-ray simulate -o json` in a child process with a deadline, for the tests whose failure mode is
a simulation that never ends (a livelock must fail the test, not hang it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"


def simulate_json(trace: str, queue_config: str, timeout: float = 60) -> dict[str, Any]:
    """The JSON report of `trace` under `queue_config` (file names in tests/simulation/data)."""
    done = subprocess.run([sys.executable, "-m", "hosts.cli.main", "simulate", "--trace", str(DATA / trace),
                           "--queue-config", str(DATA / queue_config), "-o", "json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-2000:]
    report: dict[str, Any] = json.loads(done.stdout)
    return report
