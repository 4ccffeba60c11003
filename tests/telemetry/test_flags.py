"""`kaiwo-ray up|dev` feature switches: flags override the upstream environment, bad values are one
clear line, and opt-in controllers start only when their feature is on."""

from __future__ import annotations

import argparse

import pytest

from hosts.cli import telemetry_flags
from kaiwo_ray.controllers.manager import HostSettings, default_controller_names


def _parse(argv: list[str], *, dev: bool = False) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    telemetry_flags.add_arguments(parser, dev=dev)
    return parser.parse_args(argv)


def test_up_follows_the_environment_and_flags_override_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESOURCE_MONITORING_ENABLED", "true")
    monkeypatch.setenv("RESOURCE_MONITORING_POLLING_INTERVAL", "30s")
    monkeypatch.delenv("GPU_PREEMPTION_ENABLED", raising=False)
    settings = HostSettings()
    assert telemetry_flags.configure(_parse([]), settings) is None
    monitor = settings.controller_options["resourcemonitor"]["settings"]
    assert monitor.enabled and monitor.polling_interval == 30 and monitor.endpoint == ""
    assert not settings.controller_options["gpuworkload"]["settings"].enabled
    assert default_controller_names(settings) == ["kaiwoconfig", "kaiwoqueueconfig", "aimnamespaceconfig",
                                                  "kaiwojob", "kaiwoservice", "resourcemonitor"]
    settings = HostSettings()
    args = _parse(["--no-resource-monitoring", "--gpu-preemption", "--gpu-preemption-interval", "5s",
                   "--gpu-preemption-endpoint", "http://exporter:5000/metrics"])
    assert telemetry_flags.configure(args, settings) is None
    preemption = settings.controller_options["gpuworkload"]["settings"]
    assert (preemption.enabled, preemption.polling_interval, preemption.endpoint) == (
        True, 5, "http://exporter:5000/metrics")
    assert "resourcemonitor" not in default_controller_names(settings)
    assert "gpuworkload" in default_controller_names(settings)


def test_dev_turns_both_features_on() -> None:
    settings = HostSettings()
    assert telemetry_flags.configure(_parse([], dev=True), settings) is None
    assert {"resourcemonitor", "gpuworkload"} <= set(default_controller_names(settings))


@pytest.mark.parametrize("argv, message", [
    (["--resource-monitoring-interval", "often"], "RESOURCE_MONITORING_POLLING_INTERVAL='often'"),
    (["--gpu-preemption-interval", "0s"], "must be greater than 0"),
    (["--resource-monitoring-endpoint", "exporter:5000"], "must be an http(s) URL"),
    (["--telemetry-interval", "0"], "--telemetry-interval must be greater than 0"),
])
def test_bad_values_are_one_clear_line(argv: list[str], message: str) -> None:
    problem = telemetry_flags.configure(_parse(argv), HostSettings())
    assert problem is not None and message in problem and "\n" not in problem
