"""YAML text of the downloader's `config.yaml`: block style, keys in the order given, stable bytes.

A small emitter for the JSON-shaped document (dicts, lists, str, int, bool, None) instead of PyYAML's
representer, which costs more than the whole rest of a render. Strings that YAML could read as
anything but the same string are written JSON-quoted (a JSON string is a valid YAML double-quoted
scalar), so `yaml.safe_load(text) == document` holds for every input (see the property test).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

# Plain (unquoted) scalars: start with a letter, `/` or `_`, no spaces or YAML indicators, no trailing
# colon. Anything else (numbers, `-x`, `a: b`, `#x`, empty) is quoted.
_PLAIN = re.compile(r"[A-Za-z_/][A-Za-z0-9_./@+:-]*")
# YAML 1.1 words PyYAML resolves to bool/null (compared lower-cased).
_RESERVED = frozenset({"true", "false", "yes", "no", "on", "off", "y", "n", "null", "~"})
# Characters JSON leaves raw but YAML refuses (non-printable) or reads as line breaks (NEL, LS, PS).
_YAML_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\ufffe\uffff]")


def dump_download_config(document: dict[str, Any]) -> str:
    """Serialise the config document; the downloader parses it with its camelCase pydantic models.

    Keys are written as they are: they are the downloader's field names, never user text.
    """
    lines: list[str] = []
    _mapping(document, "", lines)
    return "\n".join(lines) + "\n"


def _scalar(value: Any, plain: Any = _PLAIN.fullmatch) -> str:
    if type(value) is str:
        if plain(value) and value[-1] != ":" and value.lower() not in _RESERVED:
            return value
        quoted = orjson.dumps(value).decode()
        return _YAML_UNSAFE.sub(_escape, quoted) if _YAML_UNSAFE.search(quoted) else quoted
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return orjson.dumps(value).decode()
    raise TypeError(f"cannot write {type(value).__name__} into config.yaml")


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def _mapping(mapping: dict[str, Any], indent: str, lines: list[str], first_prefix: str | None = None) -> None:
    """Emit `key: value` lines; `first_prefix` replaces the indent of the first line (`- ` of a list item)."""
    prefix = indent if first_prefix is None else first_prefix
    for key, value in mapping.items():
        head = f"{prefix}{key}:"  # keys are the downloader's fixed camelCase field names
        prefix = indent
        if isinstance(value, dict) and value:
            lines.append(head)
            _mapping(value, indent + "  ", lines)
        elif isinstance(value, list) and value:
            lines.append(head)
            _sequence(value, indent, lines)
        elif type(value) is str:
            lines.append(f"{head} {_scalar(value)}")
        else:
            lines.append(f"{head} {_empty_or_scalar(value)}")


def _sequence(items: list[Any], indent: str, lines: list[str]) -> None:
    """Block sequence at the parent's indent (PyYAML's default `key:\\n- item` layout)."""
    for item in items:
        if isinstance(item, dict) and item:
            _mapping(item, indent + "  ", lines, first_prefix=indent + "- ")
        elif isinstance(item, list) and item:
            lines.append(f"{indent}-")
            _sequence(item, indent + "  ", lines)
        else:
            lines.append(f"{indent}- {_empty_or_scalar(item)}")


def _empty_or_scalar(value: Any) -> str:
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    return _scalar(value)
