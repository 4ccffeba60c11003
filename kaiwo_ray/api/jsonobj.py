"""The library's one name for a decoded JSON object: a Kubernetes object as the API server sends it,
a patch, a status. Models (pydantic) type what is validated; this types what is passed through."""

from __future__ import annotations

from typing import Any

JsonObj = dict[str, Any]
