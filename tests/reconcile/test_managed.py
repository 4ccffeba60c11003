"""The pure decisions of bringing a plain workload under Kaiwo: the tracking CR's body, which CR
counts as the tracker, and the patch that adopts the workload (never one something else controls)."""

from __future__ import annotations

from typing import Any

from kaiwo_ray.reconcile.managed import TRACKS, adoption_patch, tracker_for, tracks

JOB: dict[str, Any] = {
    "apiVersion": "batch/v1", "kind": "Job",
    "metadata": {"name": "train", "namespace": "team", "uid": "job-uid",
                 "labels": {"kaiwo.silogen.ai/managed": "true", "kaiwo.silogen.ai/user": "jane"}},
    "spec": {"template": {"spec": {"containers": [{"name": "main"}]}}},
}


def test_the_tracker_names_the_user_queue_and_embeds_the_job() -> None:
    cr = tracker_for("Job", JOB, "kaiwo")
    assert cr["kind"] == "KaiwoJob" and cr["metadata"]["name"] == "train"
    assert cr["spec"]["user"] == "jane" and cr["spec"]["clusterQueue"] == "kaiwo"
    assert cr["spec"]["job"]["spec"] == JOB["spec"]
    assert cr["metadata"]["annotations"] == {TRACKS: "Job"}
    assert cr["metadata"]["ownerReferences"] == [{"apiVersion": "batch/v1", "kind": "Job", "name": "train",
                                                   "uid": "job-uid"}]  # not the controller
    assert tracks({**cr, "metadata": {**cr["metadata"], "uid": "cr-uid"}}, "Job", JOB)


def test_a_same_named_cr_that_tracks_something_else_is_not_the_tracker() -> None:
    own = {"kind": "KaiwoJob", "metadata": {"name": "train", "uid": "x"}}
    assert not tracks(own, "Job", JOB)  # a user's own KaiwoJob
    predecessor = tracker_for("Job", {**JOB, "metadata": {**JOB["metadata"], "uid": "old"}}, "kaiwo")
    assert not tracks(predecessor, "Job", JOB)


def test_adoption_makes_the_job_the_crs_child_once() -> None:
    cr = {"kind": "KaiwoJob", "metadata": {"name": "train", "uid": "cr-uid"}}
    patch = adoption_patch("Job", JOB, cr)
    assert patch is not None
    assert patch["metadata"]["labels"] == {"kaiwo.silogen.ai/run-id": "cr-uid", "kaiwo.silogen.ai/name": "train",
                                           "kaiwo.silogen.ai/type": "job"}
    assert patch["metadata"]["ownerReferences"][0]["uid"] == "cr-uid"
    adopted = {**JOB, "metadata": {**JOB["metadata"], "labels": {**JOB["metadata"]["labels"],
                                                                 **patch["metadata"]["labels"]},
                                   "ownerReferences": patch["metadata"]["ownerReferences"]}}
    assert adoption_patch("Job", adopted, cr) is None


def test_a_workload_something_else_controls_only_gets_the_labels() -> None:
    owned = {**JOB, "metadata": {**JOB["metadata"], "ownerReferences": [
        {"apiVersion": "v1", "kind": "CronJob", "name": "nightly", "uid": "c", "controller": True}]}}
    patch = adoption_patch("Job", owned, {"kind": "KaiwoJob", "metadata": {"name": "train", "uid": "cr-uid"}})
    assert patch is not None and "ownerReferences" not in patch["metadata"]


def test_a_deployments_pods_carry_the_run_id_and_type() -> None:
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "uid": "d"},
                  "spec": {"template": {"metadata": {"labels": {"app": "web"}}}}}
    patch = adoption_patch("Deployment", deployment, {"kind": "KaiwoService", "metadata": {"name": "web",
                                                                                          "uid": "s"}})
    assert patch is not None
    assert patch["spec"]["template"]["metadata"]["labels"] == {"kaiwo.silogen.ai/run-id": "s",
                                                               "kaiwo.silogen.ai/type": "service"}
