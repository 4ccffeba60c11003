"""`spec.priorityClass` through the sandbox: a Kubernetes PriorityClass of that name gives the pods
`priorityClassName` (seed 001), a Kueue WorkloadPriorityClass gives the Job Kueue's label (upstream's
code), both apply where both exist, and a name that is neither is a condition naming the class."""

from __future__ import annotations

from typing import Any

from e2e_harness import OperatorSandbox
from e2e_scenarios import kaiwo_job
from e2e_support import KAIWO_API, condition, wait_for

PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"


def test_priority_class_names_what_exists(operator_env: OperatorSandbox) -> None:
    target = operator_env.target
    kube = target.kube
    namespace = target.namespace("priorities")
    kube.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "pods-only"},
                 "value": 100})
    kube.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "both"},
                 "value": 200})
    for name, value in (("kueue-only", 10), ("both", 20)):
        kube.create({"apiVersion": kube.kueue_api, "kind": "WorkloadPriorityClass", "metadata": {"name": name},
                     "value": value})
    for name in ("pods-only", "kueue-only", "both", "nowhere"):
        kube.create(kaiwo_job(f"job-{name}", namespace, priorityClass=name))

    def child(name: str) -> dict[str, Any]:
        return wait_for(lambda: kube.get("batch/v1", "Job", f"job-{name}", namespace), 30, f"Job job-{name}")

    def placement(job: dict[str, Any]) -> tuple[str | None, str | None]:
        return (job["spec"]["template"]["spec"].get("priorityClassName"),
                (job["metadata"].get("labels") or {}).get(PRIORITY_LABEL))

    assert placement(child("pods-only")) == ("pods-only", None)
    assert placement(child("kueue-only")) == (None, "kueue-only")
    assert placement(child("both")) == ("both", "both")
    assert placement(child("nowhere")) == (None, None)

    def found(name: str) -> dict[str, Any] | None:
        return condition(kube.get(KAIWO_API, "KaiwoJob", f"job-{name}", namespace), "PriorityClassFound")

    missing = wait_for(lambda: found("nowhere"), 30, "the PriorityClassFound condition")
    assert (missing["status"], missing["reason"]) == ("False", "PriorityClassNotFound")
    assert "'nowhere'" in missing["message"]
    both = wait_for(lambda: found("both"), 30, "the PriorityClassFound condition")
    assert both["status"] == "True" and "PriorityClass and a Kueue WorkloadPriorityClass" in both["message"]
