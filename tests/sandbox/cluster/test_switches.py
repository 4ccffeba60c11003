"""Each simulated controller can be switched on and off by name (`start_cluster(enabled=...)`,
`start_sandbox(cluster=[...])`, `kaiwo-ray sandbox --without`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kaiwo_sandbox.cluster import CONTROLLERS, select_controllers
from kaiwo_sandbox.contracts import JsonObj

QUEUED_JOB: JsonObj = {
    "apiVersion": "batch/v1", "kind": "Job",
    "metadata": {"name": "queued", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
    "spec": {"template": {"spec": {"restartPolicy": "Never",
                                   "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "1"]}]}}},
}


def test_unknown_controller_name_is_an_error_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown simulated controller\(s\) schedular; known: volume-binder, "):
        select_controllers(["kubelet", "schedular"])


def test_selected_controllers_start_in_dependency_order() -> None:
    assert select_controllers(["kueue", "kubelet", "scheduler"]) == ["scheduler", "kubelet", "kueue"]
    assert select_controllers(CONTROLLERS) == list(CONTROLLERS)


def test_only_the_named_controllers_run(sandbox_factory: Callable[..., Any],
                                        clients_factory: Callable[..., Any], wait_for: Callable[..., Any]) -> None:
    sandbox = sandbox_factory(cluster=["scheduler"])
    assert [c.name for c in sandbox.cluster.controllers] == ["scheduler"]
    c = clients_factory(sandbox)
    c.core.create_namespaced_pod("default", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    wait_for(lambda: c.core.read_namespaced_pod("p", "default").spec.node_name, message="pod bound")


@pytest.mark.parametrize("with_kueue", [True, False])
def test_kueue_off_means_no_suspending_webhook(with_kueue: bool, sandbox_factory: Callable[..., Any],
                                               clients_factory: Callable[..., Any]) -> None:
    # The webhook acts synchronously on create, so the answer to the create call shows it.
    names = [n for n in CONTROLLERS if with_kueue or n != "kueue"]
    c = clients_factory(sandbox_factory(cluster=names))
    created = c.batch.create_namespaced_job("default", QUEUED_JOB)
    assert bool(created.spec.suspend) is with_kueue
