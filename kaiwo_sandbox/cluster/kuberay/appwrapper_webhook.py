"""AppWrapper's webhooks (project-codeflare/appwrapper v1.1-v1.2.1, internal/webhook), as pure functions,
with the labels and pod-set paths that the AppWrapper controller and Kueue's integration share.
Its CRD declares no schema defaults; what a real cluster adds to a new AppWrapper is the mutating
webhook's (CREATE only): the labels naming who created it. The validating webhook then keeps those
labels, the components' templates and declared pod sets, and `spec.managedBy` unchanged.
"""

from __future__ import annotations

import re
from typing import Any

from kaiwo_sandbox.contracts import ApiError, JsonObj

USER_LABEL = "workload.codeflare.dev/user"
USER_ID_LABEL = "workload.codeflare.dev/userid"
APPWRAPPER_LABEL = "workload.codeflare.dev/appwrapper"
_PATH_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")
_NOT_LABEL_CHARS = re.compile(r"[^-_.\w]", re.ASCII)
_IMMUTABLE = "attempt to change immutable field"


def parse_path(text: str) -> tuple[str | int, ...]:
    """An AppWrapper podSet path ("template.spec.workerGroupSpecs[0].template") as steps."""
    steps: list[str | int] = []
    for name, index in _PATH_STEP.findall(text):
        steps.append(int(index) if index else name)
    return tuple(steps)


def sanitize_label(value: str) -> str:
    """utils.SanitizeLabel: at most 63 characters, anything else than [-_.A-Za-z0-9] becomes '_',
    then '-', '_' and '.' trimmed from both ends."""
    return _NOT_LABEL_CHARS.sub("_", value[:63]).strip("-_.")


def default_on_create(aw: JsonObj, user: str, uid: str) -> None:
    """The mutating webhook: the creator's name and uid as labels (the webhook's values win)."""
    meta = aw.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), USER_LABEL: sanitize_label(user),
                      USER_ID_LABEL: sanitize_label(uid)}


def _components(aw: JsonObj) -> list[Any]:
    components = (aw.get("spec") or {}).get("components")
    return components if isinstance(components, list) else []


def update_problems(old: JsonObj, new: JsonObj) -> list[str]:
    """The validating webhook on UPDATE: each forbidden change as `path: Forbidden: ...`."""
    def forbidden(path: str) -> str:
        return f"{path}: Forbidden: {_IMMUTABLE}"

    old_components, new_components = _components(old), _components(new)
    if len(old_components) != len(new_components):
        return [forbidden("spec.components")]
    problems: list[str] = []
    for index, (before, after) in enumerate(zip(old_components, new_components, strict=True)):
        before = before if isinstance(before, dict) else {}
        after = after if isinstance(after, dict) else {}
        path = f"spec.components[{index}]"
        if before.get("template") != after.get("template"):
            problems.append(forbidden(f"{path}.template.raw"))
        old_sets, new_sets = before.get("podSets") or [], after.get("podSets") or []
        if len(old_sets) != len(new_sets):
            problems.append(forbidden(f"{path}.podsets"))
            continue
        for ps_index, (a, b) in enumerate(zip(old_sets, new_sets, strict=True)):
            if a.get("replicas", 1) != b.get("replicas", 1):
                problems.append(forbidden(f"{path}.podsets[{ps_index}].replicas"))
            if a.get("path") != b.get("path"):
                problems.append(forbidden(f"{path}.podsets[{ps_index}].path"))
    old_labels = (old.get("metadata") or {}).get("labels") or {}
    new_labels = (new.get("metadata") or {}).get("labels") or {}
    for label in (USER_LABEL, USER_ID_LABEL):
        if old_labels.get(label) != new_labels.get(label):
            problems.append(forbidden(f"metadata.labels[{label}]"))
    if (old.get("spec") or {}).get("managedBy") != (new.get("spec") or {}).get("managedBy"):
        problems.append(forbidden("spec.managedBy"))
    return problems


def denied(problems: list[str]) -> ApiError:
    """How the apiserver answers a validating webhook's field.ErrorList: 403, the aggregate message."""
    detail = problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]"
    return ApiError(403, "Forbidden", f'admission webhook "vappwrapper.kb.io" denied the request: {detail}')
