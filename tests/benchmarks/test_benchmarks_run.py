"""The quick benchmarks still run end to end at a tiny size (they are not in `make test` otherwise, and
the sandbox's move to kaiwo_sandbox/ broke benchmarks/cli.py unnoticed). Figures are not judged here."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed (make tools)")
def test_the_cli_benchmark_runs() -> None:
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "cli.py"), "--scale", "20", "--repeats", "1"],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "list_ratio:" in done.stdout, done.stdout


@pytest.mark.slow
def test_the_sandbox_rbac_benchmark_runs() -> None:
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "sandbox_rbac.py"), "--requests", "50"],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "RBAC decision" in done.stdout, done.stdout


@pytest.mark.slow
def test_the_sandbox_http_benchmark_runs() -> None:
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "sandbox_http.py"), "--requests", "30"],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    for line in ("server_cpu_per_request_bare:", "server_cpu_per_request_aiohttp_app_tls:",
                 "sandbox_cpu_per_request_create_a_configmap:"):
        assert line in done.stdout, done.stdout


@pytest.mark.slow
def test_the_timings_benchmark_runs() -> None:
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "timings.py"), "--repeats", "1"],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    for line in ("runner_slice_overrun_worst:", "event_emit_six_worst:", "event_backlog_span_vs_one_sender_worst:",
                 "transport_malformed_exchange_worst:"):
        assert line in done.stdout, done.stdout


@pytest.mark.slow
def test_the_admin_api_aggregator_comparison_runs() -> None:
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "admin_api.py"), "--scale", "30",
                           "--aggregated-only", "--no-serve", "--no-browser", "--rate", "10", "--seconds", "3"],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    for line in ("aggregator added latency p50 (vs direct TLS):", "aggregator / direct (TLS) p99:",
                 "every WorkloadSummary (50 items, pages of 1000), through the aggregator median:",
                 "failed requests: 0"):
        assert line in done.stdout, done.stdout


@pytest.mark.slow
def test_the_accounting_benchmark_runs() -> None:
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "accounting.py"), "--nodes", "20", "--ticks", "2",
                           "--workloads", "200", "--users", "10", "--days", "3", "--repeats", "3"],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    for line in ("ledger CPU, 20 nodes x 8 GPUs at 1 Hz:", "usage query by user, p99:",
                 "ledger on disk per day of history"):
        assert line in done.stdout, done.stdout
