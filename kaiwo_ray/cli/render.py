"""`kaiwo-ray render`: print the objects the operator would create for a manifest, without a cluster.

KaiwoJob/KaiwoService -> their children (workload renderer); KaiwoQueueConfig -> Kueue objects;
KaiwoConfig/AIMNamespaceConfig -> the object itself, validated, with every default filled in;
Nodes (a node list) -> the default KaiwoQueueConfig Kaiwo derives from them, then its Kueue objects
(the same as `--default-queue-config --nodes FILE`).
Output is in creation order: multi-document YAML, or a `v1 List` with `-o json`.

Bad input exits 2 with one line on stderr naming the file, the document when the file has several,
and the field: `kaiwo-ray: examples/bad.yaml: document 2: spec.gpus: must be >= 0`. Nothing is
printed on stdout unless every document renders, so a pipe into `kubectl apply` never gets half.

Only argparse is imported at module level: `kaiwo-ray --help` should not pay for pydantic.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from kaiwo_ray.api.jsonobj import JsonObj

if TYPE_CHECKING:
    from kaiwo_ray.api.config import KaiwoConfig, KaiwoConfigSpec
    from kaiwo_ray.api.load import KaiwoObject
    from kaiwo_ray.api.queueconfig import KaiwoQueueConfig
    from kaiwo_ray.render.queue import KueueVersion


EXIT_OK = 0
EXIT_INTERNAL_ERROR = 1
EXIT_BAD_INPUT = 2
PROG = "kaiwo-ray"
DEBUG_ENV = "KAIWO_RAY_DEBUG"
SINGLETON_NAME = "kaiwo"  # KaiwoQueueConfig and KaiwoConfig are cluster singletons of this name


class InputError(Exception):
    """Bad user input, already worded as the one line to print (without the program name)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "-f",
        "--filename",
        metavar="FILE",
        help="manifest to render (YAML or JSON, one or more documents); - reads standard input",
    )
    source.add_argument(
        "--default-queue-config",
        action="store_true",
        help="print the KaiwoQueueConfig Kaiwo would create for the nodes, then its Kueue objects",
    )
    parser.add_argument(
        "--nodes",
        metavar="NODES.yaml",
        help="cluster nodes (NodeList, list or multi-document Nodes); default: the sandbox's nodes",
    )
    parser.add_argument(
        "--config",
        metavar="KAIWOCONFIG.yaml",
        help="KaiwoConfig to render with; default: every KaiwoConfig default",
    )
    parser.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml", help="output format")
    parser.add_argument(
        "--kueue-version",
        choices=("v1beta2", "v1beta1"),
        default="v1beta2",
        help="Kueue API version of rendered Kueue objects (v1beta1 for Kueue < 0.15)",
    )


def run(args: argparse.Namespace) -> int:
    from kaiwo_ray.manifests import dump_json_list, dump_yaml_documents

    try:
        stdin_readers = [source for source in (args.filename, args.nodes, args.config) if source == "-"]
        if len(stdin_readers) > 1:
            raise InputError("standard input (-) can feed only one of -f, --nodes and --config")
        if args.default_queue_config:
            objects = render_default_queue_config(
                nodes_source=args.nodes, config_source=args.config, kueue_version=args.kueue_version
            )
        else:
            objects = render_file(
                args.filename,
                nodes_source=args.nodes,
                config_source=args.config,
                kueue_version=args.kueue_version,
            )
    except InputError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as exc:  # a bug, not bad input: still one line, but say so
        if os.environ.get(DEBUG_ENV) == "1":
            raise
        print(
            f"{PROG}: internal error (please report; {DEBUG_ENV}=1 shows the traceback): "
            f"{type(exc).__name__}: {exc}",
            file=sys.stderr,
        )
        return EXIT_INTERNAL_ERROR
    text = dump_json_list(objects) if args.output == "json" else dump_yaml_documents(objects)
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # `kaiwo-ray render ... | head`: the reader left, which is not an error. Point stdout at
        # devnull so the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return EXIT_OK


def render_default_queue_config(
    *,
    nodes_source: str | None = None,
    config_source: str | None = None,
    kueue_version: KueueVersion = "v1beta2",
) -> list[JsonObj]:
    """The KaiwoQueueConfig `kaiwo` node discovery yields (cluster.md §5), then its Kueue objects."""
    config = _load_config(config_source) if config_source is not None else _default_config()
    return _queue_config_for_nodes(
        _load_raw_nodes(nodes_source), _nodes_label(nodes_source), config, kueue_version
    )


def _queue_config_for_nodes(
    raw_nodes: list[JsonObj], label: str, config: KaiwoConfigSpec, kueue_version: KueueVersion
) -> list[JsonObj]:
    from kaiwo_ray.api.meta import ObjectMeta
    from kaiwo_ray.api.queueconfig import KaiwoQueueConfig
    from kaiwo_ray.render.nodepools import NodeDiscoveryError, default_queue_config
    from kaiwo_ray.render.queue import render_queue_config

    try:
        spec = default_queue_config(raw_nodes, config)
    except NodeDiscoveryError as exc:
        raise InputError(f"{label}: {exc}") from None
    queue_config = KaiwoQueueConfig(metadata=ObjectMeta(name="kaiwo"), spec=spec)
    printable = _without_empty_metadata(
        queue_config.model_dump(by_alias=True, exclude_none=True, mode="json")
    )
    return [printable, *render_queue_config(queue_config, kueue_version=kueue_version)]


def render_file(
    source: str,
    *,
    nodes_source: str | None = None,
    config_source: str | None = None,
    kueue_version: KueueVersion = "v1beta2",
) -> list[JsonObj]:
    """Everything `source` renders to, in order; raises InputError with a ready-to-print line."""
    from kaiwo_ray.api.errors import ManifestError
    from kaiwo_ray.api.load import parse_object
    from kaiwo_ray.manifests import ManifestReadError, parse_located, read_source
    from kaiwo_ray.nodes import with_pool_labels
    from kaiwo_ray.render.errors import RenderError
    from kaiwo_ray.render.nodepools import NodeDiscoveryError

    config = _load_config(config_source) if config_source is not None else _default_config()
    try:
        nodes = with_pool_labels(_load_raw_nodes(nodes_source), config)
    except NodeDiscoveryError as exc:
        raise InputError(f"{_nodes_label(nodes_source)}: {exc}") from None

    label = _display(source)
    try:
        located = parse_located(read_source(source))
    except ManifestReadError as exc:
        raise InputError(f"{label}: {exc}") from None
    if not located:
        raise InputError(
            f"{label}: no objects found (expected a KaiwoJob, KaiwoService, KaiwoQueueConfig, ...)"
        )
    if all(entry.obj.get("kind") == "Node" for entry in located):
        if nodes_source is not None:
            raise InputError(f"{label}: holds Nodes; render them with -f alone, or pass them with --nodes")
        return _queue_config_for_nodes([entry.obj for entry in located], label, config, kueue_version)

    rendered: list[JsonObj] = []
    for entry in located:
        where = f"{label}: {entry.where}" if entry.where else label
        try:
            obj = parse_object(entry.obj)
            rendered.extend(render_object(obj, config=config, nodes=nodes, kueue_version=kueue_version))
        except (ManifestError, RenderError, NodeDiscoveryError) as exc:
            raise InputError(f"{where}: {exc}") from None
    return rendered


def render_object(
    obj: KaiwoObject,
    *,
    config: KaiwoConfigSpec,
    nodes: list[JsonObj],
    kueue_version: KueueVersion = "v1beta2",
) -> list[JsonObj]:
    """The objects one parsed manifest stands for (pure)."""
    from kaiwo_ray.api.config import KaiwoConfig
    from kaiwo_ray.api.queueconfig import KaiwoQueueConfig
    from kaiwo_ray.api.workloads import KaiwoJob, KaiwoService
    from kaiwo_ray.render.queue import render_queue_config

    if isinstance(obj, KaiwoJob | KaiwoService):
        from kaiwo_ray.render.workload import render_all

        return render_all(obj, config, nodes)
    if isinstance(obj, KaiwoQueueConfig | KaiwoConfig):
        _require_singleton_name(obj)
    if isinstance(obj, KaiwoQueueConfig):
        return render_queue_config(obj, kueue_version=kueue_version)
    return [_without_empty_metadata(obj.model_dump(by_alias=True, exclude_none=True, mode="json"))]


def _require_singleton_name(obj: KaiwoQueueConfig | KaiwoConfig) -> None:
    """The operator reads only the object named `kaiwo` of these cluster singletons; rendering
    another name would show objects that never get created."""
    from kaiwo_ray.api.errors import ManifestError

    name = obj.metadata.name
    if name != SINGLETON_NAME:
        got = f'got "{name}"' if name else "got none"
        raise ManifestError.single(
            "metadata.name",
            f'must be "{SINGLETON_NAME}" ({got}): the operator only reads the {obj.kind} named {SINGLETON_NAME}',
        )


def _load_config(source: str) -> KaiwoConfigSpec:
    from kaiwo_ray.api.config import KaiwoConfig
    from kaiwo_ray.api.errors import ManifestError
    from kaiwo_ray.api.load import parse_object
    from kaiwo_ray.manifests import ManifestReadError, parse_located, read_source

    label = _display(source)
    try:
        located = parse_located(read_source(source))
    except ManifestReadError as exc:
        raise InputError(f"{label}: {exc}") from None
    if len(located) != 1:
        raise InputError(f"{label}: expected exactly one KaiwoConfig, found {len(located)} objects")
    try:
        config = parse_object(located[0].obj)
    except ManifestError as exc:
        raise InputError(f"{label}: {exc}") from None
    if not isinstance(config, KaiwoConfig):
        raise InputError(f'{label}: kind: expected KaiwoConfig, got "{config.kind}"')
    return config.spec


def _default_config() -> KaiwoConfigSpec:
    from kaiwo_ray.api.config import KaiwoConfigSpec

    return KaiwoConfigSpec()


def _load_raw_nodes(source: str | None) -> list[JsonObj]:
    from kaiwo_ray.manifests import ManifestReadError
    from kaiwo_ray.nodes import default_nodes, load_nodes

    if source is None:
        return default_nodes()
    try:
        return load_nodes(source)
    except ManifestReadError as exc:
        raise InputError(f"{_nodes_label(source)}: {exc}") from None


def _nodes_label(source: str | None) -> str:
    return _display(source) if source is not None else "default nodes"


def _without_empty_metadata(obj: JsonObj) -> JsonObj:
    """Drop the empty collections the metadata model defaults to (`labels: {}`, `finalizers: []`)."""
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):
        obj["metadata"] = {key: value for key, value in metadata.items() if value not in ({}, [])}
    return obj


def _display(source: str) -> str:
    return "<stdin>" if source == "-" else source
