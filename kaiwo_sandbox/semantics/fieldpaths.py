"""Field paths and field sets as sigs.k8s.io/structured-merge-diff defines them, plus the typed
walks server-side apply needs over JSON values: which fields a value sets, merging two values,
comparing them, and removing a set of fields.

A path is a tuple of path elements, each a 2-tuple:
    ("f", "name")                 a struct field or map key       fieldsV1 "f:name"
    ("k", '{"name":"c"}')         an associative-list item by key "k:{...}"  (canonical JSON)
    ("v", '"x"')                  a set-list item by value        "v:..."
    ("i", 3)                      a list item by index            "i:3"
A field set is a plain Python set of paths (its members). fieldsV1 is the trie encoding of a
set, where "." marks a node that is itself a member and also has members below it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from kaiwo_sandbox.contracts import JsonObj
from kaiwo_sandbox.semantics.merge_keys import Schema

PathElement = tuple[str, Any]
Path = tuple[PathElement, ...]
FieldSet = set[Path]

_ORDER = {"f": 0, "k": 1, "v": 2, "i": 3}


class FieldPathError(ValueError):
    """A value that cannot be addressed by field paths (duplicate or key-less list items)."""


_ENCODER = json.JSONEncoder(separators=(",", ":"), sort_keys=True, ensure_ascii=False)
_encode_string = json.encoder.encode_basestring


def canonical_json(value: Any) -> str:
    """Go's encoding/json output for a decoded value: compact, object keys sorted."""
    return _ENCODER.encode(value)


def element_sort_key(element: PathElement) -> tuple[int, str]:
    kind, value = element
    return _ORDER[kind], f"{value:020d}" if kind == "i" else str(value)


def path_sort_key(path: Path) -> tuple[tuple[int, str], ...]:
    return tuple(element_sort_key(e) for e in path)


def _value_string(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    return canonical_json(value)


def element_string(element: PathElement) -> str:
    """How structured-merge-diff prints one element in conflict messages."""
    kind, value = element
    if kind == "f":
        return "." + str(value)
    if kind == "k":
        fields = json.loads(value)
        return "[" + ",".join(f"{k}={_value_string(fields[k])}" for k in sorted(fields)) + "]"
    if kind == "v":
        return f"[={_value_string(json.loads(value))}]"
    return f"[{value}]"


def path_string(path: Path) -> str:
    """`.spec.template.spec.containers[name="c"].image`, as in apply conflict messages."""
    return "".join(element_string(e) for e in path)


# ----------------------------------------------------------------------------------------------
# fieldsV1 codec


def encode_element(element: PathElement) -> str:
    kind, value = element
    return f"{kind}:{value}"


def _decode_element(text: str) -> PathElement:
    kind, sep, rest = text.partition(":")
    if not sep or kind not in _ORDER:
        raise FieldPathError(f"unknown path element {text!r}")
    if kind == "f":
        return ("f", rest)
    if kind == "i":
        return ("i", int(rest))
    return (kind, canonical_json(json.loads(rest)))


def encode_fields_v1(paths: Iterable[Path]) -> JsonObj:
    """The fieldsV1 trie of a set: members without descendants are `{}`, members with
    descendants carry a "." entry; children sorted as structured-merge-diff sorts them."""
    # Built directly with encoded keys, each node remembering whether it is a member. Sorting the
    # encoded strings gives structured-merge-diff's order (fields, then keys, then values) except
    # for index elements, which only lists without keys produce.
    trie: dict[str, Any] = {}
    marker = "."
    for path in paths:
        node = trie
        for element in path:
            node = node.setdefault(encode_element(element), {})
        node[marker] = True

    def render(node: dict[str, Any]) -> JsonObj:
        member = node.pop(marker, False)
        out: JsonObj = {".": {}} if member and node else {}
        for text in sorted(node):
            out[text] = render(node[text])
        return out

    trie.pop(marker, None)
    return render(trie)


def fields_v1_has(fields: Any, path: Path) -> bool:
    """Whether `path` is a member of the set a fieldsV1 trie encodes, without decoding it all."""
    node = fields
    for element in path:
        if not isinstance(node, dict):
            return False
        node = node.get(encode_element(element))
        if node is None:
            return False
    return isinstance(node, dict) and (not node or "." in node)


def decode_fields_v1(fields: Any) -> FieldSet:
    """The set a fieldsV1 trie encodes. Raises FieldPathError on malformed input."""
    out: FieldSet = set()

    def walk(node: Any, prefix: Path) -> None:
        if not isinstance(node, dict):
            raise FieldPathError("fieldsV1 nodes must be objects")
        if not node and prefix:
            out.add(prefix)
        for text, child in node.items():
            if text == ".":
                out.add(prefix)
                continue
            walk(child, (*prefix, _decode_element(text)))

    walk(fields, ())
    out.discard(())
    return out


# ----------------------------------------------------------------------------------------------
# Typed walks


def list_item_element(schema: Schema, item: Any, index: int) -> PathElement:
    """The path element that names `item` inside an associative list."""
    if len(schema.map_keys) == 1 and isinstance(item, dict):
        # Fast path for the everyday single string/int key (name, uid, type, ip, mountPath).
        name = schema.map_keys[0]
        value = item.get(name)
        if isinstance(value, str):
            return ("k", '{"' + name + '":' + _encode_string(value) + "}")
        if isinstance(value, int) and not isinstance(value, bool):
            return ("k", '{"' + name + '":' + str(value) + "}")
    if schema.list_type == "set":
        if isinstance(item, dict | list):
            raise FieldPathError("associative list without keys has an element that's a map type"
                                 if isinstance(item, dict) else "associative list without keys has an element "
                                 "that's a list type")
        return ("v", canonical_json(item))
    if schema.list_type == "map" and schema.map_keys:
        if item is None:
            raise FieldPathError("associative list with keys may not have a null element")
        if not isinstance(item, dict):
            raise FieldPathError("associative list with keys may not have non-map elements")
        key: JsonObj = {}
        for name in schema.map_keys:
            if item.get(name) is not None:
                key[name] = item[name]
            elif name in schema.key_defaults:
                key[name] = schema.key_defaults[name]
            else:
                raise FieldPathError(f"associative list with keys has an element that omits key field "
                                     f"{json.dumps(name)} (and doesn't have default value)")
        return ("k", canonical_json(key))
    return ("i", index)


def index_list(schema: Schema, items: list[Any], *, path: Path, allow_duplicates: bool) -> list[PathElement]:
    """Path elements of a list's items; errors name the list and item as structured-merge-diff does."""
    elements: list[PathElement] = []
    for index, item in enumerate(items):
        try:
            elements.append(list_item_element(schema, item, index))
        except FieldPathError as exc:
            raise FieldPathError(f"{path_string(path)}: element {index}: {exc}") from None
    if not allow_duplicates:
        seen: set[PathElement] = set()
        for element in elements:
            if element in seen:
                raise FieldPathError(
                    f"{path_string(path)}: duplicate entries for key {element_string(element)}")
            seen.add(element)
    return elements


def to_field_set(value: Any, schema: Schema) -> FieldSet:
    """The fields an applied configuration sets (structured-merge-diff's ToFieldSet): every scalar
    and atomic value, every associative-list item, every map entry that is data rather than a
    declared struct field, and every null or empty-object field."""
    out: FieldSet = set()

    def walk(node: Any, sch: Schema, path: Path) -> None:
        if isinstance(node, dict):
            if sch.atomic:
                out.add(path)
                return
            for key, child in node.items():
                child_path = (*path, ("f", key))
                walk(child, sch.field_schema(key), child_path)
                if child is None or child == {} or not sch.is_named_field(key):
                    out.add(child_path)
        elif isinstance(node, list):
            if not sch.associative:
                out.add(path)
                return
            elements = index_list(sch, node, path=path, allow_duplicates=False)
            for element, item in zip(elements, node, strict=True):
                child_path = (*path, element)
                walk(item, sch.item_schema(), child_path)
                out.add(child_path)
        elif node is not None:
            out.add(path)

    walk(value, schema, ())
    out.discard(())
    return out


def applied_fields_v1(value: JsonObj, schema: Schema, *, skip: frozenset[Path] = frozenset(),
                      only_top: str | None = None, except_top: str | None = None) -> JsonObj:
    """`encode_fields_v1(to_field_set(value, schema) - skip)` in one walk, without the set: what
    an apply that creates an object records. `only_top`/`except_top` keep only, or drop, the
    paths under one top-level field (the reset-fields filters). Raises what `to_field_set`
    raises, in the same order (the walk visits the value as it does)."""

    def render(node: Any, sch: Schema, path: Path, member: bool, skipped: Any) -> JsonObj | None:
        # `member`: the parent's rule (null, empty or map-data fields, list items) makes this
        # node a member; scalars and atomic values are members by themselves.
        member_skipped, below = skipped if skipped is not None else (False, None)
        children: JsonObj = {}
        if isinstance(node, dict):
            if sch.atomic:
                member = True
            else:
                children = render_fields(node, sch, path, below, None, None)
        elif isinstance(node, list):
            if not sch.associative:
                member = True
            else:
                elements = index_list(sch, node, path=path, allow_duplicates=False)
                item_schema = sch.item_schema()
                for element, item in zip(elements, node, strict=True):
                    rendered = render(item, item_schema, (*path, element), True,
                                      below.get(element) if below else None)
                    if rendered is not None:
                        children[encode_element(element)] = rendered
                children = {text: children[text] for text in sorted(children)}
        elif node is not None:
            member = True
        member = member and not member_skipped
        if not children:
            return {} if member else None
        return {".": {}, **children} if member else children

    def render_fields(node: JsonObj, sch: Schema, path: Path, below: Any, only: str | None,
                      dropped: str | None) -> JsonObj:
        children: JsonObj = {}
        for key, child in node.items():
            element = ("f", key)
            member = child is None or child == {} or not sch.is_named_field(key)
            # A filtered-out field is still walked: to_field_set would raise on it too.
            rendered = render(child, sch.field_schema(key), (*path, element), member,
                              below.get(element) if below else None)
            if rendered is not None and (only is None or key == only) and key != dropped:
                children["f:" + key] = rendered
        return {text: children[text] for text in sorted(children)}

    if isinstance(value, dict) and not schema.atomic:
        return render_fields(value, schema, (), _skip_trie(skip) if skip else None, only_top, except_top)
    return {}


def all_paths(value: Any, schema: Schema) -> FieldSet:
    """Every addressable node of a value (ToFieldSet with every named field made a member)."""
    out: FieldSet = set()

    def walk(node: Any, sch: Schema, path: Path) -> None:
        if path:
            out.add(path)
        if isinstance(node, dict) and not sch.atomic:
            for key, child in node.items():
                walk(child, sch.field_schema(key), (*path, ("f", key)))
        elif isinstance(node, list) and sch.associative:
            elements = index_list(sch, node, path=path, allow_duplicates=True)
            for element, item in zip(elements, node, strict=True):
                walk(item, sch.item_schema(), (*path, element))

    walk(value, schema, ())
    return out


def child_schema(schema: Schema, element: PathElement) -> Schema:
    return schema.field_schema(element[1]) if element[0] == "f" else schema.item_schema()


def ensure_named_fields_are_members(paths: FieldSet, schema: Schema) -> FieldSet:
    """Add every ancestor that is a struct field, as structured-merge-diff's
    EnsureNamedFieldsAreMembers does before removing items."""
    out = set(paths)
    for path in paths:
        sch = schema
        for depth, element in enumerate(path[:-1]):
            if element[0] == "f" and sch.is_named_field(element[1]):
                out.add(path[:depth + 1])
            sch = child_schema(sch, element)
    return out


def _trie(paths: Iterable[Path]) -> dict[PathElement, Any]:
    """{element: (is_member, children)} so removals can tell members from ancestors."""
    root: dict[PathElement, Any] = {}
    for path in paths:
        node = root
        for depth, element in enumerate(path):
            member, children = node.get(element, (False, {}))
            if depth == len(path) - 1:
                member = True
            node[element] = (member, children)
            node = children
    return root


def remove_items(value: Any, paths: Iterable[Path], schema: Schema) -> Any:
    """A copy of `value` without the members of `paths` (a removed member takes its subtree)."""
    def walk(node: Any, sch: Schema, trie: dict[PathElement, Any]) -> Any:
        if not trie:
            return node
        if isinstance(node, dict) and not sch.atomic:
            out: JsonObj = {}
            for key, child in node.items():
                entry = trie.get(("f", key))
                if entry is None:
                    out[key] = child
                elif not entry[0]:
                    out[key] = walk(child, sch.field_schema(key), entry[1])
            return out
        if isinstance(node, list) and sch.associative:
            elements = index_list(sch, node, path=(), allow_duplicates=True)
            items: list[Any] = []
            for element, item in zip(elements, node, strict=True):
                entry = trie.get(element)
                if entry is None:
                    items.append(item)
                elif not entry[0]:
                    items.append(walk(item, sch.item_schema(), entry[1]))
            return items
        return node

    return walk(value, schema, _trie(paths))


def merge_values(lhs: Any, rhs: Any, schema: Schema) -> Any:
    """structured-merge-diff's merge of an applied configuration (rhs) into a live object (lhs):
    dicts merge key by key, associative lists item by item (keeping live-only items where they
    were), everything else (scalars, atomic values) is taken from rhs. A null in rhs unsets."""
    if type(lhs) is type(rhs) and lhs == rhs:
        return rhs  # re-applying what is already there: the steady state of a reconcile loop
    if isinstance(lhs, dict) and isinstance(rhs, dict) and not schema.atomic:
        out: JsonObj = dict(lhs)
        for key, value in rhs.items():
            if value is None:
                out.pop(key, None)
            elif key in lhs:
                out[key] = merge_values(lhs[key], value, schema.field_schema(key))
            else:
                out[key] = value
        return out
    if isinstance(lhs, list) and isinstance(rhs, list) and schema.associative:
        return _merge_lists(lhs, rhs, schema)
    return rhs


def _merge_lists(lhs: list[Any], rhs: list[Any], schema: Schema) -> list[Any]:
    """Port of structured-merge-diff's list merge order: shared items in rhs order, live-only
    items kept next to the live items they followed, new items where rhs puts them."""
    item_schema = schema.item_schema()
    rhs_elements = index_list(schema, rhs, path=(), allow_duplicates=True)
    lhs_elements = index_list(schema, lhs, path=(), allow_duplicates=True)
    observed_lhs: dict[PathElement, Any] = {}
    for element, item in zip(lhs_elements, lhs, strict=True):
        observed_lhs.setdefault(element, item)
    observed_rhs: dict[PathElement, Any] = {}
    for element, item in zip(rhs_elements, rhs, strict=True):
        observed_rhs.setdefault(element, item)
    shared = [e for e in rhs_elements if e in observed_lhs]
    shared.reverse()
    next_shared = shared.pop() if shared else None
    merged_rhs: set[PathElement] = set()
    out: list[Any] = []
    li = ri = 0
    while li < len(lhs_elements) or ri < len(rhs_elements):
        if li < len(lhs_elements) and ri < len(rhs_elements):
            element = lhs_elements[li]
            if element == rhs_elements[ri]:
                merged_rhs.add(element)
                out.append(merge_values(observed_lhs[element], observed_rhs[element], item_schema))
                li += 1
                ri += 1
                next_shared = shared.pop() if shared else None
                continue
            if element in observed_rhs and next_shared is not None and next_shared != element:
                li += 1
                continue
        if li < len(lhs_elements):
            element = lhs_elements[li]
            if element not in observed_rhs:
                out.append(lhs[li])
                li += 1
                continue
            if element in merged_rhs:
                li += 1
                continue
        if ri < len(rhs_elements):
            element = rhs_elements[ri]
            merged_rhs.add(element)
            live = observed_lhs.get(element)
            incoming = observed_rhs[element]
            out.append(incoming if live is None else merge_values(live, incoming, item_schema))
            ri += 1
            if next_shared is not None and next_shared == element:
                next_shared = shared.pop() if shared else None
    return out


_MISSING: Any = object()


def compare(old: Any, new: Any, schema: Schema) -> tuple[FieldSet, FieldSet, FieldSet]:
    """(added, modified, removed) between two values, as structured-merge-diff's Compare:
    leaves (scalars, atomic values) are added/removed/modified; containers only added/removed.

    A container counts as present on a side when it is in the JSON or when it is `zero_present`
    (a non-pointer Go struct or non-omitempty list) under a present parent, since the apiserver
    compares typed objects in which those always exist. Custom resources have no such fields."""
    added: FieldSet = set()
    modified: FieldSet = set()
    removed: FieldSet = set()

    def container(node: Any, sch: Schema) -> bool:
        return (isinstance(node, dict) and not sch.atomic) or (isinstance(node, list) and sch.associative)

    def walk(lhs: Any, rhs: Any, sch: Schema, path: Path, lhs_parent: bool, rhs_parent: bool) -> None:
        if lhs is rhs or (type(lhs) is type(rhs) and lhs == rhs):
            return  # nothing below changed (the common case: most of an object is untouched)
        left_container = lhs is not _MISSING and container(lhs, sch)
        right_container = rhs is not _MISSING and container(rhs, sch)
        both_present = lhs is not _MISSING and rhs is not _MISSING
        if both_present and (left_container != right_container
                             or (left_container and type(lhs) is not type(rhs))):
            modified.add(path)
            return
        if not (left_container or right_container):
            if lhs is _MISSING:
                added.add(path)
            elif rhs is _MISSING:
                removed.add(path)
            elif not _equal(lhs, rhs):
                modified.add(path)
            return
        left_typed = lhs is not _MISSING or (sch.zero_present and lhs_parent)
        right_typed = rhs is not _MISSING or (sch.zero_present and rhs_parent)
        sample = rhs if rhs is not _MISSING else lhs
        if isinstance(sample, dict):
            left = lhs if isinstance(lhs, dict) else {}
            right = rhs if isinstance(rhs, dict) else {}
            for key in {**left, **right}:
                walk(left.get(key, _MISSING), right.get(key, _MISSING), sch.field_schema(key),
                     (*path, ("f", key)), left_typed, right_typed)
        else:
            left_items = _items(sch, lhs if isinstance(lhs, list) else [])
            right_items = _items(sch, rhs if isinstance(rhs, list) else [])
            for element in {**left_items, **right_items}:
                walk(left_items.get(element, _MISSING), right_items.get(element, _MISSING),
                     sch.item_schema(), (*path, element), False, False)
        if path:
            if not left_typed:
                added.add(path)
            elif not right_typed:
                removed.add(path)

    walk(old, new, schema, (), True, True)
    return added, modified, removed


@lru_cache(maxsize=16)
def _skip_trie(skip: frozenset[Path]) -> dict[PathElement, Any]:
    return _trie(skip)


def added_fields_v1(value: JsonObj, schema: Schema, *, skip: frozenset[Path] = frozenset()) -> JsonObj:
    """fieldsV1 of everything `compare({}, value)` reports added, built directly: the create
    path, where going through path tuples, a set and a trie costs several times more.
    Paths in `skip` are never members (their descendants still are)."""
    # `skip` is walked as a trie alongside the value ({element: (member, children)}), so no node
    # hashes its whole path to ask whether it is skipped.

    def render(node: Any, sch: Schema, path: Path, skipped: Any, in_zero_object: bool) -> JsonObj | None:
        member_skipped, below = skipped if skipped is not None else (False, None)
        present = in_zero_object and sch.zero_present
        if isinstance(node, dict) and not sch.atomic:
            children = render_fields(node, sch, path, below, present)
        elif isinstance(node, list) and sch.associative:
            children = render_items(node, sch, path, below)
        else:
            return None if member_skipped else {}
        if not present and not member_skipped:
            return {".": {}, **children} if children else {}
        return children or None

    def render_fields(node: JsonObj, sch: Schema, path: Path, below: Any, present: bool) -> JsonObj:
        children: JsonObj = {}
        for key in sorted(node):
            element = ("f", key)
            rendered = render(node[key], sch.field_schema(key), (*path, element),
                              below.get(element) if below else None, present)
            if rendered is not None:
                children["f:" + key] = rendered
        return children

    def render_items(node: list[Any], sch: Schema, path: Path, below: Any) -> JsonObj:
        elements = index_list(sch, node, path=path, allow_duplicates=True)
        item_schema = sch.item_schema()
        rendered_items: dict[str, JsonObj] = {}
        for element, item in zip(elements, node, strict=True):
            rendered = render(item, item_schema, (*path, element), below.get(element) if below else None, False)
            rendered_items.setdefault(encode_element(element), rendered if rendered is not None else {})
        return {text: rendered_items[text] for text in sorted(rendered_items)}

    skips = _skip_trie(skip) if skip else None
    # The root is never a member itself; its fields count as inside a present object.
    if isinstance(value, dict) and not schema.atomic:
        return render_fields(value, schema, (), skips, True)
    if isinstance(value, list) and schema.associative:
        return render_items(value, schema, (), skips)
    return {}


def _items(schema: Schema, items: list[Any]) -> dict[PathElement, Any]:
    out: dict[PathElement, Any] = {}
    for element, item in zip(index_list(schema, items, path=(), allow_duplicates=True), items, strict=True):
        out.setdefault(element, item)
    return out


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b
