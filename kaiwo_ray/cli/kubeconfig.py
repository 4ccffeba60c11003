"""The user's kubeconfig, resolved as kubectl does: `--kubeconfig`, else every file in `$KUBECONFIG`
(merged, first one wins per name), else `~/.kube/config`; the context from `--context`, else
`current-context`.

Kept here (not `kubernetes.config`) because importing the `kubernetes` package costs ~0.5 s, which
every `kaiwo` command would pay; this supports what kubeconfigs hold in practice: tokens, token
files, client certificates (file or data), CA (file or data), insecure-skip-tls-verify,
tls-server-name and `exec` credential plugins (client.authentication.k8s.io v1 and v1beta1).
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.cli.errors import ClusterError, UsageError

ADMIN_EXTENSION = "kaiwo.silogen.ai/admin-api"  # kubeconfig cluster extension: {url: <kaiwo-ray admin API>}
DEFAULT_KUBECONFIG = Path("~/.kube/config")


@dataclass
class ClusterAccess:
    """What a request needs: where, how to trust it, how to authenticate, and the default namespace."""

    server: str
    namespace: str
    context: str
    source: str  # the kubeconfig file(s), for messages
    headers: dict[str, str] = field(default_factory=dict)
    ssl_context: ssl.SSLContext | None = None
    server_hostname: str | None = None
    admin_url: str | None = None  # kaiwo-ray's admin API, when the cluster entry advertises it (admin_link.py)


def kubeconfig_paths(explicit: str | None) -> list[Path]:
    if explicit:
        return [Path(explicit).expanduser()]
    env = os.environ.get("KUBECONFIG")
    if env:
        return [Path(p).expanduser() for p in env.split(os.pathsep) if p]
    return [Path.home() / ".kube" / "config"]


def _read(path: Path, explicit: bool) -> JsonObj | None:
    try:
        text = path.read_text()
    except FileNotFoundError:
        if explicit:
            raise UsageError(f"kubeconfig {path} does not exist: pass an existing file to --kubeconfig") from None
        return None
    except OSError as exc:
        raise UsageError(f"cannot read kubeconfig {path}: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise UsageError(f"kubeconfig {path} is not valid YAML{where}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(f"kubeconfig {path} is not a kubeconfig (expected a mapping with clusters, users, contexts)")
    return data


def merge(configs: list[tuple[Path, JsonObj]]) -> JsonObj:
    """kubectl's merge: the first file to name a cluster/user/context wins; the first current-context too."""
    merged: JsonObj = {"clusters": {}, "users": {}, "contexts": {}, "current-context": ""}
    for path, config in configs:
        for section in ("clusters", "users", "contexts"):
            for entry in config.get(section) or []:
                if isinstance(entry, dict) and entry.get("name") is not None:
                    merged[section].setdefault(str(entry["name"]), (path, entry))
        if not merged["current-context"] and config.get("current-context"):
            merged["current-context"] = str(config["current-context"])
    return merged


def load(explicit_path: str | None = None, context: str | None = None) -> ClusterAccess:
    paths = kubeconfig_paths(explicit_path)
    configs = [(p, c) for p in paths if (c := _read(p, explicit_path is not None)) is not None]
    source = os.pathsep.join(str(p) for p in paths)
    if not configs:
        raise ClusterError(f"no kubeconfig found at {source}: set KUBECONFIG or pass --kubeconfig "
                           "(for the sandbox: export KUBECONFIG=$PWD/.kaiwo/kubeconfig after `make dev`)")
    merged = merge(configs)
    name = context or merged["current-context"]
    if not name:
        raise ClusterError(f"kubeconfig {source} has no current-context: pass --context NAME")
    if name not in merged["contexts"]:
        known = ", ".join(sorted(merged["contexts"])) or "none"
        raise ClusterError(f"context {name!r} is not in kubeconfig {source} (contexts: {known})")
    _, ctx_entry = merged["contexts"][name]
    ctx = ctx_entry.get("context") or {}
    cluster_name, user_name = ctx.get("cluster"), ctx.get("user")
    if cluster_name not in merged["clusters"]:
        raise ClusterError(f"context {name!r} names cluster {cluster_name!r}, which kubeconfig {source} lacks")
    cluster_path, cluster_entry = merged["clusters"][cluster_name]
    cluster = cluster_entry.get("cluster") or {}
    user_path, user_entry = merged["users"].get(user_name, (cluster_path, {}))
    user = user_entry.get("user") or {}
    server = str(cluster.get("server") or "").rstrip("/")
    if not server:
        raise ClusterError(f"cluster {cluster_name!r} in kubeconfig {source} has no server")
    access = ClusterAccess(server=server, namespace=str(ctx.get("namespace") or "default"), context=name,
                           source=source, server_hostname=cluster.get("tls-server-name"),
                           admin_url=admin_url_of(cluster))
    if server.startswith("https://"):
        access.ssl_context = _ssl_context(cluster, user, cluster_path.parent, user_path.parent)
    token = _token(user, user_path.parent, access)
    if token:
        access.headers["Authorization"] = f"Bearer {token}"
    elif user.get("username") is not None:
        basic = base64.b64encode(f"{user.get('username')}:{user.get('password', '')}".encode()).decode()
        access.headers["Authorization"] = f"Basic {basic}"
    return access


def admin_url_of(cluster: JsonObj) -> str | None:
    """The kaiwo-ray admin API a `cluster` entry advertises in its extension `ADMIN_EXTENSION`, if any."""
    for entry in cluster.get("extensions") or []:
        if isinstance(entry, dict) and entry.get("name") == ADMIN_EXTENSION:
            extension = entry.get("extension")
            if isinstance(extension, dict) and extension.get("url"):
                return str(extension["url"]).rstrip("/")
    return None


def _resolve(base: Path, value: str) -> str:
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else base / path)


def _ssl_context(cluster: JsonObj, user: JsonObj, cluster_dir: Path, user_dir: Path) -> ssl.SSLContext:
    if cluster.get("insecure-skip-tls-verify"):
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif cluster.get("certificate-authority-data"):
        pem = base64.b64decode(cluster["certificate-authority-data"]).decode()
        context = ssl.create_default_context(cadata=pem)
    elif cluster.get("certificate-authority"):
        try:
            context = ssl.create_default_context(cafile=_resolve(cluster_dir, cluster["certificate-authority"]))
        except OSError as exc:
            raise ClusterError(f"cannot read the cluster CA {cluster['certificate-authority']}: {exc.strerror}") \
                from None
    else:
        context = ssl.create_default_context()
    cert = _pem(user, "client-certificate", user_dir)
    key = _pem(user, "client-key", user_dir)
    if cert and key:
        _load_chain(context, cert, key)
    return context


def _pem(user: JsonObj, key: str, base: Path) -> bytes | None:
    if user.get(f"{key}-data"):
        return base64.b64decode(user[f"{key}-data"])
    if user.get(key):
        try:
            return Path(_resolve(base, user[key])).read_bytes()
        except OSError as exc:
            raise ClusterError(f"cannot read {key} {user[key]}: {exc.strerror}") from None
    return None


def _load_chain(context: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    """ssl only loads client certificates from files: write them to a private temp dir for the call."""
    with tempfile.TemporaryDirectory(prefix="kaiwo-cert-") as tmp:
        cert_file, key_file = Path(tmp) / "cert.pem", Path(tmp) / "key.pem"
        cert_file.write_bytes(cert)
        key_file.write_bytes(key)
        key_file.chmod(0o600)
        try:
            context.load_cert_chain(str(cert_file), str(key_file))
        except ssl.SSLError as exc:
            raise ClusterError(f"the client certificate in the kubeconfig is unusable: {exc.reason}") from None


def _token(user: JsonObj, base: Path, access: ClusterAccess) -> str | None:
    if user.get("token"):
        return str(user["token"])
    if user.get("tokenFile"):
        try:
            return Path(_resolve(base, user["tokenFile"])).read_text().strip()
        except OSError as exc:
            raise ClusterError(f"cannot read tokenFile {user['tokenFile']}: {exc.strerror}") from None
    if user.get("exec"):
        return _exec_credential(user["exec"], access)
    return None


def _exec_credential(spec: JsonObj, access: ClusterAccess) -> str | None:
    """Run an exec credential plugin (aws, gke-gcloud-auth-plugin, kubelogin, ...)."""
    command = spec.get("command")
    if not command:
        raise ClusterError("the kubeconfig user's exec plugin has no command")
    env = dict(os.environ)
    for item in spec.get("env") or []:
        env[str(item.get("name"))] = str(item.get("value", ""))
    api_version = spec.get("apiVersion") or "client.authentication.k8s.io/v1"
    env["KUBERNETES_EXEC_INFO"] = json.dumps({"apiVersion": api_version, "kind": "ExecCredential",
                                              "spec": {"interactive": False}})
    try:
        done = subprocess.run([command, *(spec.get("args") or [])], env=env, capture_output=True, text=True,
                              timeout=60, check=False)
    except FileNotFoundError:
        hint = spec.get("installHint") or f"install {command} or fix the kubeconfig"
        raise ClusterError(f"exec credential plugin {command} not found: {str(hint).strip()}") from None
    except subprocess.TimeoutExpired:
        raise ClusterError(f"exec credential plugin {command} did not answer within 60 s") from None
    if done.returncode != 0:
        detail = done.stderr.strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
        raise ClusterError(f"exec credential plugin {command} failed: {detail[0]}")
    try:
        status = json.loads(done.stdout).get("status") or {}
    except ValueError:
        raise ClusterError(f"exec credential plugin {command} printed no ExecCredential JSON") from None
    if status.get("clientCertificateData") and status.get("clientKeyData") and access.ssl_context is not None:
        _load_chain(access.ssl_context, status["clientCertificateData"].encode(), status["clientKeyData"].encode())
    token = status.get("token")
    return str(token) if token else None


def resolve_kubeconfig(path: Path | None) -> Path:
    """The kubeconfig as an absolute path (actors run in other processes, with another cwd).
    Raises ValueError with what to do when there is none."""
    if path is None:
        env = os.environ.get("KUBECONFIG", "")
        path = Path(env.split(os.pathsep)[0]) if env else DEFAULT_KUBECONFIG
    resolved = path.expanduser().resolve()
    if not resolved.is_file():
        raise ValueError(f"kubeconfig {resolved} does not exist; pass --kubeconfig PATH or --in-cluster")
    return resolved
