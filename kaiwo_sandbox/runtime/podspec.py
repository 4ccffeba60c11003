"""What a container of a real (local-image) pod sees, decided from the pod and the objects it names:
which pods run for real, the container's environment as the kubelet builds it (downward API, Secret
and ConfigMap references, the API server's address), and the /etc/hosts that stands in for cluster DNS.
Pure: the runtime reads the store and writes the files.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal

from kaiwo_sandbox.contracts import JsonObj
from kaiwo_sandbox.semantics.quantity import QuantityError, parse_quantity

CLUSTER_DOMAIN = "cluster.local"
_VAR_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)|\$\$")
_LABEL_PATH = re.compile(r"^metadata\.(labels|annotations)\['([^']+)'\]$")

Lookup = Callable[[str, str], JsonObj | None]  # (namespace, name) -> object or None


class ContainerConfigError(Exception):
    """What the kubelet reports as CreateContainerConfigError: a referenced Secret, ConfigMap or key
    is missing. The message is the kubelet's."""


def image_repository(image: str) -> str:
    """`registry/repo:tag@sha256:...` -> `registry/repo`: the name a `--local-image` matches."""
    without_digest = image.split("@", 1)[0]
    last = without_digest.rsplit("/", 1)[-1]
    if ":" in last:
        return without_digest[: len(without_digest) - len(last)] + last.split(":", 1)[0]
    return without_digest


def _all_containers(pod: JsonObj) -> list[JsonObj]:
    spec = pod.get("spec") or {}
    return [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]


def is_local_image(image: str, local_images: frozenset[str]) -> bool:
    """`NAME` matches NAME with any tag or digest, and under any registry or path (`kaiwo-ray` matches
    `ghcr.io/silogen/kaiwo-ray:0.1.0`, as a kustomize `images:` rename would make it); a NAME with a
    path matches that path exactly."""
    repository = image_repository(image)
    return repository in local_images or repository.rsplit("/", 1)[-1] in local_images


# The programs a container's command may start with for `--local-commands` to run it on this machine
# (the image is then irrelevant: `busybox` echoing, `python:3.12` serving). A shell script may call
# anything this machine has.
LOCAL_PROGRAMS = frozenset({
    "sh", "bash", "dash", "python3", "python", "echo", "printf", "sleep", "cat", "env", "true", "false", "ls",
    "date", "hostname", "seq", "yes", "head", "tail", "wc", "grep", "sort", "uname", "id", "pwd", "printenv",
})
BUSYBOX = "busybox"  # `busybox APPLET ARGS` runs APPLET: the image's multi-call binary, not on this machine


def local_command(container: JsonObj, available: Callable[[str], bool]) -> list[str] | None:
    """The argv that runs `container`'s command on this machine (`busybox APPLET ...` as APPLET ...), or
    None when it cannot: no command (the image's entrypoint), or a program outside LOCAL_PROGRAMS or
    missing here (`available(program)`)."""
    argv = container_argv(container)
    if argv and argv[0].rsplit("/", 1)[-1] == BUSYBOX:
        argv = argv[1:]
    if not argv:
        return None
    program = argv[0].rsplit("/", 1)[-1]
    if program not in LOCAL_PROGRAMS or not available(program):
        return None
    return [program, *argv[1:]]  # found on the container's PATH (the sandbox's environment first)


def runs_locally(pod: JsonObj, local_images: frozenset[str], local_commands: bool = False,
                 available: Callable[[str], bool] = lambda _: False) -> bool:
    """A pod runs as real processes when every container's image is a local image, or (with
    `--local-commands`) every container's command can run on this machine (`local_command`)."""
    containers = _all_containers(pod)
    if not containers:
        return False
    if local_images and all(is_local_image(str(c.get("image", "")), local_images) for c in containers):
        return True
    return local_commands and all(local_command(c, available) is not None for c in containers)


# --------------------------------------------------------------------------------------------
# Environment


def _expand(value: str, env: dict[str, str]) -> str:
    """Kubernetes' `$(VAR)` expansion: defined names are replaced, `$$` escapes, unknown stay as written."""
    def sub(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env.get(name, match.group(0))
    return _VAR_REF.sub(sub, value)


def _field_value(pod: JsonObj, path: str) -> str:
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    simple = {
        "metadata.name": meta.get("name"), "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"), "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName") or "default",
        "status.podIP": status.get("podIP"), "status.hostIP": status.get("hostIP"),
        "status.podIPs": ",".join(str(p.get("ip", "")) for p in status.get("podIPs") or []),
        "status.hostIPs": ",".join(str(p.get("ip", "")) for p in status.get("hostIPs") or []),
    }
    if path in simple:
        return str(simple[path] or "")
    match = _LABEL_PATH.match(path)
    if match:
        return str((meta.get(match.group(1)) or {}).get(match.group(2), ""))
    if path in ("metadata.labels", "metadata.annotations"):
        items = meta.get(path.split(".", 1)[1]) or {}
        return "\n".join(f'{k}="{v}"' for k, v in sorted(items.items()))
    raise ContainerConfigError(f"unsupported fieldPath: {path}")


def _resource_value(container: JsonObj, node_allocatable: JsonObj, ref: JsonObj) -> str:
    """resourceFieldRef as the kubelet resolves it: the limit (else the node's allocatable for limits,
    0 for requests), divided by the divisor and rounded up."""
    resource = str(ref.get("resource", ""))
    kind, _, name = resource.partition(".")
    resources = container.get("resources") or {}
    raw = (resources.get(kind) or {}).get(name)
    if raw is None and kind == "limits":
        raw = node_allocatable.get(name)
    try:
        amount = parse_quantity(raw if raw is not None else 0)
        divisor = parse_quantity(ref.get("divisor") or 1)
    except QuantityError as err:
        raise ContainerConfigError(f"invalid resourceFieldRef {resource}: {err}") from err
    if divisor == 0:
        divisor = Decimal(1)
    return str(math.ceil(amount / divisor))


def _object_data(obj: JsonObj, *, secret: bool) -> dict[str, str]:
    data = {str(k): str(v) for k, v in (obj.get("stringData") or {}).items()} if secret else {}
    for key, value in (obj.get("data") or {}).items():
        data[str(key)] = base64.b64decode(str(value)).decode(errors="replace") if secret else str(value)
    if not secret:
        for key, value in (obj.get("binaryData") or {}).items():
            data[str(key)] = base64.b64decode(str(value)).decode(errors="replace")
    return data


def _key_ref(namespace: str, ref: JsonObj, lookup: Lookup, kind: str) -> str | None:
    name = str(ref.get("name", ""))
    key = str(ref.get("key", ""))
    optional = bool(ref.get("optional"))
    obj = lookup(namespace, name)
    if obj is None:
        if optional:
            return None
        raise ContainerConfigError(f'{kind.lower()} "{name}" not found')
    data = _object_data(obj, secret=kind == "Secret")
    if key not in data:
        if optional:
            return None
        raise ContainerConfigError(f"couldn't find key {key} in {kind} {namespace}/{name}")
    return data[key]


@dataclass(frozen=True, slots=True)
class EnvSources:
    secret: Lookup
    config_map: Lookup
    node_allocatable: JsonObj
    api_host: str
    api_port: int


def container_env(pod: JsonObj, container: JsonObj, sources: EnvSources) -> dict[str, str]:
    """The environment the kubelet gives `container`: envFrom, then env in order (later wins, `$(VAR)`
    expanded against what came before), plus the API server's KUBERNETES_* variables and HOSTNAME.
    Raises ContainerConfigError for a missing Secret, ConfigMap or key that is not optional."""
    namespace = str((pod.get("metadata") or {}).get("namespace", ""))
    port = str(sources.api_port)
    env: dict[str, str] = {
        "KUBERNETES_SERVICE_HOST": sources.api_host, "KUBERNETES_SERVICE_PORT": port,
        "KUBERNETES_SERVICE_PORT_HTTPS": port, "KUBERNETES_PORT": f"tcp://{sources.api_host}:{port}",
        "KUBERNETES_PORT_443_TCP": f"tcp://{sources.api_host}:{port}", "KUBERNETES_PORT_443_TCP_PROTO": "tcp",
        "KUBERNETES_PORT_443_TCP_PORT": port, "KUBERNETES_PORT_443_TCP_ADDR": sources.api_host,
        "HOSTNAME": str((pod.get("metadata") or {}).get("name", "")),
    }
    for source in container.get("envFrom") or []:
        prefix = str(source.get("prefix") or "")
        for kind, ref_key, lookup in (("ConfigMap", "configMapRef", sources.config_map),
                                      ("Secret", "secretRef", sources.secret)):
            ref = source.get(ref_key)
            if not ref:
                continue
            obj = lookup(namespace, str(ref.get("name", "")))
            if obj is None:
                if ref.get("optional"):
                    continue
                raise ContainerConfigError(f'{kind.lower()} "{ref.get("name", "")}" not found')
            for key, text in _object_data(obj, secret=kind == "Secret").items():
                env[prefix + key] = text
    for item in container.get("env") or []:
        name = str(item.get("name", ""))
        if "value" in item or "valueFrom" not in item:
            env[name] = _expand(str(item.get("value") or ""), env)
            continue
        value_from = item.get("valueFrom") or {}
        value: str | None = ""
        if "fieldRef" in value_from:
            value = _field_value(pod, str((value_from["fieldRef"] or {}).get("fieldPath", "")))
        elif "resourceFieldRef" in value_from:
            value = _resource_value(container, sources.node_allocatable, value_from["resourceFieldRef"] or {})
        elif "secretKeyRef" in value_from:
            value = _key_ref(namespace, value_from["secretKeyRef"] or {}, sources.secret, "Secret")
        elif "configMapKeyRef" in value_from:
            value = _key_ref(namespace, value_from["configMapKeyRef"] or {}, sources.config_map, "ConfigMap")
        if value is not None:
            env[name] = value
    return env


def config_errors(pod: JsonObj, sources: EnvSources) -> dict[str, str]:
    """container name -> the kubelet's CreateContainerConfigError message, for each container (init or
    main) whose env names a Secret, ConfigMap or key that does not exist (and is not optional)."""
    errors: dict[str, str] = {}
    for container in _all_containers(pod):
        if not _names_config(container):
            continue  # the common case, checked on every sync of every pod: nothing to look up
        try:
            container_env(pod, container, sources)
        except ContainerConfigError as err:
            errors[str(container.get("name", ""))] = str(err)
    return errors


def _names_config(container: JsonObj) -> bool:
    """Whether `container`'s env reads a Secret or ConfigMap."""
    if container.get("envFrom"):
        return True
    return any(isinstance(item, dict) and isinstance(item.get("valueFrom"), dict) and (
        "secretKeyRef" in item["valueFrom"] or "configMapKeyRef" in item["valueFrom"])
        for item in container.get("env") or [])


def _volume_object_error(kind: str, ref: JsonObj, name: str, lookup: Lookup, namespace: str) -> str | None:
    if not name or ref.get("optional"):
        return None
    obj = lookup(namespace, name)
    if obj is None:
        return f'{kind.lower()} "{name}" not found'
    data = _object_data(obj, secret=kind == "Secret")
    for item in ref.get("items") or []:
        key = str((item or {}).get("key", ""))
        if key not in data:
            noun = "secret" if kind == "Secret" else "config"
            return f"{kind.lower()} references non-existent {noun} key: {key}"
    return None


def volume_errors(pod: JsonObj, secret: Lookup, config_map: Lookup) -> list[tuple[str, str]]:
    """(volume, the kubelet's FailedMount message) for each secret, configMap or projected volume whose
    object or listed key does not exist (and is not optional): the pod cannot leave ContainerCreating."""
    namespace = str((pod.get("metadata") or {}).get("namespace", ""))
    failures: list[tuple[str, str]] = []
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        refs: list[tuple[str, JsonObj, str]] = []
        if isinstance(volume.get("secret"), dict):
            refs.append(("Secret", volume["secret"], str(volume["secret"].get("secretName") or "")))
        if isinstance(volume.get("configMap"), dict):
            refs.append(("ConfigMap", volume["configMap"], str(volume["configMap"].get("name") or "")))
        for source in (volume.get("projected") or {}).get("sources") or []:
            for kind, key in (("Secret", "secret"), ("ConfigMap", "configMap")):
                if isinstance((source or {}).get(key), dict):
                    refs.append((kind, source[key], str(source[key].get("name") or "")))
        for kind, ref, name in refs:
            error = _volume_object_error(kind, ref, name, secret if kind == "Secret" else config_map, namespace)
            if error is not None:
                failures.append((str(volume.get("name", "")),
                                 f'MountVolume.SetUp failed for volume "{volume.get("name", "")}" : {error}'))
                break
    return failures


# Where a real pod's container may have a Secret or ConfigMap volume mounted: its own /run (a tmpfs, which
# /var/run leads to) and its private /tmp. Elsewhere the mount point would be made in this machine's own
# file system, so such volumes are not mounted.
PRIVATE_MOUNT_ROOTS = ("/run/", "/var/run/", "/tmp/")


@dataclass(frozen=True, slots=True)
class VolumeFiles:
    """A Secret or ConfigMap volume as the kubelet writes it for one container: file name -> content."""

    volume: str
    mount_path: str
    files: dict[str, str]
    mode: int


def volume_files(pod: JsonObj, container: JsonObj, secret: Lookup, config_map: Lookup) -> list[VolumeFiles]:
    """The container's mounted secret/configMap volumes under PRIVATE_MOUNT_ROOTS, with their keys as
    files (`items` picks and renames keys; `defaultMode`, 0644 by default). A missing object is
    volume_errors' concern (the pod does not start); an optional one mounts empty."""
    namespace = str((pod.get("metadata") or {}).get("namespace", ""))
    volumes = {str(v.get("name", "")): v for v in (pod.get("spec") or {}).get("volumes") or []}
    found: list[VolumeFiles] = []
    for mount in container.get("volumeMounts") or []:
        path = str(mount.get("mountPath") or "").rstrip("/")
        volume = volumes.get(str(mount.get("name", "")))
        if volume is None or not (path + "/").startswith(PRIVATE_MOUNT_ROOTS) or mount.get("subPath"):
            continue
        if isinstance(volume.get("secret"), dict):
            ref, name, is_secret, lookup = volume["secret"], volume["secret"].get("secretName"), True, secret
        elif isinstance(volume.get("configMap"), dict):
            ref, name, is_secret, lookup = volume["configMap"], volume["configMap"].get("name"), False, config_map
        else:
            continue
        obj = lookup(namespace, str(name or ""))
        data = _object_data(obj, secret=is_secret) if obj is not None else {}
        items = ref.get("items")
        if items:
            data = {str(i.get("path") or i.get("key")): data[str(i.get("key"))] for i in items if str(i.get("key")) in data}
        mode = ref.get("defaultMode")
        found.append(VolumeFiles(str(volume.get("name", "")), path, data, mode if isinstance(mode, int) else 0o644))
    return found


def container_argv(container: JsonObj) -> list[str]:
    """command + args with `$(VAR)` left for the caller to expand. A local image has no entrypoint of
    its own, so a container naming neither cannot start."""
    return [str(a) for a in (container.get("command") or [])] + [str(a) for a in (container.get("args") or [])]


def expand_argv(argv: list[str], env: dict[str, str]) -> list[str]:
    return [_expand(arg, env) for arg in argv]


# --------------------------------------------------------------------------------------------
# DNS: /etc/hosts per pod


def selects(selector: JsonObj, labels: JsonObj) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def selected_real_pods(service: JsonObj, pods: Iterable[JsonObj],
                       reachable: dict[str, str]) -> Iterator[tuple[JsonObj, str, bool]]:
    """(pod, its real IP, whether it is Ready) for each real pod `service` selects: in its namespace, not
    being deleted. `reachable` maps a pod uid to its real IP: simulated pods listen nowhere."""
    spec = service.get("spec") or {}
    selector = spec.get("selector") or {}
    namespace = (service.get("metadata") or {}).get("namespace")
    for pod in pods:
        meta = pod.get("metadata") or {}
        ip = reachable.get(str(meta.get("uid", "")))
        if ip is None or meta.get("namespace") != namespace or meta.get("deletionTimestamp"):
            continue
        if not selects(selector, meta.get("labels") or {}):
            continue
        ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in (pod.get("status") or {}).get("conditions") or [])
        yield pod, ip, ready


def service_endpoints(service: JsonObj, pods: Iterable[JsonObj], reachable: dict[str, str]) -> list[str]:
    """IPs of the real pods behind `service` (ready ones; every running one where the Service publishes
    not-ready addresses)."""
    publish_unready = bool((service.get("spec") or {}).get("publishNotReadyAddresses"))
    return sorted(ip for _, ip, ready in selected_real_pods(service, pods, reachable) if ready or publish_unready)


def service_names(name: str, namespace: str) -> list[str]:
    """The names a Service answers to from its own namespace's pods (search path `<ns>.svc.<domain>`)."""
    return [f"{name}.{namespace}.svc.{CLUSTER_DOMAIN}", f"{name}.{namespace}.svc", f"{name}.{namespace}"]


def hosts_file(pod_ip: str, hostname: str, namespace: str, services: list[tuple[str, str, list[str]]],
               api_host: str) -> str:
    """/etc/hosts for one pod: localhost, the pod's own name (as the kubelet writes it), the API
    server's Service, then each Service with real endpoints, by every name the pod could use."""
    lines = ["# Kubernetes-managed hosts file (kaiwo-ray sandbox: cluster DNS for real pods).",
             "127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback", f"{pod_ip}\t{hostname}",
             f"{api_host}\t" + " ".join(["kubernetes", *service_names("kubernetes", "default")])]
    for svc_namespace, name, ips in services:
        names = service_names(name, svc_namespace) + ([name] if svc_namespace == namespace else [])
        for ip in ips:
            lines.append(f"{ip}\t{' '.join(names)}")
    return "\n".join(lines) + "\n"
