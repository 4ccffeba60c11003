"""`kaiwo-ray sandbox` arguments: which simulated controllers run."""

from __future__ import annotations

import argparse

import pytest

from hosts.cli import sandbox as sandbox_cli
from kaiwo_sandbox.cluster import CONTROLLERS, OPT_IN


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    sandbox_cli.add_arguments(parser)
    return parser.parse_args(["--kubeconfig", "kc", *argv])


def test_all_controllers_by_default() -> None:
    assert sandbox_cli._cluster(parse()) is True


def test_no_cluster_is_api_server_only() -> None:
    assert sandbox_cli._cluster(parse("--no-cluster")) is False


def test_without_leaves_the_named_controllers_off_and_the_opt_in_ones_too() -> None:
    assert OPT_IN and set(CONTROLLERS) > OPT_IN
    assert sandbox_cli._cluster(parse("--without", "kuberay", "--without", "appwrapper")) == [
        n for n in CONTROLLERS if n not in {"kuberay", "appwrapper"} | OPT_IN]


def test_with_adds_an_opt_in_controller_to_the_rest() -> None:
    assert sandbox_cli._cluster(parse("--without", "kuberay", "--with", "cert-manager")) == [
        n for n in CONTROLLERS if n != "kuberay"]


def test_without_an_unknown_controller_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse("--without", "schedular")
    assert exit_info.value.code == 2
    assert "invalid choice: 'schedular'" in capsys.readouterr().err
