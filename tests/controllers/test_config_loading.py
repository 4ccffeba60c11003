"""How the workload controllers read KaiwoConfig `kaiwo` from their cache on every reconcile."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from kaiwo_ray.controllers.config import load_config, load_queue_config


def config(rv: str, spec: dict[str, Any], kind: str = "KaiwoConfig") -> dict[str, Any]:
    return {"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": kind,
            "metadata": {"name": "kaiwo", "uid": f"{kind}-uid", "resourceVersion": rv}, "spec": spec}


def test_an_invalid_config_means_defaults_and_one_warning_per_version(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="kaiwo_ray.controllers.workloads")
    bad = config("11", {"notAField": True})
    for _ in range(3):  # three reconciles of one version: one warning, not one per reconcile
        assert load_config([bad]) == load_config([])
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "KaiwoConfig kaiwo is invalid, using defaults" in warnings[0]
    assert "notAField" in warnings[0]
    load_config([config("12", {"notAField": False})])  # a new version that is still invalid: said again
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 2
    queue = config("13", {"clusterQueues": "not a list"}, kind="KaiwoQueueConfig")
    assert load_queue_config([queue]) is None and load_queue_config([queue]) is None
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 3


def test_a_valid_config_is_read_and_the_defaults_are_built_once() -> None:
    assert load_config([]) is load_config([])  # shared, read-only: built once
    custom = load_config([config("21", {"defaultClusterQueueName": "research"})])
    assert custom.default_cluster_queue_name == "research"
    assert load_config([]).default_cluster_queue_name != "research"
