"""Built-in defaulting: what a real apiserver adds to objects it stores."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kaiwo_sandbox.semantics.builtin.defaults import apply_builtin_defaults


def _pod(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}], **spec}}


def _job(template_spec: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "train", "namespace": "default", "uid": "u-1"},
        "spec": {"template": {"spec": template_spec or {
            "restartPolicy": "Never", "containers": [{"name": "main", "image": "python:3.12"}]}}, **spec},
    }


def test_pod_spec_and_container_defaults() -> None:
    pod = apply_builtin_defaults("", "Pod", _pod())
    spec = pod["spec"]
    assert spec["restartPolicy"] == "Always"
    assert spec["dnsPolicy"] == "ClusterFirst"
    assert spec["schedulerName"] == "default-scheduler"
    assert spec["terminationGracePeriodSeconds"] == 30
    assert spec["securityContext"] == {}
    assert spec["enableServiceLinks"] is True
    assert spec["serviceAccountName"] == "default"
    assert spec["priority"] == 0
    c = spec["containers"][0]
    assert c["imagePullPolicy"] == "IfNotPresent"
    assert c["terminationMessagePath"] == "/dev/termination-log"
    assert c["terminationMessagePolicy"] == "File"
    assert c["resources"] == {}
    assert {t["key"] for t in spec["tolerations"]} == {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}
    assert all(t["tolerationSeconds"] == 300 for t in spec["tolerations"])
    assert pod["status"] == {"phase": "Pending", "qosClass": "BestEffort"}


@pytest.mark.parametrize(
    ("image", "policy"),
    [
        ("busybox", "Always"),
        ("busybox:latest", "Always"),
        ("registry:5000/team/busybox", "Always"),
        ("registry:5000/team/busybox:1.2", "IfNotPresent"),
        ("rocm/pytorch:rocm6.2", "IfNotPresent"),
        ("busybox@sha256:" + "a" * 64, "IfNotPresent"),
    ],
)
def test_image_pull_policy_follows_the_tag(image: str, policy: str) -> None:
    pod = apply_builtin_defaults("", "Pod", _pod(containers=[{"name": "c", "image": image}]))
    assert pod["spec"]["containers"][0]["imagePullPolicy"] == policy


def test_explicit_values_are_kept() -> None:
    pod = apply_builtin_defaults("", "Pod", _pod(
        restartPolicy="Never", schedulerName="kai", terminationGracePeriodSeconds=0,
        containers=[{"name": "c", "image": "x", "imagePullPolicy": "Never"}]))
    assert pod["spec"]["restartPolicy"] == "Never"
    assert pod["spec"]["schedulerName"] == "kai"
    assert pod["spec"]["terminationGracePeriodSeconds"] == 0
    assert pod["spec"]["containers"][0]["imagePullPolicy"] == "Never"


def test_pod_requests_default_to_limits_but_templates_do_not() -> None:
    container = {"name": "c", "image": "x",
                 "resources": {"limits": {"cpu": "2", "amd.com/gpu": "8"}, "requests": {"cpu": "1"}}}
    pod = apply_builtin_defaults("", "Pod", _pod(containers=[container]))
    assert pod["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1", "amd.com/gpu": "8"}
    assert pod["status"]["qosClass"] == "Burstable"
    job = apply_builtin_defaults("batch", "Job", _job({"restartPolicy": "Never", "containers": [container]}))
    assert job["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1"}


def test_guaranteed_qos() -> None:
    res = {"limits": {"cpu": "1", "memory": "1Gi"}}
    pod = apply_builtin_defaults("", "Pod", _pod(containers=[{"name": "c", "image": "x", "resources": res}]))
    assert pod["status"]["qosClass"] == "Guaranteed"


def test_ports_probes_volumes_env() -> None:
    pod = apply_builtin_defaults("", "Pod", _pod(
        containers=[{
            "name": "c", "image": "x",
            "ports": [{"containerPort": 8265}],
            "readinessProbe": {"httpGet": {"port": 8000}},
            "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
        }],
        volumes=[{"name": "scratch"}, {"name": "cfg", "configMap": {"name": "c"}}, {"name": "s", "secret": {"secretName": "s"}}],
    ))
    c = pod["spec"]["containers"][0]
    assert c["ports"] == [{"containerPort": 8265, "protocol": "TCP"}]
    assert c["readinessProbe"] == {"httpGet": {"port": 8000, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1,
                                   "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3}
    assert c["env"][0]["valueFrom"]["fieldRef"]["apiVersion"] == "v1"
    assert pod["spec"]["volumes"] == [
        {"name": "scratch", "emptyDir": {}},
        {"name": "cfg", "configMap": {"name": "c", "defaultMode": 420}},
        {"name": "s", "secret": {"secretName": "s", "defaultMode": 420}},
    ]


def test_host_network_copies_container_ports_to_host_ports() -> None:
    pod = apply_builtin_defaults("", "Pod", _pod(hostNetwork=True, containers=[
        {"name": "c", "image": "x", "ports": [{"containerPort": 9100}]}]))
    assert pod["spec"]["containers"][0]["ports"][0]["hostPort"] == 9100


def test_existing_blanket_toleration_is_respected() -> None:
    pod = apply_builtin_defaults("", "Pod", _pod(tolerations=[{"operator": "Exists"}]))
    assert pod["spec"]["tolerations"] == [{"operator": "Exists"}]


def test_job_defaults_selector_and_labels() -> None:
    job = apply_builtin_defaults("batch", "Job", _job())
    spec = job["spec"]
    assert (spec["completions"], spec["parallelism"], spec["backoffLimit"]) == (1, 1, 6)
    assert spec["completionMode"] == "NonIndexed"
    assert spec["suspend"] is False
    assert spec["manualSelector"] is False
    assert spec["podReplacementPolicy"] == "TerminatingOrFailed"
    assert spec["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}}
    labels = spec["template"]["metadata"]["labels"]
    assert labels == {"batch.kubernetes.io/controller-uid": "u-1", "batch.kubernetes.io/job-name": "train",
                      "controller-uid": "u-1", "job-name": "train"}
    assert job["metadata"]["labels"] == labels
    tspec = spec["template"]["spec"]
    assert tspec["restartPolicy"] == "Never"
    assert tspec["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert "enableServiceLinks" not in tspec  # Pod-only default


def test_job_parallelism_without_completions_leaves_completions_unset() -> None:
    spec = apply_builtin_defaults("batch", "Job", _job(parallelism=4))["spec"]
    assert "completions" not in spec
    assert spec["parallelism"] == 4


def test_job_without_restart_policy_gets_always_so_validation_can_reject_it() -> None:
    job = apply_builtin_defaults("batch", "Job", _job({"containers": [{"name": "c", "image": "x"}]}))
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Always"


def test_job_user_labels_win_and_pod_failure_policy_changes_replacement() -> None:
    job = _job(podFailurePolicy={"rules": [{"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget"}]}]})
    job["metadata"]["labels"] = {"team": "a"}
    out = apply_builtin_defaults("batch", "Job", job)
    assert out["metadata"]["labels"] == {"team": "a"}
    assert out["spec"]["podReplacementPolicy"] == "Failed"
    assert out["spec"]["podFailurePolicy"]["rules"][0]["onPodConditions"][0]["status"] == "True"


def test_deployment_defaults() -> None:
    dep = apply_builtin_defaults("apps", "Deployment", {
        "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"a": "b"}},
                 "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}},
    })
    spec = dep["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}
    assert spec["revisionHistoryLimit"] == 10
    assert spec["progressDeadlineSeconds"] == 600
    assert spec["template"]["spec"]["dnsPolicy"] == "ClusterFirst"


def test_recreate_strategy_gets_no_rolling_update() -> None:
    dep = apply_builtin_defaults("apps", "Deployment", {"spec": {"strategy": {"type": "Recreate"}}})
    assert dep["spec"]["strategy"] == {"type": "Recreate"}


def test_service_defaults() -> None:
    svc = apply_builtin_defaults("", "Service", {
        "metadata": {"name": "head", "namespace": "default"},
        "spec": {"ports": [{"port": 8265, "name": "dashboard"}], "selector": {"app": "ray"}},
    })
    spec = svc["spec"]
    assert spec["type"] == "ClusterIP"
    assert spec["sessionAffinity"] == "None"
    assert spec["ports"] == [{"port": 8265, "name": "dashboard", "protocol": "TCP", "targetPort": 8265}]
    assert spec["ipFamilies"] == ["IPv4"]
    assert spec["ipFamilyPolicy"] == "SingleStack"
    assert spec["internalTrafficPolicy"] == "Cluster"
    assert spec["clusterIP"].startswith("10.") and spec["clusterIPs"] == [spec["clusterIP"]]
    again = apply_builtin_defaults("", "Service", {"metadata": {"name": "head", "namespace": "default"}, "spec": {}})
    assert again["spec"]["clusterIP"] == spec["clusterIP"]  # stable per name


def test_nodeport_service_gets_a_node_port_in_range() -> None:
    svc = apply_builtin_defaults("", "Service", {"metadata": {"name": "s", "namespace": "d"},
                                                  "spec": {"type": "NodePort", "ports": [{"port": 80}]}})
    assert 30000 <= svc["spec"]["ports"][0]["nodePort"] <= 32767
    assert svc["spec"]["externalTrafficPolicy"] == "Cluster"


def test_headless_service_keeps_none() -> None:
    svc = apply_builtin_defaults("", "Service", {"metadata": {"name": "s"}, "spec": {"clusterIP": "None"}})
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["clusterIPs"] == ["None"]


@pytest.mark.parametrize(
    ("group", "kind", "obj", "expected"),
    [
        ("", "Namespace", {"metadata": {"name": "team-a"}},
         {"metadata": {"name": "team-a", "labels": {"kubernetes.io/metadata.name": "team-a"}},
          "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}),
        ("", "PersistentVolumeClaim", {"metadata": {"name": "c"}, "spec": {"accessModes": ["ReadWriteOnce"]}},
         {"metadata": {"name": "c"}, "spec": {"accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem"},
          "status": {"phase": "Pending"}}),
        ("", "Secret", {"metadata": {"name": "s"}}, {"metadata": {"name": "s"}, "type": "Opaque"}),
        ("", "ConfigMap", {"metadata": {"name": "c"}}, {"metadata": {"name": "c"}}),
        ("", "Node", {"metadata": {"name": "n"}, "status": {"capacity": {"cpu": "8"}}},
         {"metadata": {"name": "n"}, "status": {"capacity": {"cpu": "8"}, "allocatable": {"cpu": "8"}}}),
        ("scheduling.k8s.io", "PriorityClass", {"metadata": {"name": "high"}, "value": 1000},
         {"metadata": {"name": "high"}, "value": 1000, "preemptionPolicy": "PreemptLowerPriority"}),
        ("apiextensions.k8s.io", "CustomResourceDefinition",
         {"spec": {"group": "x.io", "names": {"kind": "Widget", "plural": "widgets"}}},
         {"spec": {"group": "x.io", "names": {"kind": "Widget", "plural": "widgets", "singular": "widget",
                                              "listKind": "WidgetList"}, "conversion": {"strategy": "None"}}}),
        ("ray.io", "RayJob", {"spec": {}}, {"spec": {}}),
    ],
)
def test_other_kinds(group: str, kind: str, obj: dict[str, Any], expected: dict[str, Any]) -> None:
    assert apply_builtin_defaults(group, kind, obj) == expected


FIXTURES = [
    ("", "Pod", _pod()),
    ("batch", "Job", _job()),
    ("apps", "Deployment", {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}}),
    ("", "Service", {"metadata": {"name": "s"}, "spec": {"type": "LoadBalancer", "ports": [{"port": 1}]}}),
    ("", "Namespace", {"metadata": {"name": "n"}}),
    ("apps", "StatefulSet", {"spec": {"volumeClaimTemplates": [{"spec": {}}]}}),
    ("apps", "DaemonSet", {"spec": {}}),
    ("batch", "CronJob", {"spec": {"jobTemplate": {"spec": {"template": {"spec": {}}}}}}),
]


@pytest.mark.parametrize(("group", "kind", "obj"), FIXTURES)
def test_defaulting_is_idempotent_and_leaves_input_alone(group: str, kind: str, obj: dict[str, Any]) -> None:
    before = copy.deepcopy(obj)
    once = apply_builtin_defaults(group, kind, obj)
    assert obj == before
    assert apply_builtin_defaults(group, kind, once) == once


def test_job_selector_is_generated_on_create_only() -> None:
    job = _job()
    job["metadata"]["resourceVersion"] = "12"
    spec = apply_builtin_defaults("batch", "Job", job)["spec"]
    assert "selector" not in spec


@pytest.mark.parametrize(
    ("given", "stored"),
    [("0.5", "500m"), ("1024Mi", "1Gi"), ("1.5Gi", "1536Mi"), (8, "8"), ("2000m", "2"), ("1e3", "1e3"),
     ("0.0001", "1m"), ("16Gi", "16Gi"), ("bogus", "bogus")],
)
def test_resource_quantities_are_written_back_canonically(given: Any, stored: str) -> None:
    res = {"limits": {"cpu": given}, "requests": {"memory": given}}
    pod = apply_builtin_defaults("", "Pod", _pod(containers=[{"name": "c", "image": "x", "resources": res}]))
    assert pod["spec"]["containers"][0]["resources"] == {"limits": {"cpu": stored},
                                                         "requests": {"memory": stored, "cpu": stored}}
    job = apply_builtin_defaults("batch", "Job", _job({"restartPolicy": "Never", "containers": [
        {"name": "c", "image": "x", "resources": {"limits": {"amd.com/gpu": given}}}]}))
    assert job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["amd.com/gpu"] == stored


def test_node_capacity_is_canonical_and_copied_to_allocatable() -> None:
    node = apply_builtin_defaults("", "Node", {"metadata": {"name": "n"},
                                               "status": {"capacity": {"cpu": 192, "memory": "2048Gi"}}})
    assert node["status"]["allocatable"] == {"cpu": "192", "memory": "2Ti"}


def test_secret_string_data_is_folded_into_data_and_never_stored() -> None:
    secret = {"metadata": {"name": "s"}, "data": {"a": "b2xk", "b": "a2VlcA=="}, "stringData": {"a": "new"}}
    defaulted = apply_builtin_defaults("", "Secret", secret)
    assert defaulted["data"] == {"a": "bmV3", "b": "a2VlcA=="}, "stringData overwrites data's entry"
    assert "stringData" not in defaulted and "stringData" in secret
