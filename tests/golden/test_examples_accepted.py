"""The API server accepts every example and everything it renders to.

Each example manifest and each rendered object is created with `dryRun=All` on the sandbox through
the official `kubernetes` client, so the sandbox's validation (built-in kinds, CRD schemas of
Kaiwo, Kueue, KubeRay and AppWrapper) judges them exactly as a create would, without side effects.
A golden file that the API server would reject is a wrong golden.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.cli.render import render_default_queue_config, render_file
from kaiwo_ray.manifests import load_documents
from kaiwo_sandbox.testing import start_sandbox

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
# What the API server assigns on create; rendering from a file leaves owner UIDs empty.
FAKE_OWNER_UID = "3f1c2a4e-8b7d-4c6a-9e5f-0a1b2c3d4e5f"


@pytest.fixture(scope="module")
def dynamic() -> Iterator[DynamicClient]:
    with start_sandbox() as sandbox:
        client = sandbox.api_client()
        try:
            yield DynamicClient(client)
        finally:
            client.close()


def manifests() -> list[str]:
    return sorted(path.name for path in EXAMPLES.glob("*.yaml"))


def dry_run_create(dynamic: DynamicClient, obj: JsonObj) -> None:
    resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
    try:
        resource.create(
            body=obj, namespace=obj["metadata"].get("namespace"), query_params=[("dryRun", "All")]
        )
    except ApiException as exc:
        pytest.fail(f'{obj["kind"]} "{obj["metadata"]["name"]}" rejected: {exc.status} {exc.body}')


def with_owner_uids(obj: JsonObj) -> JsonObj:
    for reference in obj["metadata"].get("ownerReferences", []):
        reference["uid"] = reference["uid"] or FAKE_OWNER_UID
    return obj


@pytest.mark.parametrize("example", manifests())
def test_example_manifest_is_accepted(dynamic: DynamicClient, example: str) -> None:
    for obj in load_documents(str(EXAMPLES / example)):
        dry_run_create(dynamic, obj)


@pytest.mark.parametrize("example", manifests())
def test_rendered_objects_are_accepted(dynamic: DynamicClient, example: str) -> None:
    rendered = render_file(str(EXAMPLES / example))
    assert rendered
    for obj in rendered:
        dry_run_create(dynamic, with_owner_uids(obj))


def test_the_default_queue_config_of_docs_nodes_is_accepted(dynamic: DynamicClient) -> None:
    rendered = render_default_queue_config(nodes_source=str(REPO / "docs" / "nodes.yaml"))
    assert rendered
    for obj in rendered:
        dry_run_create(dynamic, with_owner_uids(obj))


def test_kubectl_apply_f_examples_applies_every_file(tmp_path: Path) -> None:
    """`kubectl apply -f examples/` takes the whole directory: every file there is a manifest."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl not installed")
    with start_sandbox(nodes=[]) as sandbox:
        result = subprocess.run([kubectl, "--kubeconfig", str(sandbox.kubeconfig_path), "apply", "-f",
                                 str(EXAMPLES), "--dry-run=server"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.strip().splitlines()) == len(manifests())
