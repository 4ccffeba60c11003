"""The scale subresource (autoscaling/v1 Scale) over any kind that declares one: Deployments and
ReplicaSets by their fixed paths, custom resources by their CRD's specReplicasPath etc."""

from __future__ import annotations

from typing import Any

from kaiwo_sandbox.contracts import JsonObj, ResourceInfo


def scale_paths(info: ResourceInfo) -> JsonObj:
    if info.scale_paths:
        return info.scale_paths
    return {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".spec.selector"}


def dig(obj: JsonObj, path: str) -> Any:
    current: Any = obj
    for part in path.strip(".").split("."):
        if not part:
            continue
        if not isinstance(current, dict):
            return None
        current = current.get(part)
    return current


def set_path(obj: JsonObj, path: str, value: Any) -> None:
    parts = [p for p in path.strip(".").split(".") if p]
    current = obj
    for part in parts[:-1]:
        current = current.setdefault(part, {})
    current[parts[-1]] = value


def selector_string(selector: Any) -> str:
    """A metav1.LabelSelector (or an already-serialised selector) as a label selector string."""
    if isinstance(selector, str):
        return selector
    if not isinstance(selector, dict):
        return ""
    if selector and not {"matchLabels", "matchExpressions"} & selector.keys():
        # a ReplicationController's selector: a plain map of labels
        return ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        op = expr.get("operator")
        key = expr.get("key")
        values = ",".join(sorted(expr.get("values") or []))
        if op == "In":
            parts.append(f"{key} in ({values})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({values})")
        elif op == "Exists":
            parts.append(str(key))
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)


def scale_of(info: ResourceInfo, obj: JsonObj) -> JsonObj:
    """The Scale object for a stored object."""
    paths = scale_paths(info)
    meta = obj["metadata"]
    status: JsonObj = {"replicas": int(dig(obj, paths["statusReplicasPath"]) or 0)}
    selector = selector_string(dig(obj, paths.get("labelSelectorPath", "")))
    if selector:
        status["selector"] = selector
    return {
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                     if k in meta},
        "spec": {"replicas": int(dig(obj, paths["specReplicasPath"]) or 0)},
        "status": status,
    }
