"""The KaiwoConfig and KaiwoQueueConfig singletons as every controller reads them: live from a cache,
parsed once per resourceVersion, defaults when absent or invalid (a controller never fails on them)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from functools import cache
from typing import Any

from kaiwo_ray.api.config import KaiwoConfigSpec
from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.queueconfig import KaiwoQueueConfigSpec
from kaiwo_ray.controllers.kaiwoconfig import default_spec_from_env
from kaiwo_ray.kube.cache import ObjectCache

log = logging.getLogger(__name__)


# Parsed singletons by (uid, resourceVersion): every reconcile reads KaiwoConfig and the queue config,
# but they change rarely, and validating them each time was a measurable share of a reconcile.
_PARSED: dict[tuple[str, str, str], Any] = {}
_PARSED_MAX = 16


def _parsed_spec(obj: JsonObj, model: type[Any], invalid: str) -> Any:
    """`obj`'s spec as `model`, parsed once per resourceVersion; raises ValueError when invalid, which
    is logged (with `invalid`, what happens instead) once per resourceVersion too, not per reconcile."""
    meta = obj.get("metadata") or {}
    key = (model.__name__, str(meta.get("uid", "")), str(meta.get("resourceVersion", "")))
    parsed = _PARSED.get(key) if key[2] else None  # no resourceVersion (a test double): nothing to key on
    if parsed is None:
        try:
            parsed = model.model_validate(obj.get("spec") or {})
        except ValueError as err:
            log.warning("%s %s is invalid, %s: %s", model.__name__.removesuffix("Spec"), meta.get("name"), invalid, err)
            parsed = err
        if key[2]:
            if len(_PARSED) >= _PARSED_MAX:
                _PARSED.pop(next(iter(_PARSED)))
            _PARSED[key] = parsed
    if isinstance(parsed, ValueError):
        raise parsed
    return parsed


def singleton(cache: ObjectCache) -> list[JsonObj]:
    """The cluster-scoped object `kaiwo` of a cache, or nothing: a lookup, not a copy of the cache."""
    obj = cache.get(None, "kaiwo")
    return [obj] if obj is not None else []


def load_config(cache_objects: Iterable[JsonObj]) -> KaiwoConfigSpec:
    """KaiwoConfig `kaiwo`, read live from the cache; defaults when absent or invalid (never fail).
    The returned model is shared between callers: treat it as read-only."""
    for obj in cache_objects:
        if (obj.get("metadata") or {}).get("name") == "kaiwo":
            try:
                config: KaiwoConfigSpec = _parsed_spec(obj, KaiwoConfigSpec, "using defaults")
                return config
            except ValueError:
                pass
    return _default_config()


def _default_config() -> KaiwoConfigSpec:
    """The defaults, with the default queue `DEFAULT_CLUSTER_QUEUE_NAME` names, as in the KaiwoConfig
    we create."""
    return _defaults_for(tuple(sorted(default_spec_from_env().items())))


@cache
def _defaults_for(spec: tuple[tuple[str, Any], ...]) -> KaiwoConfigSpec:
    """Built once per spec: every reconcile reads the config, and building it costs about 7% of a no-op pass."""
    return KaiwoConfigSpec.model_validate(dict(spec))


def load_queue_config(cache_objects: Iterable[JsonObj]) -> KaiwoQueueConfigSpec | None:
    for obj in cache_objects:
        if (obj.get("metadata") or {}).get("name") == "kaiwo":
            try:
                queue_config: KaiwoQueueConfigSpec = _parsed_spec(obj, KaiwoQueueConfigSpec, "ignoring it")
                return queue_config
            except ValueError:
                return None
    return None
