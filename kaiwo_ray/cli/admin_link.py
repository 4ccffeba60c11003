"""Where the `kaiwo` CLI finds kaiwo-ray's admin API, and how it asks it for GPU telemetry.

Where the cluster serves the admin API's aggregated group (`admin.kaiwo.silogen.ai/v1alpha1`, see
docs/admin-api.md), the CLI asks through the Kubernetes API with the kubeconfig's own credentials and
needs no URL at all; `--admin-url` or `$KAIWO_ADMIN_URL` still choose a URL explicitly. Otherwise the
admin API's URL comes from `--admin-url`, else `$KAIWO_ADMIN_URL`, else the kubeconfig's
cluster extension `kaiwo.silogen.ai/admin-api` (`{url: ...}`), which `kaiwo-ray dev` writes beside the
sandbox's server address. Kubeconfig extensions are kubectl's own place for tool data: kubectl keeps
them and ignores what it does not know. Requests carry the kubeconfig's credentials, which the admin
API checks with a TokenReview as the API server would.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

import orjson
import urllib3
import yaml

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.cli.kubeconfig import ADMIN_EXTENSION as EXTENSION
from kaiwo_ray.cli.kubeconfig import ClusterAccess

if TYPE_CHECKING:
    from kaiwo_ray.cli.api import Api

AGGREGATED_GROUP = "admin.kaiwo.silogen.ai"
AGGREGATED_VERSION = "v1alpha1"
AGGREGATED_PREFIX = f"/apis/{AGGREGATED_GROUP}/{AGGREGATED_VERSION}"
_SUMMARY_PREFIX = {"kaiwojobs": "job", "kaiwoservices": "service"}
_WORKLOAD_PATH = re.compile(r"/api/v1/namespaces/([^/]+)/(kaiwojobs|kaiwoservices)/([^/]+)/(explain|events|gpus)")

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


def aggregated_path(path: str) -> str | None:
    """The aggregated group's path for an /api/v1 workload path (pure): `/api/v1/namespaces/NS/kaiwojobs/
    NAME/gpus` is `.../namespaces/NS/workloadsummaries/job.NAME/gpus`; None for a path it does not serve."""
    match = _WORKLOAD_PATH.fullmatch(path)
    if match is None:
        return None
    namespace, plural, name, sub = match.groups()
    summary = quote(f"{_SUMMARY_PREFIX[plural]}.{name}", safe=".")
    return f"{AGGREGATED_PREFIX}/namespaces/{namespace}/workloadsummaries/{summary}/{sub}"


def group_served(api: Api) -> bool:
    """Whether the cluster serves the aggregated group now: its discovery answers (a 503 while the
    admin API is down, a 404 where it is not registered, both mean no)."""
    from kaiwo_ray.cli.errors import ClusterError

    try:
        api.get(AGGREGATED_PREFIX)
    except ClusterError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class AdminLink:
    """How to reach the admin API: through the Kubernetes API (`api`), or at `url`."""

    url: str | None = None
    api: Api | None = None

    @property
    def where(self) -> str:
        return self.url if self.url is not None else f"the Kubernetes API, {AGGREGATED_GROUP}"

    def get(self, path: str, access: ClusterAccess) -> JsonObj:
        if self.url is not None:
            return admin_get(self.url, path, access)
        from kaiwo_ray.cli.errors import ClusterError

        assert self.api is not None
        through = aggregated_path(path)
        if through is None:
            raise AdminUnavailable(f"{AGGREGATED_GROUP} serves no {path}")
        try:
            return self.api.get(through)
        except ClusterError as err:
            raise AdminUnavailable(f"{AGGREGATED_GROUP} answered GET {through}: {err}") from None


def link(flag: str | None, api: Api) -> AdminLink | None:
    """An explicit URL (flag, environment) first; else the aggregated group where the cluster serves it;
    else the URL the kubeconfig advertises; else None."""
    explicit = (flag or os.environ.get("KAIWO_ADMIN_URL") or "").rstrip("/")
    if explicit:
        return AdminLink(url=explicit)
    if group_served(api):
        return AdminLink(api=api)
    advertised = resolve(None, api.access)
    return AdminLink(url=advertised) if advertised else None
