"""Status condition bookkeeping as Kubernetes does it: `lastTransitionTime` moves only when the
status flips; reason/message updates in place keep the position of the condition in the list."""

from __future__ import annotations

from kaiwo_sandbox.contracts import JsonObj


def find_condition(conditions: list[JsonObj] | None, ctype: str) -> JsonObj | None:
    for condition in conditions or []:
        if condition.get("type") == ctype:
            return condition
    return None


def condition_true(obj: JsonObj, ctype: str) -> bool:
    found = find_condition((obj.get("status") or {}).get("conditions"), ctype)
    return found is not None and found.get("status") == "True"


def set_condition(conditions: list[JsonObj], ctype: str, status: str, reason: str, message: str, now: str,
                  *, probe_times: bool = False, update_time: bool = False) -> bool:
    """Insert or update a condition in place; returns True when anything changed.

    `probe_times` adds lastProbeTime (pods, Jobs), `update_time` adds lastUpdateTime (Deployments,
    refreshed whenever reason or message change)."""
    existing = find_condition(conditions, ctype)
    if existing is None:
        fresh: JsonObj = {"type": ctype, "status": status}
        if probe_times:
            fresh["lastProbeTime"] = now
        if update_time:
            fresh["lastUpdateTime"] = now
        fresh["lastTransitionTime"] = now
        if reason:
            fresh["reason"] = reason
        if message:
            fresh["message"] = message
        conditions.append(fresh)
        return True
    changed = False
    if existing.get("status") != status:
        existing["status"] = status
        existing["lastTransitionTime"] = now
        if probe_times:
            existing["lastProbeTime"] = now
        changed = True
    if existing.get("reason", "") != reason or existing.get("message", "") != message:
        for key, value in (("reason", reason), ("message", message)):
            if value:
                existing[key] = value
            else:
                existing.pop(key, None)
        changed = True
    if changed and update_time:
        existing["lastUpdateTime"] = now
    return changed
