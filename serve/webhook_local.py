"""The webhooks of `kaiwo-ray dev`: the same server and certificate keeping as in a cluster, registered in
the sandbox the way deploy/components/webhooks registers them, so the sandbox calls them exactly as a
real API server calls the installed ones (`https://kaiwo-ray-webhooks.kaiwo-system.svc:443`, verified
against the caBundle). The one difference: the server listens on 127.0.0.1 of this machine, so its
Service has no selector and an Endpoints object names that address (the sandbox dials an Endpoints
address for a Service without a selector, as kube-proxy would)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from kaiwo_ray.admission.registration import configurations
from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.kube.errors import AlreadyExists
from kaiwo_ray.kube.resources import (
    ENDPOINTS,
    MUTATINGWEBHOOKCONFIGURATIONS,
    NAMESPACES,
    SERVICES,
    VALIDATINGWEBHOOKCONFIGURATIONS,
    Resource,
)
from serve.webhook_certs import CertSettings
from serve.webhook_server import WebhookServer, WebhookServerOptions, client_factory

SERVICE_PORT = 443
LABELS = {"app.kubernetes.io/name": "kaiwo-ray", "app.kubernetes.io/component": "webhooks"}


async def create_or_replace(client: KubeClient, res: Resource, body: dict[str, Any]) -> None:
    meta = body["metadata"]
    try:
        await client.create(res, body, meta.get("namespace"))
    except AlreadyExists:
        current = await client.get(res, meta["name"], meta.get("namespace"))
        body = {**body, "metadata": {**meta, "resourceVersion": current["metadata"]["resourceVersion"]}}
        await client.replace(res, body)


async def _namespace(kubeconfig: str | None, namespace: str) -> None:
    client = await KubeClient.from_kubeconfig(kubeconfig)
    try:
        with contextlib.suppress(AlreadyExists):
            await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    finally:
        await client.close()


async def _register(kubeconfig: str | None, settings: CertSettings, port: int, ca_bundle: str) -> None:
    client = await KubeClient.from_kubeconfig(kubeconfig)
    try:
        meta = {"name": settings.service, "namespace": settings.namespace, "labels": LABELS}
        await create_or_replace(client, SERVICES, {
            "apiVersion": "v1", "kind": "Service", "metadata": meta,
            "spec": {"type": "ClusterIP", "ports": [{"name": "https", "port": SERVICE_PORT, "protocol": "TCP"}]}})
        await create_or_replace(client, ENDPOINTS, {
            "apiVersion": "v1", "kind": "Endpoints", "metadata": meta,
            "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": port}]}]})
        for config in configurations(ca_bundle=ca_bundle,
                                     service=(settings.namespace, settings.service, SERVICE_PORT)):
            config["metadata"]["labels"] = {"app.kubernetes.io/name": "kaiwo-ray"}
            res = MUTATINGWEBHOOKCONFIGURATIONS if config["kind"].startswith("Mutating") \
                else VALIDATINGWEBHOOKCONFIGURATIONS
            await create_or_replace(client, res, config)
    finally:
        await client.close()


def start_local(kubeconfig: str | None, *, port: int = 0, settings: CertSettings | None = None) -> WebhookServer:
    """The webhook server on 127.0.0.1:`port` (0: any free one), registered in the cluster of `kubeconfig`."""
    settings = settings or CertSettings()
    asyncio.run(_namespace(kubeconfig, settings.namespace))  # the Secret's namespace, before the server writes it
    server = WebhookServer(WebhookServerOptions(bind_address=f"127.0.0.1:{port}", certs=settings),
                           client_factory(kubeconfig=kubeconfig, in_cluster=False))
    server.start()
    try:
        assert server.serving is not None
        asyncio.run(_register(kubeconfig, settings, server.port, server.serving.ca_bundle()))
    except BaseException:
        server.stop()
        raise
    return server
