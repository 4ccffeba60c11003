"""The three classic patch formats as a real apiserver applies them: JSON patch (RFC 6902, with
evanphx/json-patch's quirks), JSON merge patch (RFC 7386) and strategic merge patch (built-in
kinds only, driven by the merge-key table in `merge_keys.py`).

Pure functions over JSON dicts. Inputs are never mutated: every function works on its own deep
copy. Errors carry what the apiserver answers:

- JSON patch: a body that is not a list of objects is 400 with Go's decoding message; any
  operation that cannot apply (missing path, failed `test`, unknown op) is the apiserver's generic
  422 `the server rejected our request due to an error in our request` (it drops the library's
  reason; ours is kept on `__cause__` for debugging).
- Merge patch: a body that is not an object is 400 `Invalid JSON Patch`.
- Strategic merge: the apimachinery mergepatch errors with their 400/422 classification; other
  failures (a list item without its merge key, `$patch: merge` in a list) are 500s with the
  library's message, as an apiserver reports an error that is not a Status.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, TypeVar

from kaiwo_sandbox.contracts import ApiError, JsonObj
from kaiwo_sandbox.semantics.field_errors import go_json_kind
from kaiwo_sandbox.semantics.merge_keys import Schema, is_builtin, schema_for

__all__ = [
    "apply_json_patch",
    "apply_merge_patch",
    "apply_strategic_merge_patch",
    "clone_json",
    "strategic_merge_supported",
]

_T = TypeVar("_T")

REJECTED_MESSAGE = "the server rejected our request due to an error in our request"
MAX_JSON_PATCH_OPERATIONS = 10000


def clone_json(value: _T) -> _T:
    """Deep copy of a JSON value (several times faster than copy.deepcopy for this shape)."""
    if isinstance(value, dict):
        return {k: clone_json(v) for k, v in value.items()}  # type: ignore[return-value]
    if isinstance(value, list):
        return [clone_json(v) for v in value]  # type: ignore[return-value]
    return value


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality where true != 1 (Python's bool is an int; JSON's is not)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


def _go_value(value: Any) -> str:
    """Go's %v rendering of a decoded JSON value, for messages copied from the Go libraries."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{_go_value(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(_go_value(v) for v in value) + "]"
    return str(value)


# ----------------------------------------------------------------------------------------------
# JSON patch (RFC 6902)


class JsonPatchError(Exception):
    """Why an operation failed; the apiserver hides it behind its generic 422."""


def _rejected(detail: str) -> ApiError:
    error = ApiError(422, "Invalid", REJECTED_MESSAGE, {})
    error.__cause__ = JsonPatchError(detail)
    return error


_INDEX = re.compile(r"[+-]?[0-9]+")


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _array_index(container: list[Any], token: str, *, for_insert: bool) -> int:
    if for_insert and token == "-":
        return len(container)
    if not _INDEX.fullmatch(token):
        raise JsonPatchError(f"invalid array index: {token!r}")
    index = int(token)
    if index < 0:  # evanphx/json-patch supports negative indices (from the end)
        if index < -len(container):
            raise JsonPatchError(f"index out of bounds: {index}")
        index += len(container)
    limit = len(container) if for_insert else len(container) - 1
    if index > limit:
        raise JsonPatchError(f"index out of bounds: {index}")
    return index


def _find_parent(doc: Any, path: str) -> tuple[Any, str]:
    """The container holding the target of `path`, and the target's (unescaped) key.

    Like evanphx/json-patch, the text before the first '/' is ignored and a path without any '/'
    names nothing."""
    if not isinstance(path, str):
        raise JsonPatchError("path must be a string")
    parts = path.split("/")
    if len(parts) < 2:
        raise JsonPatchError(f"doc is missing path: {path!r}")
    node = doc
    for raw in parts[1:-1]:
        token = _unescape(raw)
        if isinstance(node, dict):
            if token not in node or node[token] is None:
                raise JsonPatchError(f"doc is missing path: {path!r}")
            node = node[token]
        elif isinstance(node, list):
            node = node[_array_index(node, token, for_insert=False)]
        else:
            raise JsonPatchError(f"doc is missing path: {path!r}")
    if not isinstance(node, dict | list):
        raise JsonPatchError(f"doc is missing path: {path!r}")
    return node, _unescape(parts[-1])


def _get(doc: Any, path: str) -> Any:
    parent, key = _find_parent(doc, path)
    if isinstance(parent, dict):
        if key not in parent:
            raise JsonPatchError(f"doc is missing key: {path!r}")
        return parent[key]
    return parent[_array_index(parent, key, for_insert=False)]


def _add(doc: Any, path: str, value: Any) -> None:
    parent, key = _find_parent(doc, path)
    if isinstance(parent, dict):
        parent[key] = value
    else:
        parent.insert(_array_index(parent, key, for_insert=True), value)


def _remove(doc: Any, path: str) -> Any:
    parent, key = _find_parent(doc, path)
    if isinstance(parent, dict):
        if key not in parent:
            raise JsonPatchError(f"unable to remove nonexistent key: {key!r}")
        return parent.pop(key)
    return parent.pop(_array_index(parent, key, for_insert=False))


def _replace(doc: Any, path: str, value: Any) -> None:
    parent, key = _find_parent(doc, path)
    if isinstance(parent, dict):
        if key not in parent:
            raise JsonPatchError(f"replace operation does not apply: doc is missing key: {path!r}")
        parent[key] = value
    else:
        parent[_array_index(parent, key, for_insert=False)] = value


def _test(doc: Any, path: str, value: Any) -> None:
    parent, key = _find_parent(doc, path)
    if isinstance(parent, dict):
        actual = parent.get(key)
    else:
        actual = parent[_array_index(parent, key, for_insert=False)]
    # evanphx/json-patch: a missing key tests equal to null.
    if not json_equal(actual, value):
        raise JsonPatchError(f"testing value {path!r} failed")


def _apply_operation(doc: Any, op: JsonObj) -> None:
    kind = op.get("op")
    path = op.get("path")
    if not isinstance(path, str):
        raise JsonPatchError(f"{kind} operation failed to decode path")
    if kind == "add":
        _add(doc, path, clone_json(op.get("value")))
    elif kind == "remove":
        _remove(doc, path)
    elif kind == "replace":
        _replace(doc, path, clone_json(op.get("value")))
    elif kind == "move":
        source = op.get("from")
        if not isinstance(source, str):
            raise JsonPatchError("move operation failed to decode from")
        _add(doc, path, _remove(doc, source))
    elif kind == "copy":
        source = op.get("from")
        if not isinstance(source, str):
            raise JsonPatchError("copy operation failed to decode from")
        _add(doc, path, clone_json(_get(doc, source)))
    elif kind == "test":
        _test(doc, path, op.get("value"))
    else:
        raise JsonPatchError(f"Unexpected kind: {kind}")


def apply_json_patch(doc: JsonObj, ops: Any) -> JsonObj:
    """Apply an RFC 6902 patch (a list of operations) to a copy of `doc`."""
    if ops is None:
        return clone_json(doc)  # Go decodes `null` into an empty patch
    if not isinstance(ops, list):
        raise ApiError.bad_request(
            f"json: cannot unmarshal {go_json_kind(ops)} into Go value of type jsonpatch.Patch")
    if len(ops) > MAX_JSON_PATCH_OPERATIONS:
        raise ApiError(413, "RequestEntityTooLarge", "Request entity too large: The allowed maximum operations "
                       f"in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {len(ops)}")
    for op in ops:
        if op is not None and not isinstance(op, dict):
            raise ApiError.bad_request(
                f"json: cannot unmarshal {go_json_kind(op)} into Go value of type jsonpatch.Operation")
    result = clone_json(doc)
    for op in ops:
        try:
            _apply_operation(result, op or {})
        except JsonPatchError as exc:
            raise _rejected(str(exc)) from exc
    if not isinstance(result, dict):
        raise _rejected("the patched document is not an object")
    return result


# ----------------------------------------------------------------------------------------------
# JSON merge patch (RFC 7386)


def _merge_into(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return clone_json(patch)
    result = target if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge_into(result.get(key), value)
    return result


def _merge_sharing(target: Any, patch: Any) -> Any:
    """`_merge_into(clone_json(target), patch)` without the clone: new containers along the
    patch's paths, everything else shared with `target` (which is never modified)."""
    if not isinstance(patch, dict):
        return clone_json(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge_sharing(result.get(key), value)
    return result


def apply_merge_patch(doc: JsonObj, patch: Any) -> JsonObj:
    """Apply an RFC 7386 merge patch: objects merge recursively, null deletes, anything else
    (lists included) replaces."""
    return apply_merge_patch_in_place(clone_json(doc), patch)


def apply_merge_patch_in_place(doc: JsonObj, patch: Any) -> JsonObj:
    """`apply_merge_patch` on a document the caller owns outright: merged into `doc` itself."""
    _check_merge_patch(patch)
    result = _merge_into(doc, patch)
    assert isinstance(result, dict)
    return result


def apply_merge_patch_sharing(doc: JsonObj, patch: Any) -> JsonObj:
    """`apply_merge_patch` that leaves `doc` alone and shares with it every value the patch does
    not reach: for a read-only `doc` whose result is itself only read below the patched paths."""
    _check_merge_patch(patch)
    result = _merge_sharing(doc, patch)
    assert isinstance(result, dict)
    return result


def _check_merge_patch(patch: Any) -> None:
    if isinstance(patch, list):
        # evanphx/json-patch returns the array itself; the apiserver then fails to decode it.
        document = json.dumps(patch, separators=(",", ":"), ensure_ascii=False)
        raise ApiError.invalid("", "", "", [{
            "reason": "FieldValueInvalid",
            "message": f"Invalid value: {json.dumps(document, ensure_ascii=False)}: couldn't get version/kind; "
                       "json parse error: json: cannot unmarshal array into Go value of type struct "
                       '{ APIVersion string "json:\\"apiVersion,omitempty\\""; '
                       'Kind string "json:\\"kind,omitempty\\"" }',
            "field": "patch",
        }])
    if not isinstance(patch, dict):
        raise ApiError.bad_request("Invalid JSON Patch")


# ----------------------------------------------------------------------------------------------
# Strategic merge patch (k8s.io/apimachinery/pkg/util/strategicpatch, server side)

DIRECTIVE = "$patch"
RETAIN_KEYS = "$retainKeys"
SET_ELEMENT_ORDER = "$setElementOrder"
DELETE_FROM_PRIMITIVE_LIST = "$deleteFromPrimitiveList"


class _SmpError(Exception):
    """A strategic merge failure; `code` says how the apiserver classifies it."""

    def __init__(self, message: str, code: int = 500) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def _bad_format(message: str) -> _SmpError:
    return _SmpError(message, 400)


_ERR_RETAIN_KEYS = "invalid patch format of retainKeys"
_ERR_PRIMITIVE_LIST = "invalid patch format of primitive list"
_ERR_SET_ELEMENT_ORDER = "invalid patch format of setElementOrder list"


def strategic_merge_supported(group: str, kind: str) -> bool:
    """Strategic merge needs Go struct tags, so a real apiserver only accepts it for its own
    (built-in) types; for custom resources the store answers 415."""
    del kind  # every built-in kind is typed; no built-in group serves custom kinds
    return is_builtin(group)


def apply_strategic_merge_patch(doc: JsonObj, patch: Any, *, group: str, kind: str) -> JsonObj:
    """Apply a strategic merge patch to a copy of `doc` of the given built-in kind."""
    if not isinstance(patch, dict):
        raise ApiError.bad_request(
            f"json: cannot unmarshal {go_json_kind(patch)} into Go value of type map[string]interface {{}}")
    if not strategic_merge_supported(group, kind):
        raise ApiError.bad_request("strategic merge patch format is not supported")
    schema = schema_for(group, kind)
    try:
        result = _merge_map(clone_json(doc), clone_json(patch), schema)
    except _SmpError as exc:
        if exc.code == 400:
            raise ApiError.bad_request(exc.message) from exc
        if exc.code == 422:
            raise _rejected(exc.message) from exc
        raise ApiError(500, "", exc.message) from exc
    return result


def _sanitize(value: Any) -> Any:
    """A value taken from the patch as-is: drop nulls and leftover directives, which the typed
    decode that follows a real strategic merge drops too."""
    if isinstance(value, dict):
        return {k: _sanitize(v) for k, v in value.items() if v is not None and not k.startswith("$")}
    if isinstance(value, list):
        return [_sanitize(v) for v in value]
    return value


def _merge_map(original: JsonObj | None, patch: JsonObj, schema: Schema) -> JsonObj:
    if DIRECTIVE in patch:
        directive = patch[DIRECTIVE]
        if directive == "replace":
            del patch[DIRECTIVE]
            return _sanitize(patch)  # type: ignore[no-any-return]
        if directive == "delete":
            return {}
        raise _SmpError(f"unknown patch type: {_go_value(directive)} in map: {_go_value(patch)}")
    if original is None:
        original = {}
    _apply_retain_keys(original, patch)
    _merge_ordered_lists(original, patch, schema)
    for key in list(patch):
        value = patch[key]
        is_delete_list = False
        if key.startswith(DELETE_FROM_PRIMITIVE_LIST):
            key = _strip_prefix(key, DELETE_FROM_PRIMITIVE_LIST, _ERR_PRIMITIVE_LIST)
            is_delete_list = True
        if value is None:
            original.pop(key, None)
            continue
        if key not in original or _json_kind(original[key]) != _json_kind(value):
            if not is_delete_list:
                original[key] = _sanitize(value)
            continue
        sub = schema.field_schema(key)
        if isinstance(value, dict):
            if sub.patch_strategy == "replace":
                original[key] = _sanitize(value)
            else:
                original[key] = _merge_map(original[key], value, sub)
        elif isinstance(value, list):
            original[key] = _merge_list_field(original[key], value, sub, is_delete_list)
        else:
            original[key] = value
    return original


def _json_kind(value: Any) -> str:
    """Go's reflect kind of a decoded value: maps, slices, and scalars of distinct types."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    return type(value).__name__


def _strip_prefix(key: str, prefix: str, error: str) -> str:
    head, sep, rest = key.partition("/")
    if not sep or head != prefix:
        raise _bad_format(error)
    return rest


def _apply_retain_keys(original: JsonObj, patch: JsonObj) -> None:
    if RETAIN_KEYS not in patch:
        return
    retain = patch.pop(RETAIN_KEYS)
    if not isinstance(retain, list):
        raise _bad_format(_ERR_RETAIN_KEYS)
    keep = {k for k in retain if isinstance(k, str)}
    for key, value in patch.items():
        if value is None or key.startswith((DELETE_FROM_PRIMITIVE_LIST, SET_ELEMENT_ORDER)):
            continue
        if key not in keep:
            raise _bad_format(_ERR_RETAIN_KEYS)
    for key in list(original):
        if key not in keep:
            del original[key]


def _merge_list_field(original: list[Any], patch: list[Any], schema: Schema, is_delete_list: bool) -> list[Any]:
    if schema.patch_strategy == "merge":
        return _merge_slice(original, patch, schema.patch_merge_key, schema.item_schema(), is_delete_list)
    return _sanitize(patch)  # type: ignore[no-any-return]


def _element_kind(*lists: list[Any]) -> str:
    kind: str | None = None
    for items in lists:
        for item in items:
            current = "map" if isinstance(item, dict) else _json_kind(item)
            if kind is None:
                if isinstance(item, list):
                    raise _SmpError("lists of lists are not supported", 422)
                kind = current
            elif kind != current:
                raise _SmpError(f"list element types are not identical: {_go_value(list(lists))}")
    if kind is None:
        raise _SmpError("no elements in any of the given slices")
    return kind


def _merge_slice(original: list[Any], patch: list[Any], merge_key: str, item: Schema,
                 is_delete_list: bool) -> list[Any]:
    if not original and not patch:
        return original
    kind = _element_kind(original, patch)
    if kind != "map":
        if is_delete_list:
            return [v for v in original if not any(json_equal(v, d) for d in patch)]
        merged = _dedupe(original + patch)
        patch_items, server_only = _partition(merged, patch, "")
        return _normalize_order(patch_items, server_only, patch, original, "")
    if not merge_key:
        raise _SmpError("cannot merge lists without merge key for type map")
    original, patch = _merge_special_elements(original, patch, merge_key)
    merged = list(original)
    for entry in patch:
        if merge_key not in entry:
            raise _no_merge_key(entry, merge_key)
        position = _find_by_key(merged, merge_key, entry[merge_key])
        if position >= 0:
            merged[position] = _merge_map(merged[position], entry, item)
        else:
            merged.append(_sanitize(entry))
    patch_items, server_only = _partition(merged, patch, merge_key)
    return _normalize_order(patch_items, server_only, patch, original, merge_key)


def _no_merge_key(entry: Any, merge_key: str) -> _SmpError:
    return _SmpError(f"map: {_go_value(entry)} does not contain declared merge key: {merge_key}")


def _merge_special_elements(original: list[Any], patch: list[Any], merge_key: str) -> tuple[list[Any], list[Any]]:
    """Handle `$patch` items of a patch list: delete by key, replace the whole list."""
    plain: list[Any] = []
    replace = False
    for entry in patch:
        if not isinstance(entry, dict) or DIRECTIVE not in entry:
            plain.append(entry)
            continue
        directive = entry[DIRECTIVE]
        if directive == "delete":
            if merge_key not in entry:
                raise _no_merge_key(entry, merge_key)
            original = [o for o in original
                        if not (isinstance(o, dict) and merge_key in o and json_equal(o[merge_key], entry[merge_key]))]
        elif directive == "replace":
            replace = True
        elif directive == "merge":
            raise _SmpError("merging lists cannot yet be specified in the patch")
        else:
            raise _SmpError(f"unknown patch type: {_go_value(directive)} in map: {_go_value(entry)}")
    if replace:
        return [_sanitize(p) for p in plain], []
    return original, plain


def _find_by_key(items: list[Any], merge_key: str, value: Any) -> int:
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise _SmpError(f"value for key {index} is not a map.")
        if merge_key in item and json_equal(item[merge_key], value):
            return index
    return -1


def _dedupe(items: list[Any]) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if not any(json_equal(item, seen) for seen in out):
            out.append(item)
    return out


def _index_in(order: list[Any], item: Any, merge_key: str) -> int:
    for index, candidate in enumerate(order):
        if merge_key:
            if isinstance(candidate, dict) and isinstance(item, dict) and merge_key in candidate \
                    and json_equal(candidate[merge_key], item.get(merge_key)):
                return index
        elif json_equal(candidate, item):
            return index
    return -1


def _partition(merged: list[Any], by: list[Any], merge_key: str) -> tuple[list[Any], list[Any]]:
    """Split merged items into those named in `by` (the patch or the order list) and server-only."""
    in_patch: list[Any] = []
    server_only: list[Any] = []
    for item in merged:
        if merge_key and (not isinstance(item, dict) or merge_key not in item):
            raise _no_merge_key(item, merge_key)
        (in_patch if _index_in(by, item, merge_key) >= 0 else server_only).append(item)
    return in_patch, server_only


def _normalize_order(patch_items: list[Any], server_only: list[Any], patch_order: list[Any],
                     server_order: list[Any], merge_key: str) -> list[Any]:
    """Patch items in patch order, server-only items in server order, interleaved by their
    positions in the live list (the design of preserve-order-in-strategic-merge-patch)."""
    for entry in patch_order:
        if merge_key and isinstance(entry, dict) and merge_key not in entry:
            raise _no_merge_key(entry, merge_key)

    def by(order: list[Any]) -> Callable[[Any], int]:
        def position(item: Any) -> int:
            found = _index_in(order, item, merge_key)
            return found if found >= 0 else -1
        return position

    patch_sorted = sorted(patch_items, key=by(patch_order))
    server_sorted = sorted(server_only, key=by(server_order))
    out: list[Any] = []
    i = j = 0
    while i < len(server_sorted) or j < len(patch_sorted):
        if i >= len(server_sorted):
            out.append(patch_sorted[j])
            j += 1
        elif j >= len(patch_sorted):
            out.append(server_sorted[i])
            i += 1
        else:
            left = _index_in(server_order, server_sorted[i], merge_key)
            right = _index_in(server_order, patch_sorted[j], merge_key)
            if left >= 0 and right >= 0 and left < right:
                out.append(server_sorted[i])
                i += 1
            else:
                out.append(patch_sorted[j])
                j += 1
    return out


def _merge_ordered_lists(original: JsonObj, patch: JsonObj, schema: Schema) -> None:
    """Process `$setElementOrder/<field>` directives: merge that field's patch list now and put
    the result in the order the directive gives (server-only items interleaved)."""
    for directive in [k for k in patch if k.startswith(SET_ELEMENT_ORDER)]:
        order = patch.pop(directive)
        key = _strip_prefix(directive, SET_ELEMENT_ORDER, _ERR_SET_ELEMENT_ORDER)
        if not isinstance(order, list):
            raise _SmpError(f"expected []interface{{}}, but got {type(order).__name__}")
        sub = schema.field_schema(key)
        merge_key = sub.patch_merge_key
        found_original = isinstance(original.get(key), list)
        found_patch = key in patch
        original_list: list[Any] = original[key] if found_original else []
        patch_list: list[Any] = []
        if found_patch:
            if not isinstance(patch[key], list):
                raise _bad_format(_ERR_SET_ELEMENT_ORDER)
            patch_list = patch[key]
        _check_order_matches(patch_list, order, merge_key)
        if found_original and found_patch:
            merged = _merge_list_field(original_list, patch_list, sub, False)
        elif found_patch:
            merged = _sanitize(patch_list)
        elif found_original:
            merged = original_list
        else:
            continue
        _element_kind(original_list, patch_list)
        in_order, server_only = _partition(merged, order, merge_key)
        original[key] = _normalize_order(in_order, server_only, order, original_list, merge_key)
        patch.pop(key, None)


def _check_order_matches(patch_list: list[Any], order: list[Any], merge_key: str) -> None:
    """The patch list's items must appear in the $setElementOrder list, in the same order."""
    if not order or not patch_list:
        return
    items = [p for p in patch_list if not (isinstance(p, dict) and DIRECTIVE in p)] if merge_key else patch_list
    p = o = 0
    while p < len(items) and o < len(order):
        left, right = items[p], order[o]
        if merge_key:
            if not isinstance(left, dict) or merge_key not in left:
                raise _no_merge_key(left, merge_key)
            if not isinstance(right, dict) or merge_key not in right:
                raise _no_merge_key(right, merge_key)
            equal = json_equal(left[merge_key], right[merge_key])
        else:
            equal = json_equal(left, right)
        if equal:
            p += 1
        o += 1
    if p < len(items):
        raise _SmpError(f"The order in patch list:\n{_go_value(patch_list)}\n doesn't match "
                        f"{SET_ELEMENT_ORDER} list:\n{_go_value(order)}\n")
