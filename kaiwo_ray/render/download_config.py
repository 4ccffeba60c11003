"""YAML text of the downloader's `config.yaml` (block style, keys in the order given, stable bytes)."""

from __future__ import annotations

from typing import Any

import yaml

try:  # libyaml's emitter is an order of magnitude faster; identical output for this data
    _Dumper: Any = yaml.CSafeDumper
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _Dumper = yaml.SafeDumper


def dump_download_config(document: dict[str, Any]) -> str:
    """Serialise the config document; the downloader parses it with its camelCase pydantic models."""
    text: str = yaml.dump(
        document, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True, width=4096
    )
    return text
