"""What the webhook TLS tests share (test_webhook_tls.py: the operator keeps the certificate;
test_webhook_cert_manager.py: cert-manager does): the component's names, typed-loosely clients of the
sandbox, the certificate a server presents, the injected caBundles, doctor's lines, and a stream of
labelled Job creates that records every refusal."""

from __future__ import annotations

import datetime
import socket
import ssl
import threading
from types import TracebackType
from typing import Any

import kubernetes

from kaiwo_ray.kube.client import KubeClient
from kaiwo_sandbox.contracts import GVR
from kaiwo_sandbox.testing import RunningSandbox

NAMESPACE, SERVICE, SECRET = "kaiwo-system", "kaiwo-ray-webhooks", "kaiwo-ray-webhook-cert"
JOBS = GVR("batch", "v1", "jobs")
SECRETS = GVR("", "v1", "secrets")
MUTATING = GVR("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations")
VALIDATING = GVR("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations")


def api(sandbox: RunningSandbox, kind: str) -> Any:
    """A typed-loosely client of the sandbox (the kubernetes package takes dict bodies at run time)."""
    return getattr(kubernetes.client, kind)(sandbox.api_client())


def stored(sandbox: RunningSandbox, gvr: GVR, namespace: str | None, name: str) -> Any:
    return sandbox.store.find_ref(gvr, namespace, name)


def labelled_job(name: str) -> dict[str, Any]:
    """A Job the mutating webhook handles (it carries the managed label)."""
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "labels": {"kaiwo.silogen.ai/managed": "true"}},
            "spec": {"template": {"spec": {"restartPolicy": "Never",
                                           "containers": [{"name": "main", "image": "busybox"}]}}}}


def service_without_selector(doc: dict[str, Any]) -> dict[str, Any]:
    """The component's Service with no selector (the sandbox has no webhook pod here): its port targets
    the named port of the Endpoints a test writes by hand."""
    service = {**doc, "spec": {k: v for k, v in doc["spec"].items() if k != "selector"}}
    service["spec"]["ports"] = [{**p, "targetPort": "webhooks"} for p in service["spec"]["ports"]]
    return service


def served_serial(port: int) -> int:
    """The serial of the certificate the server presents to a new connection."""
    from cryptography import x509

    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
            context.wrap_socket(raw, server_hostname=f"{SERVICE}.{NAMESPACE}.svc") as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return int(x509.load_der_x509_certificate(der).serial_number)


def ca_bundles(sandbox: RunningSandbox) -> set[str]:
    found: set[str] = set()
    for gvr in (MUTATING, VALIDATING):
        config = stored(sandbox, gvr, None, "kaiwo-ray")
        found |= {str(w["clientConfig"].get("caBundle", "")) for w in config["webhooks"]}
    return found


def doctor_lines(sandbox: RunningSandbox) -> list[str]:
    import asyncio

    from kaiwo_ray.doctor.gather import webhooks

    async def run() -> list[str]:
        client = await KubeClient.from_kubeconfig(str(sandbox.kubeconfig_path))
        try:
            return [r.line() for r in await webhooks(client, NAMESPACE, datetime.datetime.now(datetime.UTC))]
        finally:
            await client.close()

    return asyncio.run(run())


class JobCreateLoad:
    """Labelled Jobs `<prefix>-0`, `<prefix>-1`, ... created one after another in `default` on a thread
    while the `with` block runs: `created` names the admitted ones, `failures` every refusal."""

    def __init__(self, sandbox: RunningSandbox, prefix: str) -> None:
        self.sandbox, self.prefix = sandbox, prefix
        self.created: list[str] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        batch = api(self.sandbox, "BatchV1Api")
        i = 0
        while not self._stop.is_set():
            name = f"{self.prefix}-{i}"
            try:
                batch.create_namespaced_job("default", labelled_job(name))
                self.created.append(name)
            except kubernetes.client.ApiException as err:
                self.failures.append(f"{name}: {err.status} {err.body}")
            i += 1

    def __enter__(self) -> JobCreateLoad:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(30)
