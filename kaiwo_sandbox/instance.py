"""One running sandbox: store + HTTP server + (optionally) simulated cluster + persistence, with
the seeding a fresh cluster has (system namespaces, nodes, preinstalled CRDs). Runs on the current
asyncio loop; `testing.start_sandbox` and the CLI are thin shells around it."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import logging
import secrets
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from kaiwo_sandbox.apiserver.aggregation.certs import front_proxy
from kaiwo_sandbox.apiserver.aggregation.proxy import Aggregator, extension_apiserver_authentication
from kaiwo_sandbox.apiserver.audit import AuditLog
from kaiwo_sandbox.apiserver.auth import bootstrap as rbac_bootstrap
from kaiwo_sandbox.apiserver.auth.access import Access
from kaiwo_sandbox.apiserver.auth.authz import AuthorizationMode
from kaiwo_sandbox.apiserver.fastpath import LeanFront, LeanHttp
from kaiwo_sandbox.apiserver.faults import FaultInjector
from kaiwo_sandbox.apiserver.server import MAX_REQUEST_BODY_BYTES, ApiServer
from kaiwo_sandbox.apiserver.tls import ServingCert, serving_cert
from kaiwo_sandbox.apiserver.tls import generate as generate_cert
from kaiwo_sandbox.cluster.base import ClusterSettings
from kaiwo_sandbox.cluster.crds import cert_manager_crds, preinstalled_crds
from kaiwo_sandbox.cluster.nodes import gpu_exporter
from kaiwo_sandbox.contracts import (
    CONFIGMAPS,
    LEASES,
    NAMESPACES,
    NODES,
    SERVICES,
    ApiError,
    Clock,
    JsonObj,
    ManualClock,
    RealClock,
    rfc3339_micro,
)
from kaiwo_sandbox.runtime.processes import LocalRuntime
from kaiwo_sandbox.storage import snapshot
from kaiwo_sandbox.storage.crd_install import install_crds
from kaiwo_sandbox.storage.event_ttl import EventExpiry
from kaiwo_sandbox.storage.persistence import Persister, load_or_create_token, load_state, save_state
from kaiwo_sandbox.storage.store import ObjectStore, clone

log = logging.getLogger(__name__)

NODE_LEASE_NAMESPACE = "kube-node-lease"
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", NODE_LEASE_NAMESPACE)
ADMIN_USER = "kaiwo-admin"
CONTEXT = "kaiwo-sandbox"


@dataclass(slots=True)
class SandboxConfig:
    host: str = "127.0.0.1"
    port: int = 0  # 0: pick a free port
    nodes: list[JsonObj] = field(default_factory=list)  # the Nodes a fresh cluster has (the product passes its set)
    cluster: bool | Iterable[str] = False  # True: every simulated controller; names: only those
    time_factor: float = 1.0
    cluster_settings: ClusterSettings | None = None
    state_dir: Path | None = None
    kubeconfig_path: Path | None = None
    bookmark_interval: float = 60.0
    install_crds: bool = True
    fault_seed: int = 0
    extra_crds: list[JsonObj] = field(default_factory=list)  # installed beside the preinstalled ones (the product's own CRDs)
    tls: bool = True  # kubectl sends credentials only over TLS; plain HTTP is for special cases
    event_ttl: float = 3600.0  # seconds, like kube-apiserver --event-ttl; 0 keeps events forever
    authorization: AuthorizationMode = "AlwaysAllow"  # "RBAC": Roles and bindings decide (apiserver/auth/authz.py)
    manual_clock: bool = False  # time moves only by ManualClock.advance (tests of TTLs, back-off, grace periods)
    # Images whose pods run as real processes on this machine (any tag): `--local-image` (runtime/, root only).
    local_images: list[str] = field(default_factory=list)
    # Pods whose every command can run on this machine (sh, python3, echo, ...: podspec.LOCAL_PROGRAMS) run
    # as real processes too, whatever their image: `--local-commands` (root only).
    local_commands: bool = False
    aggregator_interval: float = 1.0  # seconds between APIService availability checks (aggregation/)
    clock: Clock | None = None  # the cluster's time (None: real, or manual with manual_clock); simulations pass theirs


# The apiserver's own Service, which every cluster has in `default` (`kubectl get all` lists it).
API_SERVICE: JsonObj = {
    "metadata": {"name": "kubernetes", "namespace": "default",
                 "labels": {"component": "apiserver", "provider": "kubernetes"}},
    "spec": {"clusterIP": "10.96.0.1", "type": "ClusterIP", "sessionAffinity": "None",
             "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}]},
}


def new_event_loop() -> asyncio.AbstractEventLoop:
    """The loop the sandbox serves on: uvloop where installed (it comes with ray[serve]'s uvicorn), whose
    TLS and transports are compiled: ~15% less server CPU per request and a much shorter latency tail
    than asyncio's pure-Python SSL protocol. asyncio's own loop otherwise; behaviour is the same."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def node_lease(node: JsonObj, now: datetime) -> JsonObj:
    """The Lease a kubelet keeps in kube-node-lease for its node (`kubectl describe node` reads it, and
    fails with "Failed to get lease" without one); owned by the node, so deleting the node removes it."""
    meta = node["metadata"]
    return {"metadata": {"name": meta["name"], "namespace": NODE_LEASE_NAMESPACE, "ownerReferences": [
        {"apiVersion": "v1", "kind": "Node", "name": meta["name"], "uid": meta["uid"]}]},
            "spec": {"holderIdentity": meta["name"], "leaseDurationSeconds": 40, "renewTime": rfc3339_micro(now)}}


def kubeconfig(url: str, token: str, ca_pem: bytes | None = None, namespace: str = "default") -> JsonObj:
    cluster: JsonObj = {"server": url}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT, "cluster": cluster}],
        "users": [{"name": CONTEXT, "user": {"token": token}}],
        "contexts": [{"name": CONTEXT, "context": {"cluster": CONTEXT, "user": CONTEXT, "namespace": namespace}}],
        "current-context": CONTEXT,
        "preferences": {},
    }


def check_kubeconfig_target(path: Path) -> None:
    """Refuse to overwrite a kubeconfig that holds other clusters (someone's ~/.kube/config)."""
    if not path.exists():
        return
    try:
        existing = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError):
        existing = {"clusters": [{"name": "?"}]}
    names = {c.get("name") for c in existing.get("clusters") or [] if isinstance(c, dict)} \
        if isinstance(existing, dict) else {"?"}
    if names - {CONTEXT}:
        raise ValueError(f"{path} holds other clusters ({', '.join(sorted(str(n) for n in names - {CONTEXT}))}); "
                         "refusing to overwrite it: pass another --kubeconfig path")


def write_kubeconfig(path: Path, url: str, token: str, ca_pem: bytes | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(yaml.safe_dump(kubeconfig(url, token, ca_pem), sort_keys=False))
    tmp.chmod(0o600)
    tmp.replace(path)


class Sandbox:
    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()
        self.clock: Clock = self.config.clock or (ManualClock(time_factor=self.config.time_factor) if self.config.manual_clock
                             else RealClock(time_factor=self.config.time_factor))
        self.store = ObjectStore(self.clock)
        self.audit = AuditLog()
        self.faults = FaultInjector(seed=self.config.fault_seed)
        state_dir = self.config.state_dir
        fresh = secrets.token_urlsafe(24)
        self.token = load_or_create_token(state_dir, fresh) if state_dir is not None else fresh
        self.access = Access(self.store, {self.token: ADMIN_USER}, self.config.authorization)
        self.server = ApiServer(self.store, tokens={}, audit=self.audit, faults=self.faults,
                                bookmark_interval=self.config.bookmark_interval, access=self.access)
        self.url = ""
        self.port = 0
        self.cert: ServingCert | None = None
        self.cluster: Any = None
        self._runner: web.AppRunner | None = None
        self._listener: asyncio.Server | None = None
        self.lean = LeanFront()  # the lean HTTP front's connections and counts
        self._persister: Persister | None = None
        self._event_expiry: EventExpiry | None = None
        self.local_runtime: LocalRuntime | None = None
        self._pod_listener: asyncio.Server | None = None
        self._pods_root: tempfile.TemporaryDirectory[str] | None = None

    async def start(self) -> None:
        cfg = self.config
        if cfg.kubeconfig_path is not None:
            check_kubeconfig_target(cfg.kubeconfig_path)
        if cfg.state_dir is not None:
            state = load_state(cfg.state_dir)
            if state is not None:
                snapshot.restore(self.store, state)
        self._seed()
        if cfg.state_dir is not None:
            # Durable before serving: the restored counter's jump (snapshot.restore) must survive a crash in
            # the first second, or a restart after it would hand out this run's versions again.
            save_state(cfg.state_dir, snapshot.dump(self.store))
        exporter = partial(gpu_exporter.add_routes, store=self.store)  # served like a node exporter's port
        runner = web.AppRunner(self.server.application([exporter]), access_log=None, handler_cancellation=True,
                               shutdown_timeout=2.0)
        await runner.setup()
        ssl_context = None
        if cfg.local_images or cfg.local_commands:
            self._start_local_runtime()
        if cfg.tls:
            if self.local_runtime is not None:  # pods reach the API server at the pod network's gateway
                self.cert = generate_cert(cfg.host, (self.local_runtime.api_host,))
            else:
                self.cert = serving_cert(cfg.state_dir, cfg.host)
            ssl_context = self.cert.server_context()
        # Plain requests are parsed and answered by the lean front (apiserver/fastpath.py); a watch, a
        # stream or anything unusual hands its connection to aiohttp's handler, as a TCPSite would run it.
        aiohttp_server = runner.server
        assert aiohttp_server is not None
        front = self.lean
        listener = await asyncio.get_running_loop().create_server(
            lambda: LeanHttp(self.server.handle, aiohttp_server, MAX_REQUEST_BODY_BYTES, front),
            cfg.host, cfg.port, ssl=ssl_context, reuse_address=True, backlog=128)
        self._listener = listener
        self._runner = runner
        sockets = list(listener.sockets)
        self.port = sockets[0].getsockname()[1] if sockets else cfg.port
        self.url = f"{'https' if cfg.tls else 'http'}://{cfg.host}:{self.port}"
        self.server.address = f"{cfg.host}:{self.port}"
        if self.local_runtime is not None:
            await self._serve_pod_network(aiohttp_server, ssl_context)
        self._publish_front_proxy()
        if cfg.kubeconfig_path is not None:
            write_kubeconfig(cfg.kubeconfig_path, self.url, self.token, self.cert.cert_pem if self.cert else None)
        if cfg.cluster:
            from kaiwo_sandbox.cluster import start_cluster

            enabled = None if cfg.cluster is True else list(cfg.cluster)
            settings = cfg.cluster_settings or ClusterSettings()
            if self.cert is not None and not settings.root_ca_pem:
                settings = dataclasses.replace(settings, root_ca_pem=self.cert.cert_pem.decode())
            if self.local_runtime is not None:
                settings = dataclasses.replace(settings, local_runtime=self.local_runtime)
            if settings.token_minter is None:
                settings = dataclasses.replace(settings, token_minter=self._legacy_token)
            self.cluster = start_cluster(self.store, self.clock, settings, enabled)
        if cfg.event_ttl > 0:
            self._event_expiry = EventExpiry(self.store, cfg.event_ttl)
            self._event_expiry.start()
        if cfg.state_dir is not None:
            self._persister = Persister(partial(snapshot.dump, self.store), self.store.fanout.write_listeners, cfg.state_dir)
            self._persister.start()

    def _publish_front_proxy(self) -> None:
        """The aggregation layer: kube-system/extension-apiserver-authentication says which client
        certificates aggregated servers trust (this process's front-proxy CA), and the availability
        checks start."""
        front = front_proxy()
        wanted = extension_apiserver_authentication(front, self.cert.cert_pem if self.cert else None)
        meta = wanted["metadata"]
        current = self.store.find_ref(CONFIGMAPS, meta["namespace"], meta["name"])
        if current is None:
            self.store.create_owned(CONFIGMAPS, wanted, managed=False, admit=False)
        elif current.get("data") != wanted["data"]:  # restored from --state with another process's CA
            self.store.update_owned(CONFIGMAPS, {**clone(current), "data": wanted["data"]}, managed=False,
                                    admit=False)
        self.server.aggregator = Aggregator(self.store, front, interval=self.config.aggregator_interval)
        self.server.aggregator.start()

    def _legacy_token(self, namespace: str, name: str) -> str:
        """A token for a legacy token Secret: bound to the ServiceAccount, valid for ten years."""
        return self.service_account_token(namespace, name, seconds=10 * 365 * 86400)

    def _start_local_runtime(self) -> None:
        """The real pods' runtime: their network, and their files under the state directory (else a
        temporary one)."""
        if self.config.state_dir is not None:
            root = self.config.state_dir / "pods"
        else:
            self._pods_root = tempfile.TemporaryDirectory(prefix="kaiwo-sandbox-pods-")
            root = Path(self._pods_root.name)
        runtime = LocalRuntime(self.config.local_images, root, commands=self.config.local_commands)
        runtime.start()
        self.local_runtime = runtime
        self.server.local_runtime = runtime

    async def _serve_pod_network(self, aiohttp_server: Any, ssl_context: Any) -> None:
        """The API server as pods see it: the same server on the pod network's gateway (the port of the
        loopback listener when free), the address real pods get in KUBERNETES_SERVICE_HOST/PORT."""
        runtime = self.local_runtime
        assert runtime is not None
        front = self.lean
        listener: asyncio.Server | None = None
        for port in (self.port, 0):
            try:
                listener = await asyncio.get_running_loop().create_server(
                    lambda: LeanHttp(self.server.handle, aiohttp_server, MAX_REQUEST_BODY_BYTES, front),
                    runtime.api_host, port, ssl=ssl_context, reuse_address=True, backlog=128)
                break
            except OSError:
                continue
        assert listener is not None
        self._pod_listener = listener
        pod_port = int(next(iter(listener.sockets)).getsockname()[1])

        def mint(namespace: str, name: str) -> str:
            try:
                return self.service_account_token(namespace, name, seconds=86400)
            except ApiError:
                return ""  # no such ServiceAccount: the pod's requests are then anonymous

        runtime.configure_api(pod_port, self.cert.cert_pem.decode() if self.cert else "", mint)

    def _seed(self) -> None:
        for name in SYSTEM_NAMESPACES:
            if self.store.find_ref(NAMESPACES, None, name) is None:
                self.store.create_owned(NAMESPACES, {"metadata": {"name": name}}, managed=False, admit=False)
        rbac_bootstrap.seed(self.store)
        if self.store.find_ref(SERVICES, "default", "kubernetes") is None:
            self.store.create_owned(SERVICES, clone(API_SERVICE), managed=False, admit=False)
        if self.config.install_crds:
            cluster = self.config.cluster
            add_ons = cert_manager_crds() if not isinstance(cluster, bool) and "cert-manager" in set(cluster) else []
            install_crds(self.store, list(self.config.extra_crds) + preinstalled_crds() + add_ons)
        nodes = self.config.nodes
        for node in nodes:
            name = (node.get("metadata") or {}).get("name", "")
            seeded = self.store.find_ref(NODES, None, name)  # restored from --state
            if seeded is None:
                try:
                    seeded = self.store.create_owned(NODES, clone(node), managed=False, admit=False)
                except ApiError as err:
                    raise ValueError(f"node {name!r} is not valid: {err.message}") from err
            if self.store.find_ref(LEASES, NODE_LEASE_NAMESPACE, name) is None:
                self.store.create_owned(LEASES, node_lease(seeded, self.clock.now()), managed=False, admit=False)

    async def stop(self) -> None:
        await self.server.admission.close()
        if self.server.aggregator is not None:
            await self.server.aggregator.stop()
            self.server.aggregator = None
        if self._event_expiry is not None:
            await self._event_expiry.stop()
            self._event_expiry = None
        if self.cluster is not None:
            await self.cluster.stop()
            self.cluster = None
        if self.local_runtime is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.local_runtime.close)
            self.local_runtime = None
        if self._pod_listener is not None:
            self._pod_listener.close()
            self._pod_listener = None
        if self._pods_root is not None:
            self._pods_root.cleanup()
            self._pods_root = None
        if self._runner is not None:
            # Open watches would hold a graceful shutdown for its whole timeout: end them first,
            # the way a restarting apiserver closes them (clients re-watch).
            self.faults.cut_watches()
            for _ in range(100):
                if not self.server.open_watches:
                    break
                await asyncio.sleep(0.01)
            if self._listener is not None:
                self._listener.close()
                self._listener = None
            self.lean.close()
            await self._runner.cleanup()
            self._runner = None
        if self._persister is not None:
            await self._persister.stop()
            self._persister = None

    def mint_token(self, user: str, groups: tuple[str, ...] | list[str] = ()) -> str:
        """A bearer token for another client identity (shows up as `user` in the audit log), member of
        `groups` and system:authenticated."""
        return self.server.mint_token(user, groups)

    def service_account_token(self, namespace: str, name: str, seconds: int = 3600) -> str:
        """A token of an existing ServiceAccount (as `kubectl create token` gets one); 404 ApiError without it."""
        from kaiwo_sandbox.apiserver.auth.reviews import token_request

        answer = token_request({"spec": {"expirationSeconds": seconds}}, namespace=namespace, name=name,
                               store=self.store, authn=self.access.authn)
        return str(answer["status"]["token"])

    def revoke_token(self, token: str) -> bool:
        """Stop accepting `token` (what a rotated service-account token looks like to its old holder)."""
        return self.access.authn.revoke(token)
