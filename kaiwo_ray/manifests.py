"""Reading and writing multi-document manifests (YAML or JSON), as `kubectl` users expect them.

Reading accepts what people actually pass around: one object, several YAML documents separated by
`---`, a JSON object, a JSON/YAML list of objects, or a `v1 List` (`kind: List` / `kind: NodeList`
with `items`). Every failure is a `ManifestReadError` whose message is one line that says where the
problem is (line/column for syntax errors, document number for shape errors), so a CLI can print
it as-is.

Writing produces what a person wants to read and diff: block-style YAML, keys in insertion order
(the order the renderers chose, not alphabetical), multi-line strings as literal blocks.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.yaml_input import BoundedLoader, safe_load_all

STDIN = "-"


class ManifestReadError(ValueError):
    """A manifest could not be read or does not have the shape of Kubernetes objects."""


def read_source(source: str) -> str:
    """The text behind a `-f` argument: a file path, or `-` for standard input."""
    if source == STDIN:
        return sys.stdin.read()
    path = Path(source)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ManifestReadError("no such file") from None
    except IsADirectoryError:
        raise ManifestReadError("is a directory, expected a file") from None
    except PermissionError:
        raise ManifestReadError("permission denied") from None
    except UnicodeDecodeError as exc:
        raise ManifestReadError(f"not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise ManifestReadError(exc.strerror or str(exc)) from None


@dataclass(frozen=True, slots=True)
class LocatedObject:
    """An object and where it came from in its file, for error messages: `document 2`,
    `items[3]`, `document 2: items[0]`, or "" when the file holds a single object."""

    where: str
    obj: JsonObj


def parse_located(text: str) -> list[LocatedObject]:
    """Every object in `text`, in order, with its location; lists are flattened."""
    raw_documents = _load_json(text) if _looks_like_json(text) else _load_yaml(text)
    located: list[LocatedObject] = []
    for index, document in enumerate(raw_documents, start=1):
        where = f"document {index}" if len(raw_documents) > 1 else ""
        located.extend(_flatten(document, where))
    return located


def parse_documents(text: str) -> list[JsonObj]:
    """Every object in `text`, in order; lists (`kind: List`, plain arrays) are flattened."""
    return [located.obj for located in parse_located(text)]


def load_documents(source: str) -> list[JsonObj]:
    """`read_source` then `parse_documents`."""
    return parse_documents(read_source(source))


def _looks_like_json(text: str) -> bool:
    return text.lstrip().startswith(("{", "["))


def _load_json(text: str) -> list[Any]:
    try:
        return [json.loads(text)]
    except RecursionError:  # nested past the interpreter's stack: the YAML reader says so, with a line
        return _load_yaml(text)
    except json.JSONDecodeError as exc:
        # JSON-looking text may still be valid YAML flow style (`{a: 1}`): give YAML its chance.
        try:
            return _load_yaml(text)
        except ManifestReadError:
            raise ManifestReadError(
                f"line {exc.lineno}, column {exc.colno}: invalid JSON: {exc.msg}"
            ) from None


def _load_yaml(text: str) -> list[Any]:
    try:
        documents = list(safe_load_all(text, _Loader))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        position = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = exc.problem or exc.context or "invalid YAML"
        raise ManifestReadError(f"{position}invalid YAML: {problem}") from None
    except yaml.YAMLError as exc:
        raise ManifestReadError(f"invalid YAML: {_one_line(str(exc))}") from None
    # `---` at the end of a file, or a file of comments, yields empty (None) documents: not objects.
    return [document for document in documents if document is not None]


def _flatten(document: Any, where: str) -> list[LocatedObject]:
    if isinstance(document, dict) and not _is_list_kind(document):
        return [LocatedObject(where, _check_object(document, where))]
    if isinstance(document, list):
        items: Any = document
    elif isinstance(document, dict):
        items = document.get("items") or []
        if not isinstance(items, list):
            raise ManifestReadError(_at(where, "items: expected a list of objects"))
    else:
        raise ManifestReadError(_at(where, f"expected an object (a mapping), got {_type_name(document)}"))
    located = []
    for position, item in enumerate(items):
        item_where = _at(where, f"items[{position}]")
        located.append(LocatedObject(item_where, _check_object(item, item_where)))
    return located


def _is_list_kind(document: JsonObj) -> bool:
    kind = document.get("kind")
    return isinstance(kind, str) and kind.endswith("List") and "items" in document


def _check_object(item: Any, where: str) -> JsonObj:
    if not isinstance(item, dict):
        raise ManifestReadError(_at(where, f"expected an object (a mapping), got {_type_name(item)}"))
    non_string_keys = [key for key in item if not isinstance(key, str)]
    if non_string_keys:
        raise ManifestReadError(_at(where, f"keys must be strings, got {non_string_keys[0]!r}"))
    return item


def _at(where: str, message: str) -> str:
    return f"{where}: {message}" if where else message


def _type_name(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return type(value).__name__


def _one_line(text: str) -> str:
    return " ".join(text.split())


class _Loader(BoundedLoader):
    """The bounded SafeLoader (nesting, aliases: kaiwo_ray.api.yaml_input), keeping timestamps as strings: Kubernetes objects carry RFC 3339 strings, and
    turning them into datetimes would change what the renderers see and what we print back."""


# Drop the implicit timestamp resolver (PyYAML has no public API for it).
_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.copy().items()
}


class _Dumper(yaml.SafeDumper):
    """Block style, insertion order, literal blocks for multi-line strings."""


_STR_TAG = "tag:yaml.org,2002:str"
_OTHER_LINE_BREAKS = ("\r", "\x85", "\u2028", "\u2029")


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style: str | None = None
    if any(char in value for char in _OTHER_LINE_BREAKS):
        style = '"'  # PyYAML mangles these outside double quotes (NEL read back as a space)
    elif "\n" in value:
        # PyYAML silently falls back to a quoted scalar when a literal block cannot hold the
        # text exactly (e.g. trailing spaces on a line), so correctness never depends on this.
        style = "|"
    elif dumper.resolve(yaml.ScalarNode, value, (True, False)) != _STR_TAG:  # type: ignore[no-untyped-call]
        style = '"'  # "8", "true", "1.0": quoted like kubectl does, so they stay strings
    return dumper.represent_scalar(_STR_TAG, value, style=style)


_Dumper.add_representer(str, _represent_str)


def dump_yaml(obj: Any) -> str:
    """One object as block-style YAML."""
    text: str = yaml.dump(
        obj,
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=4096,  # never fold long lines: folded commands and URLs are hard to read and diff
    )
    return text


def dump_yaml_documents(objects: Iterable[Any]) -> str:
    """Several objects as one multi-document YAML stream (`---` between documents)."""
    return "---\n".join(dump_yaml(obj) for obj in objects)


def dump_json_list(objects: Sequence[Any]) -> str:
    """Several objects as a `v1 List`, the shape `kubectl get -o json` prints for many objects."""
    document = {
        "apiVersion": "v1",
        "kind": "List",
        "metadata": {"resourceVersion": ""},
        "items": list(objects),
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
