"""The webhooks in their installed form against the sandbox: the configurations of
deploy/components/webhooks (a Service reference, no caBundle), the webhook server of serve/webhook_server.py
with its certificate in a Secret it creates, the caBundle it injects, and a rotation under load that
refuses no admission."""

from __future__ import annotations

import base64
import datetime
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml
from webhook_support import (
    JOBS,
    MUTATING,
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
from kaiwo_ray.admission.registration import configurations
from kaiwo_ray.admission.workloads import Settings
from kaiwo_ray.kube.client import KubeClient
from kaiwo_sandbox.contracts import GVR
from kaiwo_sandbox.testing import RunningSandbox, eventually
from serve.webhook_certs import CertSettings
from serve.webhook_server import WebhookServer, WebhookServerOptions

ROOT = Path(__file__).resolve().parents[2]
COMPONENT = ROOT / "deploy" / "components" / "webhooks"


def component_documents() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted(COMPONENT.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict) and "kind" in d]
    return docs


def test_the_component_registers_exactly_what_the_code_declares() -> None:
    shipped = {d["kind"]: d for d in component_documents() if d["kind"].endswith("WebhookConfiguration")}
    for config in configurations(service=(NAMESPACE, SERVICE, 443)):
        got = dict(shipped[config["kind"]])
        got["metadata"] = {"name": got["metadata"]["name"]}
        assert got == config, config["kind"]
    service = next(d for d in component_documents() if d["kind"] == "Service")
    assert service["metadata"] == {**service["metadata"], "name": SERVICE, "namespace": NAMESPACE}
    assert service["spec"]["ports"][0]["port"] == 443


@pytest.fixture
def installed(sandbox: RunningSandbox) -> Iterator[WebhookServer]:
    """The component's configurations, Service and (the sandbox has no pods here) an Endpoints object
    naming the server on 127.0.0.1; the server started with a client of the sandbox."""
    core = api(sandbox, "CoreV1Api")
    custom = api(sandbox, "CustomObjectsApi")
    if stored(sandbox, GVR("", "v1", "namespaces"), None, NAMESPACE) is None:
        core.create_namespace({"metadata": {"name": NAMESPACE}})
    server = WebhookServer(
        WebhookServerOptions(bind_address="127.0.0.1:0", certs=CertSettings(namespace=NAMESPACE, service=SERVICE,
                                                                            secret=SECRET),
                             check_seconds=3600, switch_seconds=1.0, admission=Settings()),
        lambda: KubeClient.from_kubeconfig(str(sandbox.kubeconfig_path)))
    for doc in component_documents():
        if doc["kind"].endswith("WebhookConfiguration"):
            custom.create_cluster_custom_object("admissionregistration.k8s.io", "v1", doc["kind"].lower() + "s", doc)
        elif doc["kind"] == "Service":
            core.create_namespaced_service(NAMESPACE, service_without_selector(doc))
    server.start()
    core.create_namespaced_endpoints(NAMESPACE, {
        "metadata": {"name": SERVICE},
        "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": server.port}]}]})
    try:
        yield server
    finally:
        server.stop()


def test_the_server_creates_its_secret_injects_the_ca_bundle_and_admits(sandbox: RunningSandbox,
                                                                        installed: WebhookServer) -> None:
    secret = stored(sandbox, SECRETS, NAMESPACE, SECRET)
    assert secret is not None and secret["type"] == "kubernetes.io/tls"
    bundle = certs.from_secret_data(secret["data"])
    assert bundle is not None
    assert ca_bundles(sandbox) == {base64.b64encode(bundle.ca_pem).decode()}
    assert f"{SERVICE}.{NAMESPACE}.svc" in certs.facts(bundle).names
    assert served_serial(installed.port) == certs.facts(bundle).serial

    batch = api(sandbox, "BatchV1Api")
    batch.create_namespaced_job("default", labelled_job("through-the-service"))
    labels = stored(sandbox, JOBS, "default", "through-the-service")["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "kaiwo"  # the mutating webhook ran over TLS
    # controller-runtime's webhook series, written by this process's /metrics once a server runs here
    from serve import webhook_metrics

    text = webhook_metrics.exposition().decode()
    assert 'controller_runtime_webhook_requests_total{code="200",webhook="/mutate-batch-v1-job"}' in text
    assert 'controller_runtime_webhook_latency_seconds_bucket{le="0.005",webhook="/mutate-batch-v1-job"}' in text
    assert 'controller_runtime_webhook_requests_in_flight{webhook="/mutate-batch-v1-job"} 0.0' in text

    # A restart (a new replica) serves the Secret's certificate instead of minting another.
    assert installed.check().cert_pem == bundle.cert_pem


def test_rotation_updates_the_ca_bundle_and_refuses_no_admission(sandbox: RunningSandbox,
                                                                 installed: WebhookServer) -> None:
    before = certs.from_secret_data(stored(sandbox, SECRETS, NAMESPACE, SECRET)["data"])
    assert before is not None
    with JobCreateLoad(sandbox, "load") as load:
        eventually(lambda: len(load.created) >= 5, 30, "creates before the rotation")
        rotated = installed.rotate()
        # The server switches once the new bundle has had time to spread (switch_seconds), under load.
        eventually(lambda: served_serial(installed.port) == certs.facts(rotated).serial, 10,
                   "the new certificate served")
        served = len(load.created)
        eventually(lambda: len(load.created) >= served + 10, 30, "creates after the switch")

    assert load.failures == []
    assert rotated.cert_pem != before.cert_pem
    kept = certs.from_secret_data(stored(sandbox, SECRETS, NAMESPACE, SECRET)["data"])
    assert kept == rotated
    # The bundle trusts the new CA and the previous one, so a server still on the old certificate verifies.
    assert certs.split_pem(rotated.ca_pem) == [certs.split_pem(rotated.ca_pem)[0], certs.split_pem(before.ca_pem)[0]]
    assert ca_bundles(sandbox) == {rotated.ca_bundle()}
    for name in load.created[-5:]:
        assert stored(sandbox, JOBS, "default", name)["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "kaiwo"


def test_a_certificate_near_expiry_is_rotated_by_the_periodic_check(sandbox: RunningSandbox,
                                                                    installed: WebhookServer) -> None:
    from serve.webhook_certs import CertKeeper

    first = certs.from_secret_data(stored(sandbox, SECRETS, NAMESPACE, SECRET)["data"])
    assert first is not None
    keeper = installed._keeper
    assert isinstance(keeper, CertKeeper)
    expiry = certs.facts(first).not_after
    keeper.clock = lambda: expiry - datetime.timedelta(days=29)  # inside the 30-day lookahead
    renewed = installed.check()
    assert renewed.cert_pem != first.cert_pem
    assert served_serial(installed.port) == certs.facts(first).serial  # until the new bundle has spread
    eventually(lambda: served_serial(installed.port) == certs.facts(renewed).serial, 10, "the renewed one served")
    keeper.clock = lambda: expiry - datetime.timedelta(days=31)
    assert installed.check().cert_pem == renewed.cert_pem  # valid for long enough: kept


def test_kaiwo_ray_devs_registration_reaches_the_server_as_the_installed_one(sandbox: RunningSandbox) -> None:
    """serve/webhook_local.py (what `kaiwo-ray dev` runs): the Service reference and caBundle of the
    component, an Endpoints naming 127.0.0.1; a second start (a restarted dev) reuses the Secret."""
    from serve.webhook_local import start_local

    server = start_local(str(sandbox.kubeconfig_path))
    try:
        mutating = stored(sandbox, MUTATING, None, "kaiwo-ray")
        assert mutating["webhooks"][0]["clientConfig"]["service"] == {
            "namespace": NAMESPACE, "name": SERVICE, "port": 443, "path": "/mutate-batch-v1-job"}
        assert server.serving is not None
        assert ca_bundles(sandbox) == {server.serving.ca_bundle()}
        api(sandbox, "BatchV1Api").create_namespaced_job("default", labelled_job("dev-job"))
        labels = stored(sandbox, JOBS, "default", "dev-job")["metadata"]["labels"]
        assert labels["kueue.x-k8s.io/queue-name"] == "kaiwo"
        first = server.serving
    finally:
        server.stop()
    again = start_local(str(sandbox.kubeconfig_path))
    try:
        assert again.serving == first
        api(sandbox, "BatchV1Api").create_namespaced_job("default", labelled_job("dev-job-2"))
    finally:
        again.stop()


def test_doctor_checks_the_certificate_the_bundle_and_that_the_api_server_reaches_the_server(
        sandbox: RunningSandbox, installed: WebhookServer) -> None:
    lines = doctor_lines(sandbox)
    assert lines[0].startswith("OK    webhooks: certificate valid until ")
    assert lines[1] == ("OK    webhooks: the API server reached them: a dry-run labelled Job in default was mutated")
    assert not sandbox.store.refs(JOBS)  # the probe was a dry run

    custom = api(sandbox, "CustomObjectsApi")
    config = custom.get_cluster_custom_object("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
                                              "kaiwo-ray")
    stranger = certs.issue(["other.svc"], datetime.datetime.now(datetime.UTC)).ca_bundle()
    for hook in config["webhooks"]:
        hook["clientConfig"]["caBundle"] = stranger
    custom.replace_cluster_custom_object("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
                                         "kaiwo-ray", config)
    assert doctor_lines(sandbox)[0].startswith("FAIL  webhooks: the webhooks carry different caBundles")

    installed.check()  # the periodic check puts it right
    assert doctor_lines(sandbox)[0].startswith("OK    webhooks: certificate valid until ")
    installed.stop()
    lines = doctor_lines(sandbox)
    assert lines[1].startswith("FAIL  webhooks: a dry-run Job create in default failed: ")
    assert 'failed calling webhook "mjob.kaiwo.silogen.ai"' in lines[1] and "connection refused" in lines[1]


def test_a_secret_deleted_by_hand_is_recreated_trusting_what_is_served_meanwhile(
        sandbox: RunningSandbox, installed: WebhookServer) -> None:
    serving = installed.serving
    assert serving is not None
    api(sandbox, "CoreV1Api").delete_namespaced_secret(SECRET, NAMESPACE)
    fresh = installed.check()
    assert fresh.cert_pem != serving.cert_pem
    assert certs.split_pem(fresh.ca_pem)[1] == certs.split_pem(serving.ca_pem)[0]
    assert served_serial(installed.port) == certs.facts(serving).serial  # the old one, still trusted
    api(sandbox, "BatchV1Api").create_namespaced_job("default", labelled_job("meanwhile"))


def test_the_components_rbac_is_all_the_certificate_keeping_needs(tmp_path: Path) -> None:
    """RBAC enforced, the server running as the operator's service account with only the component's
    Role and ClusterRole: it creates its Secret, injects the caBundle and rotates."""
    from kaiwo_sandbox.testing import start_sandbox

    with start_sandbox(nodes=[], authorization="RBAC") as sb:
        client = sb.api_client()
        api(sb, "CoreV1Api").create_namespace({"metadata": {"name": NAMESPACE}})
        api(sb, "CoreV1Api").create_namespaced_service_account(NAMESPACE, {"metadata": {"name": "kaiwo-ray"}})
        custom = api(sb, "CustomObjectsApi")
        for doc in component_documents():
            if doc["kind"].endswith("WebhookConfiguration"):
                custom.create_cluster_custom_object("admissionregistration.k8s.io", "v1",
                                                    doc["kind"].lower() + "s", doc)
            elif doc["kind"] in ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"):
                create: Any = kubernetes.utils.create_from_dict
                create(client, doc)
        kubeconfig = sb.kubeconfig_for(sb.service_account_token(NAMESPACE, "kaiwo-ray"), tmp_path / "sa.kubeconfig")
        server = WebhookServer(
            WebhookServerOptions(bind_address="127.0.0.1:0", check_seconds=3600, switch_seconds=0.1,
                                 certs=CertSettings(namespace=NAMESPACE, service=SERVICE, secret=SECRET)),
            lambda: KubeClient.from_kubeconfig(str(kubeconfig)))
        server.start()
        try:
            assert server.serving is not None
            assert ca_bundles(sb) == {server.serving.ca_bundle()}
            rotated = server.rotate()
            assert ca_bundles(sb) == {rotated.ca_bundle()}
        finally:
            server.stop()


def test_the_deployed_switches_start_the_server_from_the_environment(sandbox: RunningSandbox) -> None:
    """What the admin API's replica runs (serve/deployment.py): off unless KAIWO_WEBHOOKS_BIND_ADDRESS is
    set, a wrong value named, and on, the server with the component's names and the admission settings."""
    from serve.webhook_server import options_from_env, start_from_env

    assert options_from_env({}) is None and options_from_env({"KAIWO_WEBHOOKS_BIND_ADDRESS": "0"}) is None
    with pytest.raises(ValueError, match="KAIWO_WEBHOOKS_BIND_ADDRESS"):
        options_from_env({"KAIWO_WEBHOOKS_BIND_ADDRESS": "9443"})
    options = options_from_env({"KAIWO_WEBHOOKS_BIND_ADDRESS": ":9443", "KAIWO_LEASE_NAMESPACE": "ops",
                                "ENFORCE_KAIWO_ON_GPU_WORKLOADS": "TRUE"})
    assert options is not None and options.certs.namespace == "ops" and options.certs.service == SERVICE
    assert options.admission is not None and options.admission.enforce_on_gpu_workloads

    api(sandbox, "CoreV1Api").create_namespace({"metadata": {"name": NAMESPACE}})
    server = start_from_env({"KAIWO_WEBHOOKS_BIND_ADDRESS": "127.0.0.1:0"}, kubeconfig=str(sandbox.kubeconfig_path),
                            in_cluster=False)
    assert server is not None
    try:
        assert stored(sandbox, SECRETS, NAMESPACE, SECRET) is not None
        assert served_serial(server.port) == certs.facts(server.serving).serial  # type: ignore[arg-type]
    finally:
        server.stop()
