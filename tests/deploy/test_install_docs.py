"""docs/install.md and the README, done as a new admin does them: their commands and overlays are read out
of the documents (never retyped here) and run, with kubectl's kustomize or against the sandbox."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml
from deploy_support import DEPLOY, kustomize

from kaiwo_sandbox.testing import RunningSandbox, eventually, start_sandbox

REPO = DEPLOY.parent
INSTALL_MD = (REPO / "docs" / "install.md").read_text()
README = (REPO / "README.md").read_text()


def section(text: str, heading: str) -> str:
    """The text under the first heading that starts with `heading`, up to the next heading of any level
    (a `#` line inside a fenced block is a comment, not a heading)."""
    lines: list[str] = []
    fenced = inside = False
    for line in text.splitlines():
        fenced = fenced != line.lstrip().startswith("```")
        is_heading = not fenced and re.match(r"#+ ", line) is not None
        if is_heading and inside:
            break
        if inside:
            lines.append(line)
        inside = inside or (is_heading and line.lstrip("#").strip().startswith(heading))
    assert lines, f"no heading {heading!r}"
    return "\n".join(lines) + "\n"


def yaml_block(text: str, marker: str) -> dict[str, Any]:
    """The fenced yaml block that contains `marker`."""
    for block in re.findall(r"```yaml\n(.*?)```", text, re.DOTALL):
        if marker in block:
            loaded: dict[str, Any] = yaml.safe_load(block)
            return loaded
    raise AssertionError(f"no yaml block with {marker!r}")


def kubectl_commands(text: str) -> list[list[str]]:
    """Every `kubectl apply|delete ...` the text tells the reader to run (in code blocks or inline), as argv
    without `kubectl`; comments dropped."""
    found = re.findall(r"(?:^|`)kubectl ((?:apply|delete) [^`\n#]+)", text, re.MULTILINE)
    return [shlex.split(command.strip()) for command in found]


def checkout_beside(tmp_path: Path) -> Path:
    """The layout the install guide's overlays assume: this repository as ../kaiwo-ray next to the overlay."""
    checkout = tmp_path / "kaiwo-ray"
    shutil.copytree(DEPLOY, checkout / "deploy")
    return checkout


def build_overlay(kubectl_bin: str, tmp_path: Path, overlay: dict[str, Any], name: str) -> list[dict[str, Any]]:
    checkout_beside(tmp_path)
    directory = tmp_path / name
    directory.mkdir()
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(overlay))
    return [d for d in yaml.safe_load_all(kustomize(kubectl_bin, directory)) if d]


def containers(obj: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if obj["kind"] == "RayService":
        cluster = obj["spec"]["rayClusterConfig"]
        for group in [cluster["headGroupSpec"], *cluster.get("workerGroupSpecs", [])]:
            yield from group["template"]["spec"]["containers"]
    elif obj["kind"] in ("Deployment", "DaemonSet", "StatefulSet", "Job"):
        yield from obj["spec"]["template"]["spec"]["containers"]


# -- what it creates -------------------------------------------------------------------------------------


def test_the_crd_count_is_what_deploy_installs(rendered: list[dict[str, Any]]) -> None:
    match = re.search(r"^\| (\d+) CRDs \(([^)]*)\)", section(INSTALL_MD, "3. Install"), re.MULTILINE)
    assert match, "install.md's table names no CRD count"
    crds = [o for o in rendered if o["kind"] == "CustomResourceDefinition"]
    assert int(match.group(1)) == len(crds)
    assert sorted(k.strip() for k in match.group(2).split(",")) == sorted(c["spec"]["names"]["kind"] for c in crds)


# -- the image ------------------------------------------------------------------------------------------


def test_the_documented_overlay_runs_the_admins_image_everywhere(kubectl_bin: str, tmp_path: Path) -> None:
    overlay = yaml_block(section(INSTALL_MD, "Choosing components"), "kind: Kustomization")
    (image,) = overlay["images"]
    objects = build_overlay(kubectl_bin, tmp_path, overlay, "my-kaiwo")
    images = {c["image"] for o in objects for c in containers(o)}
    assert images == {f"{image['newName']}:{image['newTag']}"}, images
    service = next(o for o in objects if o["kind"] == "RayService")
    assert len(list(containers(service))) == 2  # the head and the telemetry worker: both took it


def test_deploy_as_shipped_runs_the_released_image(rendered: list[dict[str, Any]]) -> None:
    import kaiwo_ray

    ours = {c["image"] for o in rendered for c in containers(o) if "kube-scheduler" not in c["image"]}
    assert ours == {f"ghcr.io/silogen/kaiwo-ray:{kaiwo_ray.__version__}"}


# -- the install itself -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def without_prometheus() -> Iterator[RunningSandbox]:
    """A cluster with everything kaiwo-ray needs but no Prometheus operator (no monitoring.coreos.com)."""
    with start_sandbox(nodes=[]) as sb:
        extensions: Any = kubernetes.client.ApiextensionsV1Api(sb.api_client())
        for crd in extensions.list_custom_resource_definition().items:
            if crd.spec.group == "monitoring.coreos.com":
                extensions.delete_custom_resource_definition(crd.metadata.name)
        eventually(lambda: not [c for c in extensions.list_custom_resource_definition().items
                                if c.spec.group == "monitoring.coreos.com"], timeout=30)
        yield sb


def _run(kubectl_bin: str, sb: RunningSandbox, argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([kubectl_bin, "--kubeconfig", str(sb.kubeconfig_path), *argv], capture_output=True,
                          text=True, timeout=120, cwd=REPO)


def test_the_one_command_install_works_without_the_prometheus_operator(
        kubectl_bin: str, without_prometheus: RunningSandbox) -> None:
    install = section(INSTALL_MD, "3. Install")
    first = kubectl_commands(install)[0]
    assert first == ["apply", "-k", "deploy/"]
    result = _run(kubectl_bin, without_prometheus, [*first, "--server-side"])
    assert result.returncode == 0, result.stderr
    assert first in kubectl_commands(README)  # the README's one command is the same
    # and the documented second step is what needs the operator's CRDs, and says so by failing here
    (monitoring,) = [c for c in kubectl_commands(install) if c[:2] == ["apply", "-k"] and c != first]
    refused = _run(kubectl_bin, without_prometheus, monitoring)
    assert refused.returncode != 0, refused.stdout  # kubectl finds no PodMonitor kind on this server
    assert "could not find the requested resource" in refused.stderr or "PodMonitor" in refused.stderr


def test_the_monitoring_step_adds_the_monitors_with_credentials(kubectl_bin: str) -> None:
    (monitoring,) = [c for c in kubectl_commands(section(INSTALL_MD, "3. Install")) if c[-1].startswith("deploy/m")]
    objects = [d for d in yaml.safe_load_all(kustomize(kubectl_bin, REPO / monitoring[-1])) if d]
    kinds = {(o["kind"], o["metadata"]["name"]) for o in objects}
    assert {("PodMonitor", "kaiwo-ray"), ("ServiceMonitor", "kaiwo-ray-admin"),
            ("ServiceAccount", "kaiwo-ray-metrics-reader"), ("Secret", "kaiwo-ray-metrics-reader-token"),
            ("ClusterRoleBinding", "kaiwo-ray-metrics-reader"), ("PrometheusRule", "kaiwo-ray"),
            ("ConfigMap", "kaiwo-ray-dashboard")} == kinds
    secret = next(o for o in objects if o["kind"] == "Secret")
    assert secret["type"] == "kubernetes.io/service-account-token"
    assert secret["metadata"]["annotations"]["kubernetes.io/service-account.name"] == "kaiwo-ray-metrics-reader"
    credentials = {"type": "Bearer", "credentials": {"name": secret["metadata"]["name"], "key": "token"}}
    endpoints = [e for o in objects if o["kind"] == "ServiceMonitor" for e in o["spec"]["endpoints"]] + \
        [e for o in objects if o["kind"] == "PodMonitor" for e in o["spec"]["podMetricsEndpoints"]]
    assert len(endpoints) == 3  # the admin API, every Ray pod's metrics agent, the head's GPU aggregator
    assert all(e["authorization"] == credentials and e["path"] == "/metrics" for e in endpoints), endpoints
    binding = next(o for o in objects if o["kind"] == "ClusterRoleBinding")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "kaiwo-ray-metrics-reader",
                                    "namespace": "kaiwo-system"}]


def test_the_metrics_reader_role_allows_get_metrics_and_nothing_else(rendered: list[dict[str, Any]]) -> None:
    (role,) = [o for o in rendered if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "kaiwo-ray-metrics-reader"]
    assert role["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    assert "kaiwo-ray-metrics-reader" in section(INSTALL_MD, "Prometheus")  # the binding for Prometheus's own SA


def test_the_readme_workstation_commands_install_the_scheduler_every_pod_names(kubectl_bin: str) -> None:
    from kaiwo_ray.api.config import KaiwoConfigSpec

    text = README[README.index("from a workstation"):]
    text = text[:text.index("\n#")]
    commands = kubectl_commands(text)
    assert commands, "the README names no command for the workstation install"
    with start_sandbox(nodes=[]) as sb:  # a cluster of its own: nothing else applied the scheduler
        for argv in commands:
            result = _run(kubectl_bin, sb, argv)
            assert result.returncode == 0, f"kubectl {' '.join(argv)}: {result.stderr}"
        scheduler = KaiwoConfigSpec().scheduling.kube_scheduler_name
        apps: Any = kubernetes.client.AppsV1Api(sb.api_client())
        found = apps.list_namespaced_deployment("kube-system").items
    assert [d.metadata.name for d in found] == [scheduler], "the commands leave out the scheduler every pod names"
    deployment = found[0]
    assert deployment.spec.template.spec.containers[0].command[0].endswith("/kube-scheduler")


# -- versions named -----------------------------------------------------------------------------------


def test_every_ref_the_docs_name_exists() -> None:
    """`?ref=X` and `git checkout X` in the README and docs/ name something git resolves here, or a
    placeholder in angle brackets."""
    named: list[tuple[str, str]] = []
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for ref in re.findall(r"\?ref=([^\s`)#]+)|git checkout ([^\s`)#]+)", path.read_text()):
            named.append((path.name, next(r for r in ref if r)))
    for where, ref in named:
        if ref.startswith("<") and ref.endswith(">"):
            continue
        resolved = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], cwd=REPO,
                                  capture_output=True, text=True)
        assert resolved.returncode == 0, f"{where} names {ref}, which is no tag, branch or commit"


# -- opt-in features --------------------------------------------------------------------------------------


def test_the_documented_switches_turn_on_monitoring_and_preemption(kubectl_bin: str, tmp_path: Path) -> None:
    """The install guide's overlay, built, gives the head the environment from which the deployed operator
    (actors/operator_app.py) starts both opt-in controllers, preemption's Lease in kaiwo-system."""
    from actors.operator_app import settings_from_env

    overlay = yaml_block(section(INSTALL_MD, "Resource monitoring and GPU preemption"), "kind: Kustomization")
    objects = build_overlay(kubectl_bin, tmp_path, overlay, "my-kaiwo")
    service = next(o for o in objects if o["kind"] == "RayService")
    env: dict[str, str] = {}
    for var in service["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["containers"][0]["env"]:
        if "value" in var:
            env[var["name"]] = var["value"]
        elif var["valueFrom"].get("fieldRef", {}).get("fieldPath") == "metadata.namespace":
            env[var["name"]] = service["metadata"]["namespace"]  # the downward API: the pod's namespace
    settings, names, _ = settings_from_env({**env, "KAIWO_IN_CLUSTER": "false"})  # read outside a pod
    assert {"resourcemonitor", "gpuworkload"} <= set(names)
    assert settings.controller_options["gpuworkload"]["settings"].lease_namespace == "kaiwo-system"
    assert settings_from_env({"KAIWO_IN_CLUSTER": "false"})[1] == [
        "kaiwoconfig", "kaiwoqueueconfig", "aimnamespaceconfig", "kaiwojob", "kaiwoservice"]  # switches off
