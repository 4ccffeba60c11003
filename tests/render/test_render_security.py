"""Pod Security "restricted" on every generated pod template: what is set, what the user wrote wins,
`dangerous` opts out (docs/compatibility.md). The sandbox's Pod Security check judges the results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from render_fixtures import children, job, main, pod_templates, service

from kaiwo_ray.api.workloads import KaiwoJob, KaiwoService
from kaiwo_ray.render import RenderError
from kaiwo_sandbox.semantics.builtin.pod_security import check_pod

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
POD_FIELDS = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
CONTAINER_FIELDS = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
STORAGE = {"storage": {"storageEnabled": True, "accessMode": "ReadWriteOnce",
                       "data": {"storageSize": "1Gi", "download": {"git": [{"repository": "https://x/r.git",
                                                                           "targetPath": "r"}]}}}}


def user_job(pod: dict[str, Any]) -> KaiwoJob:
    return job({"job": {"spec": {"template": {"spec": pod}}}})


def every_template(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every pod template among rendered children: Jobs, Deployments, Ray groups, RayJob submitters."""
    found: list[dict[str, Any]] = []
    for obj in objs:
        if obj["kind"] in ("Job", "Deployment", "RayJob", "AppWrapper"):
            found.extend(pod_templates(obj))
        if obj["kind"] == "RayJob" and "submitterPodTemplate" in obj["spec"]:
            found.append(obj["spec"]["submitterPodTemplate"])
    return found


def test_a_default_job_template_gets_every_restricted_field_and_no_token() -> None:
    pod = main(job({"image": "i"}))["spec"]["template"]["spec"]
    assert pod["securityContext"] == {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000, **POD_FIELDS}
    assert pod["containers"][0]["securityContext"] == CONTAINER_FIELDS
    assert pod["automountServiceAccountToken"] is False


def test_a_user_template_gets_what_it_lacks_on_every_container_init_containers_included() -> None:
    pod = main(user_job({"initContainers": [{"name": "init", "image": "b"}],
                         "containers": [{"name": "a", "image": "b"}, {"name": "b", "image": "b"}]}))
    spec = pod["spec"]["template"]["spec"]
    assert spec["securityContext"] == POD_FIELDS  # no runAsUser: the image's own user runs (see docs)
    assert [c["securityContext"] for c in spec["initContainers"] + spec["containers"]] == [CONTAINER_FIELDS] * 3
    assert check_pod("restricted", spec) == []


def test_fields_the_user_wrote_win_at_either_level() -> None:
    pod = main(user_job({
        "securityContext": {"runAsNonRoot": False, "seccompProfile": {"type": "Localhost", "localhostProfile": "p"}},
        "automountServiceAccountToken": True,
        "containers": [{"name": "a", "image": "b", "securityContext": {
            "allowPrivilegeEscalation": True, "capabilities": {"drop": [], "add": ["NET_ADMIN"]}, "readOnlyRootFilesystem": True}}],
    }))["spec"]["template"]["spec"]
    assert pod["securityContext"] == {"runAsNonRoot": False,
                                      "seccompProfile": {"type": "Localhost", "localhostProfile": "p"}}
    assert pod["automountServiceAccountToken"] is True
    assert pod["containers"][0]["securityContext"] == {
        "allowPrivilegeEscalation": True, "capabilities": {"drop": [], "add": ["NET_ADMIN"]},
        "readOnlyRootFilesystem": True}


def test_a_template_that_asks_for_root_or_privileges_gets_nothing_contradicting_it() -> None:
    pod = main(user_job({
        "securityContext": {"runAsUser": 0},
        "containers": [{"name": "priv", "image": "b", "securityContext": {"privileged": True}},
                       {"name": "admin", "image": "b", "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}],
    }))["spec"]["template"]["spec"]
    # runAsNonRoot next to runAsUser 0 is refused by the kubelet; allowPrivilegeEscalation=false next
    # to privileged or SYS_ADMIN by the API server.
    assert pod["securityContext"] == {"runAsUser": 0, "seccompProfile": {"type": "RuntimeDefault"}}
    assert pod["containers"][0]["securityContext"] == {"privileged": True}
    assert pod["containers"][1]["securityContext"] == {"capabilities": {"add": ["SYS_ADMIN"], "drop": ["ALL"]}}


def test_a_named_service_account_keeps_its_token() -> None:
    pod = main(user_job({"serviceAccountName": "reader", "containers": [{"name": "a", "image": "b"}]}))
    assert "automountServiceAccountToken" not in pod["spec"]["template"]["spec"]


def test_ray_head_workers_and_submitter_are_restricted_and_the_submitter_is_kuberays_default() -> None:
    rayjob = main(job({"image": "ray:1", "ray": True, "entrypoint": "python x.py"}))
    for template in pod_templates(rayjob):
        assert template["spec"]["securityContext"]["runAsNonRoot"] is True
        assert template["spec"]["containers"][0]["securityContext"] == CONTAINER_FIELDS
        assert template["spec"]["automountServiceAccountToken"] is False
    submitter = rayjob["spec"]["submitterPodTemplate"]["spec"]
    assert submitter["restartPolicy"] == "Never"
    assert submitter["securityContext"] == {"runAsUser": 1000, "runAsGroup": 1000, **POD_FIELDS}
    assert submitter["containers"] == [{
        "name": "ray-job-submitter", "image": "ray:1", "securityContext": CONTAINER_FIELDS,
        "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "200Mi"}}}]
    assert submitter["automountServiceAccountToken"] is False


def test_a_users_submitter_template_is_filled_and_other_submission_modes_get_none() -> None:
    cluster = {"headGroupSpec": {"template": {"spec": {"containers": [{"name": "h", "image": "r"}]}}}}
    own = {"spec": {"restartPolicy": "Never", "containers": [{"name": "s", "image": "r", "command": ["x"]}]}}
    rayjob = main(job({"rayJob": {"spec": {"rayClusterSpec": cluster, "submitterPodTemplate": own}}}))
    submitter = rayjob["spec"]["submitterPodTemplate"]["spec"]
    assert submitter["securityContext"] == POD_FIELDS and submitter["containers"][0]["command"] == ["x"]
    http = main(job({"rayJob": {"spec": {"rayClusterSpec": cluster, "submissionMode": "HTTPMode"}}}))
    assert "submitterPodTemplate" not in http["spec"]


def test_an_autoscaling_head_keeps_its_token_for_the_autoscaler() -> None:
    cluster = {"enableInTreeAutoscaling": True,
               "headGroupSpec": {"template": {"spec": {"containers": [{"name": "h", "image": "r"}]}}},
               "workerGroupSpecs": [{"groupName": "w", "template": {"spec": {"containers": [{"name": "w"}]}}}]}
    head, worker = pod_templates(main(job({"rayJob": {"spec": {"rayClusterSpec": cluster}}})))
    assert "automountServiceAccountToken" not in head["spec"]
    assert worker["spec"]["automountServiceAccountToken"] is False
    assert head["spec"]["containers"][0]["securityContext"] == CONTAINER_FIELDS


def test_dangerous_adds_nothing_anywhere_but_the_downloader_stays_restricted() -> None:
    for workload in (job({"image": "i", "dangerous": True, **STORAGE}),
                     job({"image": "i", "ray": True, "dangerous": True}),
                     service({"image": "i", "dangerous": True}),
                     service({"image": "i", "ray": True, "dangerous": True}),
                     job({"dangerous": True, "job": {"spec": {"template": {"spec": {
                         "containers": [{"name": "a", "image": "b"}]}}}}})):
        objs = children(workload)
        main_obj = next(o for o in objs if o["kind"] in ("Job", "Deployment", "RayJob", "AppWrapper")
                        and o["metadata"]["labels"].get("kaiwo.silogen.ai/type") != "downloader")
        assert "submitterPodTemplate" not in main_obj["spec"]
        for template in pod_templates(main_obj):
            spec = template["spec"]
            assert "securityContext" not in spec and "automountServiceAccountToken" not in spec
            assert all("securityContext" not in c for c in spec["containers"])
    (download,) = [o for o in children(job({"image": "i", "dangerous": True, **STORAGE}))
                   if o["kind"] == "Job" and o["metadata"]["labels"].get("kaiwo.silogen.ai/type") == "downloader"]
    assert check_pod("restricted", download["spec"]["template"]["spec"]) == []


def test_a_malformed_security_context_is_a_render_error_naming_the_field() -> None:
    with pytest.raises(RenderError) as err:
        main(user_job({"containers": [{"name": "a", "image": "b", "securityContext": "root"}]}))
    assert err.value.field == "spec.job.spec.template.spec.containers[0].securityContext"
    with pytest.raises(RenderError) as err:
        main(user_job({"containers": [{"name": "a", "image": "b",
                                       "securityContext": {"capabilities": {"add": "SYS_ADMIN"}}}]}))
    assert err.value.field == "spec.job.spec.template.spec.containers[0].securityContext.capabilities.add"


WORKLOAD_MODELS = {"KaiwoJob": KaiwoJob, "KaiwoService": KaiwoService}
WORKLOAD_EXAMPLES = sorted(p.name for p in EXAMPLES.glob("*.yaml")
                           if yaml.safe_load(p.read_text())["kind"] in WORKLOAD_MODELS)


@pytest.mark.parametrize("example", WORKLOAD_EXAMPLES)
def test_every_pod_template_of_every_example_passes_restricted(example: str) -> None:
    manifest = yaml.safe_load((EXAMPLES / example).read_text())
    model = WORKLOAD_MODELS[manifest["kind"]]
    manifest["metadata"].setdefault("uid", "UID-1")
    templates = every_template(children(model.model_validate(manifest)))
    assert templates
    for template in templates:
        assert check_pod("restricted", template["spec"]) == [], example
