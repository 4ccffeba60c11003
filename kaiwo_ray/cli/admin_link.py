"""Where the `kaiwo` CLI finds kaiwo-ray's admin API, and how it asks it for GPU telemetry.

The admin API's URL comes from `--admin-url`, else `$KAIWO_ADMIN_URL`, else the kubeconfig's
cluster extension `kaiwo.silogen.ai/admin-api` (`{url: ...}`), which `kaiwo-ray dev` writes beside the
sandbox's server address. Kubeconfig extensions are kubectl's own place for tool data: kubectl keeps
them and ignores what it does not know. Requests carry the kubeconfig's credentials, which the admin
API checks with a TokenReview as the API server would.
"""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import urllib3
import yaml

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.cli.kubeconfig import ADMIN_EXTENSION as EXTENSION
from kaiwo_ray.cli.kubeconfig import ClusterAccess


def with_admin_url(config: JsonObj, cluster_name: str, url: str) -> JsonObj:
    """`config` (a kubeconfig) with `cluster_name` advertising the admin API at `url` (pure)."""
    clusters = []
    for entry in config.get("clusters") or []:
        if isinstance(entry, dict) and entry.get("name") == cluster_name:
            cluster = dict(entry.get("cluster") or {})
            kept = [e for e in cluster.get("extensions") or [] if not (isinstance(e, dict) and e.get("name") == EXTENSION)]
            cluster["extensions"] = [*kept, {"name": EXTENSION, "extension": {"url": url}}]
            entry = {**entry, "cluster": cluster}
        clusters.append(entry)
    return {**config, "clusters": clusters}


def advertise(kubeconfig: Path, url: str) -> None:
    """Record the admin URL in every cluster of the kubeconfig `kaiwo-ray dev` wrote (atomic rewrite)."""
    config = yaml.safe_load(kubeconfig.read_text()) or {}
    for entry in list(config.get("clusters") or []):
        if isinstance(entry, dict) and entry.get("name"):
            config = with_admin_url(config, str(entry["name"]), url)
    tmp = kubeconfig.with_name(kubeconfig.name + ".tmp")
    tmp.write_text(yaml.safe_dump(config, sort_keys=False))
    tmp.chmod(0o600)
    tmp.replace(kubeconfig)


def resolve(flag: str | None, access: ClusterAccess) -> str | None:
    return (flag or os.environ.get("KAIWO_ADMIN_URL") or access.admin_url or "").rstrip("/") or None


class AdminUnavailable(Exception):
    """The admin API could not answer (down, unreachable, refused us): the caller falls back."""


def admin_get(url: str, path: str, access: ClusterAccess, *, timeout: float = 5.0) -> JsonObj:
    headers = {"Accept": "application/json", **{k: v for k, v in access.headers.items() if k == "Authorization"}}
    pool = urllib3.PoolManager(retries=False)
    try:
        response = pool.request("GET", url + path, headers=headers, timeout=urllib3.Timeout(connect=2.0, read=timeout))
    except urllib3.exceptions.HTTPError as exc:
        raise AdminUnavailable(f"admin API at {url} unreachable ({type(exc).__name__})") from None
    finally:
        pool.clear()
    if response.status != 200:
        raise AdminUnavailable(f"admin API at {url} answered {response.status} to GET {path}")
    try:
        body = orjson.loads(response.data)
    except orjson.JSONDecodeError:
        raise AdminUnavailable(f"admin API at {url} answered GET {path} with something that is not JSON") from None
    if not isinstance(body, dict):
        raise AdminUnavailable(f"admin API at {url} answered GET {path} with unexpected JSON")
    return body
