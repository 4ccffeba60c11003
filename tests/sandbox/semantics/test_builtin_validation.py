"""Built-in validation: what a real apiserver rejects, with its field paths and wording."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kaiwo_sandbox.semantics.builtin.defaults import apply_builtin_defaults
from kaiwo_sandbox.semantics.builtin.validation import validate_builtin


def _causes(group: str, kind: str, obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[tuple[str, str, str]]:
    return [(c["field"], c["reason"], c["message"]) for c in validate_builtin(group, kind, obj, old)]


def _pod(*containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    pod = {"metadata": {"name": "p", "namespace": "d"},
           "spec": {"containers": list(containers) or [{"name": "main", "image": "busybox"}], **spec}}
    return apply_builtin_defaults("", "Pod", pod)


def _job(template_spec: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    job = {"metadata": {"name": "j", "namespace": "d", "uid": "u1"},
           "spec": {"template": {"spec": template_spec or {"restartPolicy": "Never",
                                                           "containers": [{"name": "c", "image": "x"}]}},
                    **spec}}
    return apply_builtin_defaults("batch", "Job", job)


def test_valid_objects_pass() -> None:
    assert _causes("", "Pod", _pod()) == []
    assert _causes("batch", "Job", _job()) == []


@pytest.mark.parametrize(
    ("container", "expected"),
    [
        ({"name": "main"}, ("spec.containers[0].image", "FieldValueRequired", "Required value")),
        ({"image": "x"}, ("spec.containers[0].name", "FieldValueRequired", "Required value")),
        ({"name": "main", "image": "x", "resources": {"requests": {"cpu": "4"}, "limits": {"cpu": "2"}}},
         ("spec.containers[0].resources.requests", "FieldValueInvalid",
          'Invalid value: "4": must be less than or equal to cpu limit of 2')),
        ({"name": "main", "image": "x", "resources": {"requests": {"amd.com/gpu": "4"}}},
         ("spec.containers[0].resources.limits", "FieldValueRequired",
          "Required value: Limit must be set for non overcommitable resources")),
        ({"name": "main", "image": "x", "resources": {"requests": {"amd.com/gpu": "4"},
                                                      "limits": {"amd.com/gpu": "8"}}},
         ("spec.containers[0].resources.requests", "FieldValueInvalid",
          'Invalid value: "4": must be equal to amd.com/gpu limit of 8')),
        ({"name": "main", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "0.5"}}},
         ("spec.containers[0].resources.limits[nvidia.com/gpu]", "FieldValueInvalid",
          'Invalid value: "500m": must be an integer')),
        ({"name": "main", "image": "x", "resources": {"limits": {"memory": "-1Gi"}}},
         ("spec.containers[0].resources.limits[memory]", "FieldValueInvalid",
          'Invalid value: "-1Gi": must be greater than or equal to 0')),
        ({"name": "Main", "image": "x"},
         ("spec.containers[0].name", "FieldValueInvalid",
          "Invalid value: \"Main\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
          "'-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used "
          "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")),
        ({"name": "main", "image": "x", "ports": [{"containerPort": 0}]},
         ("spec.containers[0].ports[0].containerPort", "FieldValueInvalid",
          "Invalid value: 0: must be between 1 and 65535, inclusive")),
        ({"name": "main", "image": "x", "imagePullPolicy": "Sometimes"},
         ("spec.containers[0].imagePullPolicy", "FieldValueNotSupported",
          'Unsupported value: "Sometimes": supported values: "Always", "IfNotPresent", "Never"')),
        ({"name": "main", "image": "x", "volumeMounts": [{"name": "data", "mountPath": "/data"}]},
         ("spec.containers[0].volumeMounts[0].name", "FieldValueNotFound", 'Not found: "data"')),
    ],
)
def test_container_rules(container: dict[str, Any], expected: tuple[str, str, str]) -> None:
    assert expected in _causes("", "Pod", _pod(container))


def test_duplicate_container_names_and_missing_containers() -> None:
    causes = _causes("", "Pod", _pod({"name": "a", "image": "x"}, {"name": "a", "image": "y"}))
    assert ("spec.containers[1].name", "FieldValueDuplicate", 'Duplicate value: "a"') in causes
    pod = _pod()
    pod["spec"]["containers"] = []
    assert ("spec.containers", "FieldValueRequired", "Required value") in _causes("", "Pod", pod)


def test_equal_gpu_requests_and_limits_are_fine() -> None:
    res = {"requests": {"amd.com/gpu": "8", "cpu": "1"}, "limits": {"amd.com/gpu": 8, "cpu": "2000m"}}
    assert _causes("", "Pod", _pod({"name": "c", "image": "x", "resources": res})) == []


def test_job_template_restart_policy() -> None:
    job = _job({"containers": [{"name": "c", "image": "x"}]})
    assert _causes("batch", "Job", job) == [(
        "spec.template.spec.restartPolicy", "FieldValueNotSupported",
        'Unsupported value: "Always": supported values: "OnFailure", "Never"')]


def test_job_negative_counts_and_selector_mismatch() -> None:
    job = _job(parallelism=-1)
    job["spec"]["selector"] = {"matchLabels": {"app": "other"}}
    causes = _causes("batch", "Job", job)
    assert ("spec.parallelism", "FieldValueInvalid", "Invalid value: -1: must be greater than or equal to 0") in causes
    assert any(f == "spec.template.metadata.labels" and m.endswith("`selector` does not match template `labels`")
               for f, _, m in causes)


def test_job_update_template_is_immutable_once_started() -> None:
    old = _job()
    old["metadata"]["resourceVersion"] = "5"
    new = copy.deepcopy(old)
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "y"
    assert _causes("batch", "Job", new, old) == [
        ("spec.template", "FieldValueInvalid", "Invalid value: core.PodTemplateSpec{...}: field is immutable")]


def test_suspended_unstarted_job_may_change_scheduling_directives() -> None:
    old = _job(suspend=True)
    new = copy.deepcopy(old)
    new["spec"]["suspend"] = False
    tspec = new["spec"]["template"]["spec"]
    tspec["nodeSelector"] = {"kueue.x-k8s.io/flavor": "mi300x"}
    tspec["tolerations"] = [*tspec.get("tolerations", []), {"key": "gpu", "operator": "Exists"}]
    new["spec"]["template"]["metadata"]["labels"]["kueue.x-k8s.io/podset"] = "main"
    assert _causes("batch", "Job", new, old) == []
    started = copy.deepcopy(old)
    started["status"] = {"startTime": "2026-11-21T08:00:00Z"}
    assert [f for f, _, _ in _causes("batch", "Job", new, started)] == ["spec.template"]


def test_job_selector_and_completions_immutable() -> None:
    old = _job()
    new = copy.deepcopy(old)
    new["spec"]["completions"] = 3
    assert ("spec.completions", "FieldValueInvalid", "Invalid value: 3: field is immutable") in \
        _causes("batch", "Job", new, old)


def _deployment(**spec: Any) -> dict[str, Any]:
    dep = {"metadata": {"name": "d", "namespace": "n"},
           "spec": {"selector": {"matchLabels": {"app": "web"}},
                    "template": {"metadata": {"labels": {"app": "web"}},
                                 "spec": {"containers": [{"name": "c", "image": "x"}]}}, **spec}}
    return apply_builtin_defaults("apps", "Deployment", dep)


def test_deployment_rules() -> None:
    assert _causes("apps", "Deployment", _deployment()) == []
    dep = _deployment()
    dep["spec"]["template"]["metadata"]["labels"] = {"app": "api"}
    assert _causes("apps", "Deployment", dep) == [(
        "spec.template.metadata.labels", "FieldValueInvalid",
        'Invalid value: map[string]string{"app":"api"}: `selector` does not match template `labels`')]
    dep = _deployment()
    del dep["spec"]["selector"]
    assert ("spec.selector", "FieldValueRequired", "Required value") in _causes("apps", "Deployment", dep)
    dep = _deployment()
    dep["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    assert ("spec.template.spec.restartPolicy", "FieldValueNotSupported",
            'Unsupported value: "Never": supported values: "Always"') in _causes("apps", "Deployment", dep)


def test_deployment_selector_immutable() -> None:
    old = _deployment()
    new = copy.deepcopy(old)
    new["spec"]["selector"]["matchLabels"]["tier"] = "x"
    new["spec"]["template"]["metadata"]["labels"]["tier"] = "x"
    assert _causes("apps", "Deployment", new, old) == [
        ("spec.selector", "FieldValueInvalid", "Invalid value: v1.LabelSelector{...}: field is immutable")]


def test_pod_update_rules() -> None:
    old = _pod(schedulingGates=[{"name": "kueue.x-k8s.io/admission"}])
    new = copy.deepcopy(old)
    new["spec"]["schedulingGates"] = []
    new["spec"]["nodeSelector"] = {"gpu": "mi300x"}
    new["spec"]["containers"][0]["image"] = "busybox:2"
    new["spec"]["nodeName"] = "n1"
    assert _causes("", "Pod", new, old) == []
    changed = copy.deepcopy(old)
    changed["spec"]["containers"][0]["command"] = ["sleep"]
    [(field, reason, message)] = _causes("", "Pod", changed, old)
    assert (field, reason) == ("spec", "FieldValueForbidden")
    assert message.startswith("Forbidden: pod updates may not change fields other than `spec.containers[*].image`")


def test_service_rules() -> None:
    svc = apply_builtin_defaults("", "Service", {"metadata": {"name": "s", "namespace": "d"},
                                                  "spec": {"ports": [{"port": 80}, {"port": 70000, "name": "b"}]}})
    causes = _causes("", "Service", svc)
    assert ("spec.ports[0].name", "FieldValueRequired", "Required value") in causes
    assert ("spec.ports[1].port", "FieldValueInvalid",
            "Invalid value: 70000: must be between 1 and 65535, inclusive") in causes
    no_ports = apply_builtin_defaults("", "Service", {"metadata": {"name": "s"}, "spec": {}})
    assert _causes("", "Service", no_ports) == [("spec.ports", "FieldValueRequired", "Required value")]


def test_pvc_rules() -> None:
    pvc = apply_builtin_defaults("", "PersistentVolumeClaim", {
        "metadata": {"name": "c"}, "spec": {"accessModes": ["ReadWriteOnce"],
                                            "resources": {"requests": {"storage": "10Gi"}}}})
    assert _causes("", "PersistentVolumeClaim", pvc) == []
    grown = copy.deepcopy(pvc)
    grown["spec"]["resources"]["requests"]["storage"] = "20Gi"
    grown["spec"]["volumeName"] = "pv-1"
    assert _causes("", "PersistentVolumeClaim", grown, pvc) == []
    changed = copy.deepcopy(pvc)
    changed["spec"]["accessModes"] = ["ReadWriteMany"]
    assert _causes("", "PersistentVolumeClaim", changed, pvc) == [(
        "spec", "FieldValueForbidden", "Forbidden: spec is immutable after creation except resources.requests and "
        "volumeAttributesClassName for bound claims")]
    empty = {"metadata": {"name": "c"}, "spec": {}}
    assert [f for f, _, _ in _causes("", "PersistentVolumeClaim", empty)] == ["spec.accessModes",
                                                                              "spec.resources[storage]"]


def test_node_taints() -> None:
    node = {"metadata": {"name": "n"}, "spec": {"taints": [{"key": "gpu", "effect": "Sometimes"}]}}
    assert _causes("", "Node", node) == [(
        "spec.taints[0].effect", "FieldValueNotSupported",
        'Unsupported value: "Sometimes": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"')]


def test_configmap_keys() -> None:
    [(field, reason, message)] = _causes("", "ConfigMap", {"metadata": {"name": "c"}, "data": {"a b": "x"}})
    assert (field, reason) == ("data[a b]", "FieldValueInvalid")
    assert message.startswith('Invalid value: "a b": a valid config key must consist of alphanumeric characters')


def test_crd_name_must_be_plural_dot_group() -> None:
    crd = {"metadata": {"name": "wrong"}, "spec": {"group": "x.io", "scope": "Namespaced",
                                                   "names": {"plural": "widgets", "kind": "Widget"},
                                                   "versions": [{"name": "v1", "served": True, "storage": True,
                                                                 "schema": {"openAPIV3Schema": {"type": "object"}}}]}}
    assert _causes("apiextensions.k8s.io", "CustomResourceDefinition", crd) == [
        ("metadata.name", "FieldValueInvalid", 'Invalid value: "wrong": must be spec.names.plural+"."+spec.group')]


def test_unknown_kinds_and_inputs_untouched() -> None:
    assert validate_builtin("ray.io", "RayJob", {"spec": {}}, None) == []
    job = _job(parallelism=-1)
    before = copy.deepcopy(job)
    validate_builtin("batch", "Job", job, copy.deepcopy(job))
    assert job == before


def _core_event(**fields: Any) -> dict[str, Any]:
    return {"metadata": {"name": "e", "namespace": "team"},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "team"}, "reason": "Started",
            "message": "ok", "type": "Normal", **fields}


def test_legacy_events() -> None:
    assert _causes("", "Event", _core_event()) == []
    wrong_ns = _core_event(involvedObject={"kind": "Pod", "name": "p", "namespace": "other"})
    assert _causes("", "Event", wrong_ns) == [
        ("involvedObject.namespace", "FieldValueInvalid", 'Invalid value: "other": does not match event.namespace')]
    node_event = _core_event(involvedObject={"kind": "Node", "name": "n"})
    node_event["metadata"]["namespace"] = "default"
    assert _causes("", "Event", node_event) == []


def test_new_style_core_event_needs_reporting_fields() -> None:
    causes = _causes("", "Event", _core_event(eventTime="2026-11-21T08:00:00.000000Z"))
    # The empty controller name also fails the qualified-name check, as in the apiserver.
    assert [(f, r) for f, r, _ in causes] == [("reportingComponent", "FieldValueRequired"),
                                              ("reportingComponent", "FieldValueInvalid"),
                                              ("reportingComponent", "FieldValueInvalid"),
                                              ("reportingInstance", "FieldValueRequired"),
                                              ("action", "FieldValueRequired")]


def test_events_v1_strict_rules() -> None:
    good = {"metadata": {"name": "e", "namespace": "team"}, "eventTime": "2026-11-21T08:00:00.000000Z",
            "regarding": {"kind": "Job", "name": "j", "namespace": "team"}, "reason": "Created", "note": "x",
            "type": "Normal", "action": "Create", "reportingController": "kaiwo.silogen.ai/operator",
            "reportingInstance": "op-1"}
    assert _causes("events.k8s.io", "Event", good) == []
    bad = {**good, "type": "Info", "deprecatedCount": 3, "series": {"count": 1}}
    del bad["eventTime"]
    assert _causes("events.k8s.io", "Event", bad) == [
        ("series.count", "FieldValueInvalid", 'Invalid value: "": should be at least 2'),
        ("series.lastObservedTime", "FieldValueRequired", "Required value"),
        ("eventTime", "FieldValueRequired", "Required value"),
        ("type", "FieldValueInvalid", 'Invalid value: "": has invalid value: Info'),
        ("deprecatedCount", "FieldValueInvalid", 'Invalid value: "": needs to be unset'),
    ]


def _crd(schema: Any) -> dict[str, Any]:
    version: dict[str, Any] = {"name": "v1", "served": True, "storage": True}
    if schema is not None:
        version["schema"] = {"openAPIV3Schema": schema}
    return {"metadata": {"name": "widgets.x.io"}, "spec": {"group": "x.io", "scope": "Namespaced",
                                                           "names": {"plural": "widgets", "kind": "Widget"},
                                                           "versions": [version]}}


def test_crd_schemas_must_be_structural() -> None:
    ok = {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                                           "size": {"x-kubernetes-int-or-string": True}}}
    assert _causes("apiextensions.k8s.io", "CustomResourceDefinition", _crd(ok)) == []
    bad = {"type": "object", "properties": {"spec": {"properties": {"items": {"type": "array", "items": {}}}}}}
    assert _causes("apiextensions.k8s.io", "CustomResourceDefinition", _crd(bad)) == [
        ("spec.versions[0].schema.openAPIV3Schema.properties[spec].type", "FieldValueRequired",
         "Required value: must not be empty for specified object fields"),
        ("spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[items].items.type",
         "FieldValueRequired", "Required value: must not be empty for specified array items"),
    ]
    assert _causes("apiextensions.k8s.io", "CustomResourceDefinition", _crd(None)) == [
        ("spec.versions[0].schema.openAPIV3Schema", "FieldValueRequired", "Required value: schemas are required")]


def test_preinstalled_crds_are_valid() -> None:
    from kaiwo_ray.api.crd import all_crds
    from kaiwo_sandbox.cluster.crds import preinstalled_crds

    crds = [*all_crds(), *preinstalled_crds()]
    assert crds
    for crd in crds:
        assert _causes("apiextensions.k8s.io", "CustomResourceDefinition", crd) == [], crd["metadata"]["name"]


def test_scheduling_gates_only_shrink_and_gated_node_selectors_only_grow() -> None:
    old = _pod(schedulingGates=[{"name": "kueue.x-k8s.io/admission"}], nodeSelector={"zone": "a"})
    added = copy.deepcopy(old)
    added["spec"]["schedulingGates"].append({"name": "other.io/gate"})
    assert _causes("", "Pod", added, old) == [(
        "spec.schedulingGates", "FieldValueForbidden",
        "Forbidden: only deletion is allowed, but found new scheduling gate 'other.io/gate'")]
    mutated = copy.deepcopy(old)
    mutated["spec"]["nodeSelector"] = {"zone": "b"}
    assert _causes("", "Pod", mutated, old) == [(
        "spec.nodeSelector", "FieldValueInvalid", 'Invalid value: map[string]string{"zone":"b"}: only additions to '
        "spec.nodeSelector are allowed (no mutations or deletions)")]
    ungated = _pod(nodeSelector={"zone": "a"})
    moved = copy.deepcopy(ungated)
    moved["spec"]["nodeSelector"] = {"zone": "a", "gpu": "x"}
    assert [f for f, _, _ in _causes("", "Pod", moved, ungated)] == ["spec"]


@pytest.mark.parametrize(
    ("rolling", "expected"),
    [
        ({"maxSurge": "x%"}, ("spec.strategy.rollingUpdate.maxSurge", "FieldValueInvalid",
                              "Invalid value: \"x%\": a valid percent string must be a numeric string followed by an "
                              "ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')")),
        ({"maxUnavailable": "150%"}, ("spec.strategy.rollingUpdate.maxUnavailable", "FieldValueInvalid",
                                      'Invalid value: "150%": must not be greater than 100%')),
        ({"maxUnavailable": -1}, ("spec.strategy.rollingUpdate.maxUnavailable", "FieldValueInvalid",
                                  "Invalid value: -1: must be greater than or equal to 0")),
        ({"maxUnavailable": 0, "maxSurge": "0%"}, ("spec.strategy.rollingUpdate.maxUnavailable", "FieldValueInvalid",
                                                   "Invalid value: 0: may not be 0 when `maxSurge` is 0")),
    ],
)
def test_rolling_update_parameters(rolling: dict[str, Any], expected: tuple[str, str, str]) -> None:
    dep = _deployment(strategy={"type": "RollingUpdate", "rollingUpdate": rolling})
    assert expected in _causes("apps", "Deployment", dep)
