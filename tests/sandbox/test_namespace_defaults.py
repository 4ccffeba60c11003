"""Every namespace gets kube-controller-manager's `default` ServiceAccount and `kube-root-ca.crt`
ConfigMap, through the official client: at start-up, on creation, after deletion."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import kubernetes
from kubernetes.client import ApiException

from kaiwo_sandbox.cluster.namespaces import PLACEHOLDER_CA_PEM
from kaiwo_sandbox.pytest_plugin import SandboxFactory
from kaiwo_sandbox.testing import eventually


def _names(items: list[Any]) -> set[str]:
    return {item.metadata.name for item in items}


def _has_defaults(core: Any, namespace: str) -> bool:
    return ("default" in _names(core.list_namespaced_service_account(namespace).items)
            and "kube-root-ca.crt" in _names(core.list_namespaced_config_map(namespace).items))


def test_every_namespace_gets_its_default_service_account_and_root_ca(sandbox_factory: SandboxFactory,
                                                                       tmp_path: Path) -> None:
    sb = sandbox_factory(nodes=[], cluster=["namespace-defaults"], state_dir=tmp_path / "state")
    core = kubernetes.client.CoreV1Api(sb.api_client())
    for namespace in ("default", "kube-system", "kube-public", "kube-node-lease"):  # there at start-up
        eventually(lambda ns=namespace: _has_defaults(core, ns), timeout=10, message=namespace)
    core.create_namespace({"metadata": {"name": "team-a"}})
    eventually(lambda: _has_defaults(core, "team-a"), timeout=10)

    # The CA is the one the API server's certificate verifies against (the kubeconfig's CA).
    root_ca = core.read_namespaced_config_map("kube-root-ca.crt", "team-a")
    assert root_ca.data["ca.crt"] == Path(sb.ca_cert_path).read_text()
    ssl.create_default_context(cadata=root_ca.data["ca.crt"])  # a parseable PEM
    assert "kubernetes.io/description" in root_ca.metadata.annotations

    # Deleted -> made again (a new uid); changed data -> put back.
    account_uid = core.read_namespaced_service_account("default", "team-a").metadata.uid
    core.delete_namespaced_service_account("default", "team-a")
    core.delete_namespaced_config_map("kube-root-ca.crt", "team-a")
    eventually(lambda: _has_defaults(core, "team-a")
               and core.read_namespaced_service_account("default", "team-a").metadata.uid != account_uid, timeout=10)
    core.patch_namespaced_config_map("kube-root-ca.crt", "team-a", {"data": {"ca.crt": "tampered"}})
    eventually(lambda: core.read_namespaced_config_map("kube-root-ca.crt", "team-a").data["ca.crt"]
               == Path(sb.ca_cert_path).read_text(), timeout=10)

    # A terminating namespace is left alone, and goes away.
    core.delete_namespace("team-a")

    def gone() -> bool:
        try:
            core.read_namespace("team-a")
        except ApiException as err:
            return err.status == 404
        return False

    eventually(gone, timeout=10)


def test_namespaces_restored_from_state_get_them_too(sandbox_factory: SandboxFactory, tmp_path: Path) -> None:
    first = sandbox_factory(nodes=[], state_dir=tmp_path / "state")  # no controllers: nothing made
    core = kubernetes.client.CoreV1Api(first.api_client())
    core.create_namespace({"metadata": {"name": "restored"}})
    assert core.list_namespaced_service_account("restored").items == []
    first.stop()
    second = sandbox_factory(nodes=[], cluster=["namespace-defaults"], state_dir=tmp_path / "state")
    core = kubernetes.client.CoreV1Api(second.api_client())
    eventually(lambda: _has_defaults(core, "restored"), timeout=10)


def test_plain_http_sandbox_gets_a_placeholder_ca(sandbox_factory: SandboxFactory) -> None:
    sb = sandbox_factory(nodes=[], cluster=["namespace-defaults"], tls=False)
    core = kubernetes.client.CoreV1Api(sb.api_client())
    eventually(lambda: _has_defaults(core, "default"), timeout=10)
    assert core.read_namespaced_config_map("kube-root-ca.crt", "default").data == {"ca.crt": PLACEHOLDER_CA_PEM}
