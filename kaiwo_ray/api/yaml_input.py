"""YAML from users, decoded with bounds: what `kaiwo submit`, the admin API, `kaiwo-ray render` and the
sandbox/dev node files read (`kaiwo_ray.manifests`).

Two documents break a plain `yaml.safe_load`: a deeply nested `[[[[...` (RecursionError in the pure
loader, a segfault in libyaml's), and a "billion laughs" of anchors aliasing anchors, which is small
as YAML but expands exponentially once turned into dicts and validated. `safe_load_all` refuses both
as a `yaml.YAMLError` (so callers' "invalid YAML" handling covers them): nesting deeper than
MAX_DEPTH while composing, and documents whose alias-expanded size passes MAX_EXPANDED_NODES,
measured on the composed node graph (shared alias nodes counted once per use, memoised), or that
never end (an alias inside the node it names).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.nodes import MappingNode, Node, SequenceNode

MAX_DEPTH = 100  # a Kubernetes manifest nests a few dozen levels at most
MAX_EXPANDED_NODES = 1_000_000


class BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses nesting deeper than MAX_DEPTH while composing (subclass it to change
    resolvers, as `kaiwo_ray.manifests` does)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise ComposerError(None, None, f"nesting deeper than {MAX_DEPTH} levels", self.peek_event().start_mark)  # type: ignore[no-untyped-call]
            node: Node | None = super().compose_node(parent, index)
            return node
        finally:
            self._depth -= 1


def _expanded_size(node: Node) -> int | None:
    """Nodes the document turns into once every alias is expanded (iterative, memoised per node);
    None when an alias refers to a node that contains it (a recursive document never ends)."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()  # collections whose children are being measured
    stack: list[tuple[Node, bool]] = [(node, False)]
    while stack:
        current, children_done = stack.pop()
        if id(current) in sizes:
            continue
        if isinstance(current, SequenceNode):
            children: list[Node] = list(current.value)
        elif isinstance(current, MappingNode):
            children = [part for pair in current.value for part in pair]
        else:
            sizes[id(current)] = 1
            continue
        if children_done:
            open_nodes.discard(id(current))
            sizes[id(current)] = min(1 + sum(sizes[id(c)] for c in children), MAX_EXPANDED_NODES + 1)
            continue
        if id(current) in open_nodes or any(id(c) in open_nodes or c is current for c in children):
            return None
        open_nodes.add(id(current))
        stack.append((current, True))
        stack.extend((c, False) for c in children if id(c) not in sizes)
    return sizes[id(node)]


def safe_load_all(text: str, loader_class: type[BoundedLoader] = BoundedLoader) -> Iterator[Any]:
    """`yaml.safe_load_all`, refusing documents nested too deeply, recursive, or expanding past the bound."""
    loader = loader_class(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            size = _expanded_size(node)
            if size is None:
                raise ComposerError(None, None, "an alias refers to a node that contains it (a recursive "
                                                "document)", node.start_mark)
            if size > MAX_EXPANDED_NODES:
                raise ComposerError(None, None, f"the document expands to more than {MAX_EXPANDED_NODES:,} "
                                                "values through its aliases", node.start_mark)
            yield loader.construct_document(node)
    finally:
        loader.dispose()
