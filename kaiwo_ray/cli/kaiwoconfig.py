"""Where `kaiwo submit` takes the user and cluster queue from, as upstream resolves them:
`--config` > `$KAIWOCONFIG` > `~/.config/kaiwo/kaiwoconfig.yaml` (when it exists); `--user` and
`--queue` override the file; the manifest's own `spec.user`/`spec.clusterQueue` win over both."""

from __future__ import annotations

import os
import re
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.cli.errors import UsageError

DEFAULT_CONFIG = Path("~/.config/kaiwo/kaiwoconfig.yaml")
EMAIL = re.compile(r"^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}$")


class CliConfig(BaseModel):
    """The config file: `user:` and `clusterQueue:` (both optional strings)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    user: str | None = None
    clusterQueue: str | None = None


def config_path(flag: str | None) -> tuple[Path | None, str]:
    """(path, where it came from); path None when no file is configured and the default is absent."""
    if flag:
        return Path(flag).expanduser(), "--config"
    env = os.environ.get("KAIWOCONFIG")
    if env:
        return Path(env).expanduser(), "$KAIWOCONFIG"
    default = DEFAULT_CONFIG.expanduser()
    return (default if default.exists() else None), str(DEFAULT_CONFIG)


def read_config(path: Path, origin: str) -> CliConfig:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise UsageError(f"kaiwo config {path} (from {origin}) does not exist: create it or drop {origin}") \
            from None
    except OSError as exc:
        raise UsageError(f"cannot read kaiwo config {path}: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text) or {}
        return CliConfig.model_validate(data)
    except yaml.YAMLError:
        raise UsageError(f"kaiwo config {path} is not valid YAML") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise UsageError(f"kaiwo config {path}: {where}: {first['msg']} (expected `user:` and `clusterQueue:`)") \
            from None


def write_config(path: Path, user: str, queue: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"user": user, "clusterQueue": queue}, sort_keys=False, indent=2))


def apply_defaults(manifest: JsonObj, user: str | None, queue: str | None) -> None:
    """Set spec.user / spec.clusterQueue only where the manifest has no such key (manifest wins)."""
    spec = manifest.setdefault("spec", {})
    if not isinstance(spec, dict):
        raise UsageError("the manifest's spec must be a mapping")
    if user is not None and "user" not in spec:
        spec["user"] = user
    if queue is not None and "clusterQueue" not in spec:
        spec["clusterQueue"] = queue


def resolve_namespace(manifest: JsonObj, flag: str | None, context_namespace: str) -> str:
    """The manifest's namespace wins; `-n` fills it in when absent and must agree when both are set."""
    meta = manifest.setdefault("metadata", {})
    own = meta.get("namespace")
    if own and flag and flag != own:
        raise UsageError(f"the manifest says namespace {own!r} but -n says {flag!r}: drop one of them")
    meta["namespace"] = own or flag or context_namespace
    return str(meta["namespace"])
