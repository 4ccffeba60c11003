"""No write without drift; frozen fields are pinned to live values on update."""

from __future__ import annotations

import copy
from typing import Any

from kaiwo_ray.reconcile.drift import is_subset, needs_write, update_body


def job(image: str = "busybox", labels: dict[str, str] | None = None, suspend: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns", "labels": labels or {"a": "1"}},
        "spec": {"suspend": suspend, "ttlSecondsAfterFinished": 3600, "template": {"spec": {"containers": [
            {"name": "c", "image": image, "resources": {"requests": {"cpu": "2", "memory": "16Gi"}}}]}}},
    }


def test_subset_ignores_server_added_fields_and_normalizes_quantities() -> None:
    desired = job()
    live = copy.deepcopy(desired)
    live["metadata"]["uid"] = "u"
    live["spec"]["template"]["spec"]["containers"][0]["terminationMessagePath"] = "/dev/termination-log"
    live["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = 2
    live["status"] = {"active": 1}
    assert is_subset(desired, live)
    assert not needs_write(desired, live)


def test_subset_detects_changes_and_missing_fields() -> None:
    assert not is_subset(job(image="a"), job(image="b"))
    assert not is_subset({"x": {"y": 1}}, {"x": {}})
    assert not is_subset({"env": [{"name": "A"}]}, {"env": [{"name": "A"}, {"name": "B"}]})
    assert not is_subset({"value": "2"}, {"value": 2}), "plain strings are not quantities"


def test_update_pins_frozen_job_fields_and_reports_them() -> None:
    live = job(image="old", suspend=False)  # Kueue admitted it
    desired = job(image="new", labels={"a": "2"}, suspend=True)
    body, frozen = update_body(desired, live)
    assert body["spec"]["suspend"] is False, "never take spec.suspend back from Kueue"
    assert body["spec"]["template"]["spec"]["containers"][0]["image"] == "old"
    assert body["metadata"]["labels"] == {"a": "2"}, "mutable metadata propagates"
    assert frozen == ["spec.template", "spec.suspend"]
    assert desired["spec"]["suspend"] is True and desired["spec"]["template"]["spec"]["containers"][0]["image"] == "new"
    assert needs_write(body, live)


def test_create_sends_desired_unchanged() -> None:
    desired = job()
    assert update_body(desired, None) == (desired, [])
    assert needs_write(desired, None)


def test_deployment_spec_changes_propagate_but_selector_is_pinned() -> None:
    live = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}}}}
    desired = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
               "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "other"}}}}
    body, frozen = update_body(desired, live)
    assert body["spec"]["replicas"] == 3
    assert body["spec"]["selector"] == {"matchLabels": {"app": "d"}}
    assert frozen == ["spec.selector"]


def test_drifted_agrees_with_needs_write_of_the_update_body() -> None:
    """`drifted` is the shortcut the reconciler takes before building an update body: on every case
    (frozen fields changed or not, other fields changed or not, a live object or none) it answers
    what `needs_write(update_body(...))` answers."""
    from kaiwo_ray.reconcile.drift import drifted

    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "labels": {"a": "1"}},
                  "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "1"}}}, "status": {"ready": 1}}
    moved = copy.deepcopy(deployment)
    moved["spec"]["selector"] = {"matchLabels": {"a": "2"}}
    scaled = copy.deepcopy(deployment)
    scaled["spec"]["replicas"] = 3
    cases = [(job(), None), (job(), job()), (job(image="new"), job(image="old")),
             (job(suspend=True), job(suspend=False)), (job(labels={"a": "2"}), job()),
             (job(image="new", labels={"a": "2"}), job(image="old", suspend=False)),
             (deployment, copy.deepcopy(deployment)), (moved, deployment), (scaled, deployment),
             ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}},
              {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "w"}})]
    answers = []
    for desired, live in cases:
        before = copy.deepcopy(desired)
        answers.append(drifted(desired, live))
        assert answers[-1] == needs_write(update_body(desired, live)[0], live), (desired, live)
        assert desired == before, "drifted must not change what it is given"
    assert answers == [True, False, False, False, True, True, False, False, True, True]
