"""In-cluster configuration: how a process in a pod reaches the API server, as client-go's rest.InClusterConfig
does it: `https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT`, the service account's CA and token
from /var/run/secrets/kubernetes.io/serviceaccount (`token`, `ca.crt`, `namespace`).

The token is projected and rotated by the kubelet (about hourly), so it is read from the file whenever the
client asks for credentials (the client caches them for a minute, and asks again at once on a 401), never
kept for the process's lifetime. `KAIWO_SERVICE_ACCOUNT_DIR` points at another directory (tests; a
sidecar-mounted token elsewhere).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
DIR_VARIABLE = "KAIWO_SERVICE_ACCOUNT_DIR"
HOST_VARIABLE = "KUBERNETES_SERVICE_HOST"
PORT_VARIABLE = "KUBERNETES_SERVICE_PORT"


class InClusterError(ValueError):
    """Not running in a pod, or the pod's service-account files are missing: one line saying which."""


@dataclass(frozen=True, slots=True)
class InClusterConfig:
    host: str  # https://HOST:PORT
    token_path: Path
    ca_path: Path
    namespace_path: Path

    def token(self) -> str:
        return read_token(self.token_path)

    def namespace(self) -> str | None:
        """The pod's namespace (the operator's own, where its Leases live), or None when not mounted."""
        try:
            value = self.namespace_path.read_text(encoding="utf-8").strip()
        except OSError:
            return None
        return value or None


def _join_host_port(host: str, port: str) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"  # IPv6 literals are bracketed


def read_token(path: Path) -> str:
    try:
        token = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise InClusterError(f"cannot read the service-account token {path}: {exc.strerror or exc}") from None
    if not token:
        raise InClusterError(f"the service-account token file {path} is empty")
    return token


def load(environ: Mapping[str, str] | None = None, directory: Path | None = None) -> InClusterConfig:
    """The in-cluster configuration, checked: InClusterError names what is missing. `directory`: another
    account's credentials (`token`, `ca.crt`, `namespace`: a mounted service-account token Secret) than
    the pod's own."""
    env = os.environ if environ is None else environ
    host, port = env.get(HOST_VARIABLE, ""), env.get(PORT_VARIABLE, "")
    if not host or not port:
        raise InClusterError(f"{HOST_VARIABLE} and {PORT_VARIABLE} are not set: this is not a pod "
                             "(use --kubeconfig outside a cluster)")
    directory = directory or Path(env.get(DIR_VARIABLE) or SERVICE_ACCOUNT_DIR)
    config = InClusterConfig(host=f"https://{_join_host_port(host, port)}", token_path=directory / "token",
                             ca_path=directory / "ca.crt", namespace_path=directory / "namespace")
    config.token()  # fail now, with the path, rather than on the first request
    if not config.ca_path.is_file():
        raise InClusterError(f"the service-account CA {config.ca_path} does not exist (automountServiceAccountToken "
                             "off?)")
    return config


def pod_namespace(environ: Mapping[str, str] | None = None) -> str | None:
    """The namespace this pod runs in, from the service-account mount; None outside a pod."""
    env = os.environ if environ is None else environ
    directory = Path(env.get(DIR_VARIABLE) or SERVICE_ACCOUNT_DIR)
    try:
        return (directory / "namespace").read_text(encoding="utf-8").strip() or None
    except OSError:
        return None
