"""The aggregated admin API of `kaiwo-ray dev`: the admin API's TLS listener on 127.0.0.1 registered in
the sandbox as deploy/components/aggregated-api registers it in a cluster (APIService
`v1alpha1.admin.kaiwo.silogen.ai` backed by Service `kaiwo-system/kaiwo-ray-admin` port 443), so the
`kaiwo` CLI and `kubectl get workloadsummaries` reach it through the Kubernetes API with the kubeconfig
alone. The differences from the installed form: the Service has no selector and an Endpoints object names
127.0.0.1 (the listener is a process of this machine, not a pod), and the APIService skips verifying the
listener's self-signed certificate, as a development registration may."""

from __future__ import annotations

import asyncio
import contextlib
import socket

from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.kube.errors import AlreadyExists
from kaiwo_ray.kube.resources import ENDPOINTS, NAMESPACES, SERVICES, Resource
from serve.webhook_local import create_or_replace

GROUP, VERSION = "admin.kaiwo.silogen.ai", "v1alpha1"
NAMESPACE, SERVICE = "kaiwo-system", "kaiwo-ray-admin"
APISERVICES = Resource("apiregistration.k8s.io", "v1", "apiservices", "APIService", False)
LABELS = {"app.kubernetes.io/name": "kaiwo-ray", "app.kubernetes.io/component": "aggregated-api"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _register(kubeconfig: str | None, port: int) -> None:
    client = await KubeClient.from_kubeconfig(kubeconfig)
    try:
        with contextlib.suppress(AlreadyExists):
            await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        meta = {"name": SERVICE, "namespace": NAMESPACE, "labels": LABELS}
        await create_or_replace(client, SERVICES, {
            "apiVersion": "v1", "kind": "Service", "metadata": meta,
            "spec": {"type": "ClusterIP", "ports": [{"name": "https", "port": 443, "protocol": "TCP"}]}})
        await create_or_replace(client, ENDPOINTS, {
            "apiVersion": "v1", "kind": "Endpoints", "metadata": meta,
            "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": port}]}]})
        await create_or_replace(client, APISERVICES, {
            "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": f"{VERSION}.{GROUP}", "labels": LABELS},
            "spec": {"group": GROUP, "version": VERSION, "groupPriorityMinimum": 100, "versionPriority": 100,
                     "insecureSkipTLSVerify": True,
                     "service": {"namespace": NAMESPACE, "name": SERVICE, "port": 443}}})
    finally:
        await client.close()


def register_local(kubeconfig: str | None, port: int) -> None:
    """Register the listener on 127.0.0.1:`port` as the admin group's backend in the cluster of `kubeconfig`."""
    asyncio.run(_register(kubeconfig, port))
