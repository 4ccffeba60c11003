"""/metrics as a real Prometheus reads it: the whole scrape passes `promtool check metrics`, and every
series controller-runtime registers by default is there under its own name and labels."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from admin_support import CONTROLLER_RUNTIME_SERIES, RunningApp, kaiwojob, submit
from e2e_harness import OperatorSandbox
from e2e_support import wait_for
from prometheus_client.parser import text_string_to_metric_families
from promtool_support import assert_scrapeable, needs_promtool

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
