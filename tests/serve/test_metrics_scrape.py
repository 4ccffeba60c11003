"""/metrics as a real Prometheus reads it: the whole scrape passes `promtool check metrics`, and every
series controller-runtime registers by default is there under its own name and labels."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from admin_support import RunningApp, kaiwojob, submit
from e2e_harness import OperatorSandbox
from e2e_support import wait_for
from prometheus_client.parser import text_string_to_metric_families
from promtool_support import assert_scrapeable, needs_promtool

# controller-runtime v0.24's default registry (reference/cluster-mechanics.md 4.1), series by series,
# with their labels; the webhook series exist only where a webhook server runs (none here).
CONTROLLER_RUNTIME_SERIES: dict[str, set[str]] = {
    "controller_runtime_reconcile_total": {"controller", "result"},
    "controller_runtime_reconcile_errors_total": {"controller"},
    "controller_runtime_terminal_reconcile_errors_total": {"controller"},
    "controller_runtime_reconcile_panics_total": {"controller"},
    "controller_runtime_reconcile_timeouts_total": {"controller"},
    "controller_runtime_reconcile_time_seconds_bucket": {"controller", "le"},
    "controller_runtime_max_concurrent_reconciles": {"controller"},
    "controller_runtime_active_workers": {"controller"},
    "workqueue_depth": {"name", "controller", "priority"},
    "workqueue_adds_total": {"name", "controller"},
    "workqueue_queue_duration_seconds_bucket": {"name", "controller", "le"},
    "workqueue_work_duration_seconds_bucket": {"name", "controller", "le"},
    "workqueue_unfinished_work_seconds": {"name", "controller"},
    "workqueue_longest_running_processor_seconds": {"name", "controller"},
    "workqueue_retries_total": {"name", "controller"},
    "rest_client_requests_total": {"code", "method", "host"},
    "leader_election_master_status": {"name"},
    "certwatcher_read_certificate_total": set(),
    "certwatcher_read_certificate_errors_total": set(),
    "process_cpu_seconds_total": set(),
    "process_open_fds": set(),
    "process_max_fds": set(),
    "process_virtual_memory_bytes": set(),
    "process_virtual_memory_max_bytes": set(),
    "process_resident_memory_bytes": set(),
    "process_start_time_seconds": set(),
    "process_network_receive_bytes_total": set(),
    "process_network_transmit_bytes_total": set(),
}
CONTROLLERS = ("kaiwoconfig", "kaiwoqueueconfig", "kaiwojob", "kaiwoservice")


@pytest.fixture(scope="module")
def scraped(env: OperatorSandbox, api: RunningApp) -> None:
    """A KaiwoJob reconciled, so every controller has counted work."""
    http = api.client()
    env.sb.http("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                "metadata": {"name": "scrape"}})
    assert submit(http, kaiwojob("scraped", "scrape")).status_code == 201

    wait_for(lambda: 'controller_runtime_reconcile_total{controller="kaiwojob",result="success"} 0'
             not in http.get("/metrics").text, 30, "a kaiwojob reconcile counted")
    http.close()


@needs_promtool
def test_every_family_is_written_once_and_promtool_accepts_the_scrape(http: httpx.Client, scraped: None) -> None:
    text = http.get("/metrics").text
    assert text.count("# HELP controller_runtime_reconcile_time_seconds ") == 1
    assert_scrapeable(text)


def test_every_controller_runtime_series_is_present(http: httpx.Client, scraped: None) -> None:
    text = http.get("/metrics").text
    samples: dict[str, list[dict[str, Any]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append(sample.labels)
    for name, labels in CONTROLLER_RUNTIME_SERIES.items():
        assert name in samples, name
        assert all(set(found) == labels for found in samples[name]), (name, samples[name][:2])
    for name in ("controller_runtime_max_concurrent_reconciles", "controller_runtime_active_workers",
                 "workqueue_longest_running_processor_seconds"):
        assert {s["controller"] for s in samples[name]} >= set(CONTROLLERS), name
    assert {s["name"] for s in samples["leader_election_master_status"]} >= {f"kaiwo-ray-{c}" for c in CONTROLLERS}
    assert any(s["method"] == "POST" and s["code"] == "201" and s["host"].startswith("127.0.0.1:")
               for s in samples["rest_client_requests_total"])
