"""YAML request bodies, decoded without handing the event loop to a hostile document.

A "billion laughs" body (anchors aliasing anchors) is small on the wire and expands exponentially once
decoded; a deeply nested flow sequence (`[[[[...`) overflows libyaml's recursive composer and kills the
process. Before composing, one streaming pass over libyaml's events (iterative) measures both: nesting
deeper than MAX_DEPTH, or aliasing beyond go-yaml v2's rule (the decoder behind the apiserver's YAML,
hardened for CVE-2019-11253: "document contains excessive aliasing"), is a 400 and nothing is built.
"""

from __future__ import annotations

from typing import Any

import yaml

from kaiwo_sandbox.contracts import ApiError

_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MAX_DEPTH = 1000  # nesting of mappings and sequences; Kubernetes objects need a few dozen
_RATIO_LOW, _RATIO_HIGH = 400_000, 4_000_000


def allowed_alias_ratio(decode_count: int) -> float:
    """go-yaml v2's allowedAliasRatio: 99% of decoded nodes may come from aliases in small documents,
    scaling down to 10% for very large ones."""
    if decode_count <= _RATIO_LOW:
        return 0.99
    if decode_count >= _RATIO_HIGH:
        return 0.10
    return 0.99 - 0.89 * (decode_count - _RATIO_LOW) / (_RATIO_HIGH - _RATIO_LOW)


def _excessive(alias_count: int, decode_count: int) -> bool:
    return alias_count > 100 and decode_count > 1000 and alias_count / decode_count > allowed_alias_ratio(decode_count)


def check_yaml(raw: bytes) -> None:
    """400 when decoding `raw` would expand aliases beyond go-yaml's bound or nest deeper than MAX_DEPTH.
    Counts as go-yaml's decoder does: every node decoded, and every node decoded inside an alias."""
    loader = _LOADER(raw)
    # Open collections: [anchor, nodes decoded so far in it (itself included)].
    stack: list[list[Any]] = []
    sizes: dict[str, int] = {}  # anchor -> nodes its value decodes to (its own aliases expanded)
    decode_count = alias_count = 0
    try:
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                if len(stack) >= MAX_DEPTH:
                    raise ApiError.bad_request(f"error decoding YAML: nesting deeper than {MAX_DEPTH} levels")
                stack.append([event.anchor, 1])
                decode_count += 1
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                anchor, size = stack.pop()
                if anchor is not None:
                    sizes[anchor] = size
                if stack:
                    stack[-1][1] += size
            elif isinstance(event, yaml.ScalarEvent):
                decode_count += 1
                if event.anchor is not None:
                    sizes[event.anchor] = 1
                if stack:
                    stack[-1][1] += 1
            elif isinstance(event, yaml.AliasEvent):
                size = sizes.get(event.anchor or "")
                if size is None:  # unknown, or an anchor whose value contains itself
                    raise ApiError.bad_request(f"error decoding YAML: unknown anchor '{event.anchor}' referenced")
                decode_count += 1 + size
                alias_count += size
                if stack:
                    stack[-1][1] += 1 + size
                if _excessive(alias_count, decode_count):
                    raise ApiError.bad_request("error decoding YAML: yaml: document contains excessive aliasing")
            elif isinstance(event, yaml.DocumentStartEvent):
                sizes.clear()  # anchors do not cross documents
    except yaml.YAMLError as err:
        raise ApiError.bad_request(f"error decoding YAML: {err}") from None
    finally:
        loader.dispose()


def load_yaml(raw: bytes) -> Any:
    """The decoded document (400 on a malformed, over-aliased or over-nested one)."""
    check_yaml(raw)
    try:
        return yaml.load(raw, Loader=_LOADER)
    except yaml.YAMLError as err:
        raise ApiError.bad_request(f"error decoding YAML: {err}") from None
