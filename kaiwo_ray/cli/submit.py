"""`kaiwo submit -f FILE|-`: create or update a KaiwoJob/KaiwoService (server-side apply)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.cli.access import add_cluster_arguments, connect
from kaiwo_ray.cli.errors import ClusterError, UsageError

if TYPE_CHECKING:
    from kaiwo_ray.cli.api import Api

EXAMPLES = """examples:
  kaiwo submit -f examples/cpu-job.yaml
  kaiwo submit -f job.yaml --user jane@example.com --queue team-a -n research
  cat job.yaml | kaiwo submit -f -
  kaiwo submit -f job.yaml --wait            # live progress until RUNNING/COMPLETE; exit 1 on FAILED

user and queue: the manifest's spec.user/spec.clusterQueue win, then --user/--queue, then the
config file (--config, else $KAIWOCONFIG, else ~/.config/kaiwo/kaiwoconfig.yaml, holding
`user:` and `clusterQueue:`). Submitting a changed manifest again updates the workload.
"""
SUCCESS_PHASES = ("RUNNING", "COMPLETE")
FAILURE_PHASES = ("FAILED", "TERMINATED", "ERROR")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-f", "--file", required=True, metavar="FILE",
                        help="the manifest (YAML or JSON); - or -- reads stdin")
    parser.add_argument("-c", "--config", metavar="FILE", help="kaiwo config file with user and clusterQueue")
    parser.add_argument("--user", help="spec.user when the manifest has none (overrides the config file)")
    parser.add_argument("--queue", help="spec.clusterQueue when the manifest has none (overrides the config file)")
    parser.add_argument("--wait", action="store_true", help="follow the workload until RUNNING or COMPLETE")
    parser.add_argument("--timeout", type=float, default=0, metavar="SECONDS",
                        help="with --wait: give up after this long (default: never)")
    add_cluster_arguments(parser)


def read_manifest(source: str) -> tuple[JsonObj, str]:
    """The one object in FILE (or stdin), and a name for it in messages."""
    import yaml

    from kaiwo_ray.api.yaml_input import safe_load_all

    if source == "-":
        text, label = sys.stdin.read(), "stdin"
    else:
        label = source
        try:
            text = Path(source).read_text()
        except FileNotFoundError:
            raise UsageError(f"{source}: no such file") from None
        except IsADirectoryError:
            raise UsageError(f"{source} is a directory: pass one manifest file") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read {source}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        docs = [d for d in safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise UsageError(f"{label} is not valid YAML{where}: {problem}") from None
    if len(docs) != 1:
        raise UsageError(f"{label} holds {len(docs)} objects: kaiwo submit takes exactly one")
    if not isinstance(docs[0], dict):
        raise UsageError(f"{label} is not a manifest (a mapping with apiVersion, kind, metadata, spec)")
    return docs[0], label


def check_kind(manifest: JsonObj, label: str) -> None:
    """Only Kaiwo workloads; anything else belongs to kubectl apply."""
    from kaiwo_ray.cli.workloads import GROUP, TYPES, VERSION

    kind, api_version = manifest.get("kind"), manifest.get("apiVersion")
    kinds = {t.kind for t in TYPES}
    if kind not in kinds:
        raise UsageError(f"{label} is a {kind or 'manifest without kind'}: kaiwo submit takes a KaiwoJob or "
                         "KaiwoService (use kubectl apply for other objects)")
    if api_version != f"{GROUP}/{VERSION}":
        raise UsageError(f"{label}: apiVersion {api_version!r} is not {GROUP}/{VERSION}")
    if not (manifest.get("metadata") or {}).get("name"):
        raise UsageError(f"{label}: metadata.name is required")


def validate(manifest: JsonObj, label: str) -> None:
    """The same typed models the operator uses, so errors name the field before the cluster sees it."""
    from kaiwo_ray.api.errors import ManifestError
    from kaiwo_ray.api.load import parse_object

    try:
        parse_object(manifest)
    except ManifestError as exc:
        raise UsageError(f"{label}: {exc}") from None


def resolve_user(args: argparse.Namespace, manifest: JsonObj) -> tuple[str | None, str | None]:
    from kaiwo_ray.cli.kaiwoconfig import CliConfig, config_path, read_config

    path, origin = config_path(args.config)
    config = read_config(path, origin) if path is not None else None
    if config is None and args.user is None and "user" not in (manifest.get("spec") or {}):
        config = offer_config(origin)
    config = config or CliConfig()
    user = args.user if args.user is not None else config.user
    queue = args.queue if args.queue is not None else config.clusterQueue
    return user, queue


def offer_config(origin: str) -> Any:
    """Upstream asks for an email and queue and writes the default config file; without a terminal
    (or on a no) it is an error naming the ways out."""
    from kaiwo_ray.cli.kaiwoconfig import DEFAULT_CONFIG, EMAIL, CliConfig, write_config

    ways_out = f"pass --user, set spec.user in the manifest, or create {DEFAULT_CONFIG} with `user:`"
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        raise UsageError(f"no user: {ways_out}")
    sys.stderr.write(f"No kaiwo config found ({origin}). Create one now? [Y/n] ")
    if input().strip().lower() not in ("", "y", "yes"):
        raise UsageError(f"no user: {ways_out}")
    while True:
        sys.stderr.write("Your email: ")
        email = input().strip()
        if EMAIL.match(email):
            break
        sys.stderr.write("that is not an email address\n")
    default_queue = os.environ.get("DEFAULT_CLUSTER_QUEUE_NAME") or "kaiwo"
    sys.stderr.write(f"Cluster queue [{default_queue}]: ")
    queue = input().strip() or default_queue
    path = DEFAULT_CONFIG.expanduser()
    write_config(path, email, queue)
    sys.stderr.write(f"wrote {path}\n")
    return CliConfig(user=email, clusterQueue=queue)


def run(args: argparse.Namespace) -> int:
    from kaiwo_ray.cli.kaiwoconfig import apply_defaults, resolve_namespace
    from kaiwo_ray.cli.workloads import workload_type

    manifest, label = read_manifest(args.file)
    check_kind(manifest, label)
    user, queue = resolve_user(args, manifest)
    apply_defaults(manifest, user, queue)
    api = connect(args)
    namespace = resolve_namespace(manifest, args.namespace, api.access.namespace)
    validate(manifest, label)
    wtype = workload_type(str(manifest["kind"]))
    name = str(manifest["metadata"]["name"])
    applied, verb = apply(api, manifest, wtype.path(namespace, name))
    print(f"{wtype.qualified}/{name} {verb}")
    if not args.wait:
        return 0
    return wait(api, applied, args.timeout)


def apply(api: Api, manifest: JsonObj, path: str) -> tuple[JsonObj, str]:
    """Server-side apply; upstream's submit re-sent the server's own copy, so a changed manifest was
    silently ignored. Says created / configured / unchanged as kubectl apply does."""
    from kaiwo_ray.cli.api import ApiStatusError

    before = api.get_or_none(path)
    try:
        applied = api.apply(path, manifest, field_manager=field_manager(api))
    except ApiStatusError as err:
        if err.code == 404 and "could not find the requested resource" in err.message:
            raise ClusterError("the cluster has no Kaiwo CRDs: install them (kubectl apply -f crds/)") from None
        if err.code == 404 and err.message.startswith("namespaces "):
            namespace = manifest["metadata"]["namespace"]
            raise ClusterError(f"namespace {namespace!r} does not exist: create it (kubectl create namespace "
                               f"{namespace}) or submit with -n to another") from None
        if err.code in (400, 422):
            raise UsageError(f"the cluster rejected the manifest: {err.message}") from None
        raise
    if before is None:
        return applied, "created"
    return applied, "unchanged" if _same_content(before, applied) else "configured"


def field_manager(api: Api) -> str:
    """`kaiwo-cli:<user>`: who submitted, as the cluster knows them (SelfSubjectReview, `kubectl auth
    whoami`), so managedFields name the user as the admin API's `kaiwo-admin-api:<user>` does; plain
    `kaiwo-cli` where the cluster answers no SelfSubjectReview (before 1.28, or not allowed)."""
    from kaiwo_ray.cli.api import FIELD_MANAGER

    try:
        review = api.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                             body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    except ClusterError:
        return FIELD_MANAGER
    name = str(((review.get("status") or {}).get("userInfo") or {}).get("username") or "")
    return f"{FIELD_MANAGER}:{name}"[:128] if name else FIELD_MANAGER


def _same_content(before: JsonObj, after: JsonObj) -> bool:
    """Whether the apply changed what a manifest says (spec, labels, annotations). Comparing
    resourceVersions alone would call a no-op re-submit "configured" whenever the operator wrote the
    status between our read and our apply."""
    def content(obj: JsonObj) -> tuple[object, object, object]:
        meta = obj.get("metadata") or {}
        return obj.get("spec"), meta.get("labels"), meta.get("annotations")

    return content(before) == content(after)


def wait(api: Api, workload: JsonObj, timeout: float) -> int:
    from kaiwo_ray.cli.progress import describe, observe
    from kaiwo_ray.cli.workloads import fetch, phase, type_of

    meta = workload["metadata"]
    wtype = type_of(workload)
    deadline = time.monotonic() + timeout if timeout > 0 else None
    live = sys.stderr.isatty()
    shown = ""
    while True:
        current = fetch(api, wtype, meta["namespace"], meta["name"])
        line = describe(observe(api, current))
        if line != shown:
            sys.stderr.write(f"\r\x1b[2K{line}" if live else f"{line}\n")
            sys.stderr.flush()
            shown = line
        state = phase(current)
        if state in SUCCESS_PHASES or state in FAILURE_PHASES:
            if live:
                sys.stderr.write("\n")
            if state in FAILURE_PHASES:
                reason = _failure_reason(current)
                sys.stderr.write(f"error: {wtype.short}/{meta['name']} is {state}{reason}: see "
                                 f"`kaiwo logs {wtype.short}/{meta['name']}`\n")
                return 1
            return 0
        if deadline is not None and time.monotonic() > deadline:
            if live:
                sys.stderr.write("\n")
            raise ClusterError(f"{wtype.short}/{meta['name']} is still {state or 'new'} after {timeout:g} s: "
                               f"see why with `kaiwo explain {wtype.short}/{meta['name']}`")
        time.sleep(0.5)  # the progress line's refresh period (a UI poll, not test synchronisation)


def _failure_reason(workload: JsonObj) -> str:
    for condition in (workload.get("status") or {}).get("conditions") or []:
        if condition.get("status") == "True" and condition.get("message") and condition.get("type") in (
                "Failed", "Error", "Terminated"):
            return f" ({condition['message']})"
    return ""
