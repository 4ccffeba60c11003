"""Spec values that would make every rendered child invalid, refused before anything is written.

Each check mirrors an API-server rule the children meet (label syntax, quantities, mount paths) and
names the spec field, so the workload says `SpecValid=False/InvalidSpec: spec.clusterQueue: ...`
instead of a child write failing with a 422 that names a field of the child. Found by rendering
generated specs and creating every child in the sandbox (tests/render/test_render_on_sandbox.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal

from kaiwo_ray.api.quantity import parse_quantity
from kaiwo_ray.render.context import Workload
from kaiwo_ray.render.errors import RenderError
from kaiwo_ray.render.names import is_dns1123_subdomain

_LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_RULE = ("at most 63 characters: letters, digits, '-', '_' and '.', starting and ending with a letter "
               "or digit")


def is_label_value(value: str) -> bool:
    return value == "" or (len(value) <= 63 and _LABEL_NAME.fullmatch(value) is not None)


def is_label_key(key: str) -> bool:
    prefix, slash, name = key.rpartition("/")
    if slash and not is_dns1123_subdomain(prefix):
        return False
    return 0 < len(name) <= 63 and _LABEL_NAME.fullmatch(name) is not None


def validate_for_children(workload: Workload) -> None:
    spec = workload.spec
    for field, value in (("spec.clusterQueue", spec.cluster_queue), ("spec.priorityClass", spec.priority_class)):
        if value and not is_label_value(value):
            raise RenderError(field, f"{value!r} cannot be a label value (it labels the children): {_LABEL_RULE}")
    _check_labels(spec.pod_template_spec_labels or {}, "spec.podTemplateSpecLabels")
    _check_requests_within_limits(spec.resources, "spec.resources")
    storage = spec.storage
    if storage is None or not storage.storage_enabled:
        return
    for field, volume in (("spec.storage.data", storage.data), ("spec.storage.huggingFace", storage.hugging_face)):
        if volume is None or not volume.storage_size:
            continue
        if parse_quantity(volume.storage_size) <= 0:
            raise RenderError(f"{field}.storageSize", f"{volume.storage_size!r} must be greater than zero")
        # Unset (None) takes KaiwoConfig's default mount path; an explicit empty or ':' path cannot mount.
        if volume.mount_path is not None and (not volume.mount_path or ":" in volume.mount_path):
            raise RenderError(f"{field}.mountPath", f"{volume.mount_path!r} is not a usable mount path")


def _check_labels(labels: Mapping[str, str], field: str) -> None:
    for key, value in labels.items():
        if not is_label_key(key):
            raise RenderError(f"{field}", f"{key!r} is not a valid label key (an optional DNS-subdomain prefix and "
                                          f"'/', then a name of {_LABEL_RULE})")
        if not is_label_value(value):
            raise RenderError(f"{field}.{key}", f"{value!r} is not a valid label value: {_LABEL_RULE}")


def _check_requests_within_limits(resources: object, field: str) -> None:
    if not isinstance(resources, Mapping):
        return
    requests = resources.get("requests") or {}
    limits = resources.get("limits") or {}
    if not isinstance(requests, Mapping) or not isinstance(limits, Mapping):
        return
    for side, values in (("requests", requests), ("limits", limits)):
        for name, amount in values.items():
            if _extended(name) and parse_quantity(amount) != parse_quantity(amount).to_integral_value():
                raise RenderError(f"{field}.{side}.{name}", f"{amount!r} must be a whole number ({name} is an "
                                                            "extended resource, counted in units)")
    for name, request in requests.items():
        if name in limits and _extended(name) and parse_quantity(request) != parse_quantity(limits[name]):
            raise RenderError(f"{field}.requests.{name}", f"{request!r} must equal the limit {limits[name]!r} "
                                                          f"({name} is an extended resource, which cannot be overcommitted)")
        if name not in limits:
            continue
        asked: Decimal = parse_quantity(request)
        cap: Decimal = parse_quantity(limits[name])
        if asked > cap:
            raise RenderError(f"{field}.requests.{name}", f"{request!r} is more than the limit {limits[name]!r} "
                                                          "(a request must not exceed its limit)")


def _extended(name: str) -> bool:
    """An extended resource (`amd.com/gpu`): a qualified name outside `kubernetes.io`, not hugepages."""
    prefix, slash, _ = name.partition("/")
    return bool(slash) and not prefix.endswith("kubernetes.io") and not name.startswith("hugepages-")
