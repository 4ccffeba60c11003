"""Lazy access to the sandbox's pure modules (selectors, patching, apply, schema, metadata,
builtin_defaults, builtin_validation, tables). They were written in parallel with the store; a
missing or broken one degrades its step (logged once) instead of breaking every write."""

from __future__ import annotations

import importlib
import logging
import sys
from typing import Any

log = logging.getLogger(__name__)

_pure_cache: dict[str, Any] = {}


def pure(name: str) -> Any:
    """One of the pure modules (`patching`, `apply`, `schema`, ...), or None while it is missing or
    broken: those are written in parallel and the store must keep working without them."""
    if name in _pure_cache:
        return _pure_cache[name]
    full = f"kaiwo_ray.sandbox.{name}"
    module: Any = sys.modules.get(full)
    if module is None:
        try:
            module = importlib.import_module(full)
        except Exception as exc:  # missing or half-written module: degrade, say so once
            log.warning("sandbox: %s unavailable (%s); its step is skipped", full, exc)
            module = None
    _pure_cache[name] = module
    return module
