"""The webhooks with their certificate kept by cert-manager (deploy/components/webhooks-cert-manager on top
of deploy/components/webhooks, rendered by kustomize) against the sandbox's cert-manager: the server sees
the Certificate at start and serves cert-manager's Secret, writing neither it nor the caBundle (the
cainjector's); renewals under a stream of creates refuse none; doctor says who keeps the certificate.
Without cert-manager the self-managed path is tests/serve/test_webhook_tls.py's."""

from __future__ import annotations

import datetime
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml
from webhook_support import (
    JOBS,
    NAMESPACE,
    SECRET,
    SECRETS,
    SERVICE,
    JobCreateLoad,
    api,
    ca_bundles,
    doctor_lines,
    labelled_job,
    served_serial,
    service_without_selector,
    stored,
)

from kaiwo_ray.admission import certs
from kaiwo_ray.admission.workloads import Settings
from kaiwo_ray.kube.client import KubeClient
from kaiwo_sandbox.testing import RunningSandbox, eventually, start_sandbox
from serve.webhook_certs import CertSettings
from serve.webhook_server import WebhookServer, WebhookServerOptions

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
CM = ("cert-manager.io", "v1")


def _rendered(tmp_path: Path) -> list[dict[str, Any]]:
    """base + webhooks + webhooks-cert-manager, as an admin's overlay lists them."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl not installed (kustomize renders the components)")
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [os.path.relpath(DEPLOY / "base", overlay)],
        "components": [os.path.relpath(DEPLOY / "components" / c, overlay)
                       for c in ("webhooks", "webhooks-cert-manager")]}))
    result = subprocess.run([kubectl, "kustomize", str(overlay)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningSandbox, list[dict[str, Any]]]]:
    rendered = _rendered(tmp_path_factory.mktemp("kustomize"))
    with start_sandbox(nodes=[], cluster=["cert-manager"]) as sb:
        yield sb, rendered


def _install(sandbox: RunningSandbox, rendered: list[dict[str, Any]], *, short_lived: bool) -> None:
    """The component's issuers, Certificates, configurations and Service; `short_lived`: the serving
    Certificate due for renewal two seconds after each issuance (1h lifetime, renewBefore 59m58s)."""
    core, custom = api(sandbox, "CoreV1Api"), api(sandbox, "CustomObjectsApi")
    core.create_namespace({"metadata": {"name": NAMESPACE}})
    for doc in rendered:
        kind = doc["kind"]
        if kind in ("Issuer", "Certificate"):
            if short_lived and doc["metadata"]["name"] == SERVICE:
                doc = {**doc, "spec": {**doc["spec"], "duration": "1h", "renewBefore": "59m58s"}}
            custom.create_namespaced_custom_object(*CM, NAMESPACE, kind.lower() + "s", doc)
        elif kind.endswith("WebhookConfiguration"):
            custom.create_cluster_custom_object("admissionregistration.k8s.io", "v1", kind.lower() + "s", doc)
        elif kind == "Service" and doc["metadata"]["name"] == SERVICE:
            core.create_namespaced_service(NAMESPACE, service_without_selector(doc))


def _issued(sandbox: RunningSandbox) -> certs.Bundle:
    """cert-manager's Secret, once the cainjector has put its CA into every webhook of ours."""
    def injected() -> certs.Bundle | None:
        secret = stored(sandbox, SECRETS, NAMESPACE, SECRET)
        bundle = certs.from_secret_data(secret["data"]) if secret else None
        return bundle if bundle is not None and ca_bundles(sandbox) == {bundle.ca_bundle()} else None

    return eventually(injected, 15, "cert-manager's certificate issued and its CA injected")


def _server(sandbox: RunningSandbox) -> WebhookServer:
    server = WebhookServer(
        WebhookServerOptions(bind_address="127.0.0.1:0", check_seconds=0.2, switch_seconds=1.0, admission=Settings(),
                             certs=CertSettings(namespace=NAMESPACE, service=SERVICE, secret=SECRET)),
        lambda: KubeClient.from_kubeconfig(str(sandbox.kubeconfig_path)))
    server.start()
    api(sandbox, "CoreV1Api").create_namespaced_endpoints(NAMESPACE, {
        "metadata": {"name": SERVICE},
        "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": server.port}]}]})
    return server


def test_cert_managers_certificate_is_served_renewals_refuse_nothing_and_doctor_says_so(
        cluster: tuple[RunningSandbox, list[dict[str, Any]]]) -> None:
    sandbox, rendered = cluster
    _install(sandbox, rendered, short_lived=True)
    first = _issued(sandbox)
    server = _server(sandbox)
    try:
        assert server.keeper == "cert-manager" and server.certificate == SERVICE
        assert server.serving is not None and served_serial(server.port) == certs.facts(server.serving).serial
        with pytest.raises(RuntimeError, match="cmctl renew"):
            server.rotate()  # cert-manager's certificate: not this server's to rotate
        with JobCreateLoad(sandbox, "cm") as load:
            served: set[int] = set()

            def renewals_served() -> bool:
                served.add(served_serial(server.port))
                return len(served) >= 3  # the first certificate and two renewals, each presented in turn

            eventually(renewals_served, 15, "two renewals by cert-manager served by the webhook server",
                       interval=0.05)
            count = len(load.created)
            eventually(lambda: len(load.created) >= count + 5, 10, "creates after the renewals")
    finally:
        server.stop()

    assert load.failures == []
    assert load.created and stored(sandbox, JOBS, "default", load.created[-1])["metadata"]["labels"][
        "kueue.x-k8s.io/queue-name"] == "kaiwo"  # mutated through the webhook, over cert-manager's TLS
    secret = stored(sandbox, SECRETS, NAMESPACE, SECRET)
    assert secret["metadata"]["annotations"]["cert-manager.io/certificate-name"] == SERVICE  # never rewritten by us
    assert certs.from_secret_data(secret["data"]) != first
    assert certs.split_pem(certs.from_secret_data(secret["data"]).ca_pem) == certs.split_pem(first.ca_pem)  # type: ignore[union-attr]

    lines = doctor_lines(sandbox)
    assert lines[0].startswith("OK    webhooks: certificate valid until ")
    assert lines[0].endswith(f"kept by cert-manager (Certificate {NAMESPACE}/{SERVICE})")
    assert datetime.datetime.now(datetime.UTC) < certs.facts(certs.from_secret_data(secret["data"])).not_after  # type: ignore[arg-type]


def test_the_components_rbac_lets_the_server_find_cert_managers_certificate(
        cluster: tuple[RunningSandbox, list[dict[str, Any]]], tmp_path: Path) -> None:
    """RBAC enforced, the server as the operator's service account with only the two components' roles:
    it learns that cert-manager keeps its Secret (a Forbidden list would leave it minting its own)."""
    rendered = cluster[1]
    with start_sandbox(nodes=[], cluster=["cert-manager"], authorization="RBAC") as sb:
        _install(sb, rendered, short_lived=False)
        api(sb, "CoreV1Api").create_namespaced_service_account(NAMESPACE, {"metadata": {"name": "kaiwo-ray"}})
        create: Any = kubernetes.utils.create_from_dict
        for doc in rendered:
            if doc["kind"] in ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding") and \
                    doc["metadata"]["name"].startswith("kaiwo-ray-webhook"):
                create(sb.api_client(), doc)
        issued = _issued(sb)
        kubeconfig = sb.kubeconfig_for(sb.service_account_token(NAMESPACE, "kaiwo-ray"), tmp_path / "sa.kubeconfig")
        server = WebhookServer(
            WebhookServerOptions(bind_address="127.0.0.1:0", check_seconds=3600,
                                 certs=CertSettings(namespace=NAMESPACE, service=SERVICE, secret=SECRET)),
            lambda: KubeClient.from_kubeconfig(str(kubeconfig)))
        server.start()
        try:
            assert server.keeper == "cert-manager" and server.serving == issued
        finally:
            server.stop()


def test_adding_the_component_to_a_running_install_hands_the_certificate_to_cert_manager(
        cluster: tuple[RunningSandbox, list[dict[str, Any]]]) -> None:
    """Installed without webhooks-cert-manager (the server keeps its own), then the component applied: at
    its next check the server finds the Certificate, stops keeping the Secret and presents cert-manager's
    certificate once the cainjector has put its CA into the caBundle."""
    rendered = cluster[1]
    plain = [{**d, "metadata": {k: v for k, v in d["metadata"].items() if k != "annotations"}}
             if d["kind"].endswith("WebhookConfiguration") else d for d in rendered]
    with start_sandbox(nodes=[], cluster=["cert-manager"]) as sb:
        _install(sb, [d for d in plain if d["kind"] not in ("Issuer", "Certificate")], short_lived=False)
        server = _server(sb)
        try:
            assert server.keeper == "operator"
            batch = api(sb, "BatchV1Api")
            batch.create_namespaced_job("default", labelled_job("before"))
            custom = api(sb, "CustomObjectsApi")
            for doc in rendered:
                if doc["kind"] in ("Issuer", "Certificate"):
                    custom.create_namespaced_custom_object(*CM, NAMESPACE, doc["kind"].lower() + "s", doc)
                elif doc["kind"].endswith("WebhookConfiguration"):
                    custom.patch_cluster_custom_object("admissionregistration.k8s.io", "v1", doc["kind"].lower() + "s",
                                                       "kaiwo-ray", {"metadata": doc["metadata"]})
            issued = eventually(lambda: (s := stored(sb, SECRETS, NAMESPACE, SECRET)) and (
                s["metadata"].get("annotations") or {}).get("cert-manager.io/certificate-name") and _issued(sb),
                15, "cert-manager's certificate in the Secret")
            eventually(lambda: server.check() and server.serving == issued, 15, "cert-manager's certificate served")
            assert server.keeper == "cert-manager"
            batch.create_namespaced_job("default", labelled_job("after"))
            assert stored(sb, JOBS, "default", "after")["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "kaiwo"
        finally:
            server.stop()
