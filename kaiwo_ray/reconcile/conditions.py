"""metav1.Condition bookkeeping with apimachinery's SetStatusCondition semantics."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kaiwo_ray.api.jsonobj import JsonObj


@dataclass(frozen=True, slots=True)
class Cond:
    """A condition as a reconciler observes it (no timestamps: those are bookkeeping)."""

    type: str
    status: str  # "True" | "False" | "Unknown"
    reason: str
    message: str = ""
    observed_generation: int | None = None

    @staticmethod
    def of(flag: bool, type_: str, reason: str, message: str = "", observed_generation: int | None = None) -> Cond:
        return Cond(type_, "True" if flag else "False", reason, message, observed_generation)


def set_conditions(stored: Iterable[JsonObj], observed: Iterable[Cond], now: str,
                   owned_types: Iterable[str] | None = None) -> list[JsonObj]:
    """Merge `observed` into `stored`: lastTransitionTime moves only when status flips; conditions
    of `owned_types` that were not observed are removed; others (written by other actors, e.g.
    ResourceUnderutilization from the monitor) are kept untouched."""
    observed_by_type = {c.type: c for c in observed}
    owned = set(owned_types) if owned_types is not None else set(observed_by_type)
    result: list[JsonObj] = []
    seen: set[str] = set()
    for cond in stored:
        ctype = cond.get("type", "")
        if ctype in observed_by_type:
            result.append(_merge(cond, observed_by_type[ctype], now))
            seen.add(ctype)
        elif ctype not in owned:
            result.append(cond)
    for ctype, obs in observed_by_type.items():
        if ctype not in seen:
            result.append(_merge(None, obs, now))
    return result


def _merge(old: JsonObj | None, new: Cond, now: str) -> JsonObj:
    changed = old is None or old.get("status") != new.status
    merged: JsonObj = {
        "type": new.type,
        "status": new.status,
        "reason": new.reason,
        "message": new.message,
        "lastTransitionTime": now if changed or not old or not old.get("lastTransitionTime")
        else old["lastTransitionTime"],
    }
    if new.observed_generation is not None:
        merged["observedGeneration"] = new.observed_generation
    return merged


def same_conditions(stored: Iterable[JsonObj], observed: Iterable[Cond], owned_types: Iterable[str]) -> bool:
    """True when the owned conditions already say exactly what was observed (timestamps ignored):
    then no status write is needed."""
    owned = set(owned_types)
    stored_owned = {c.get("type"): c for c in stored if c.get("type") in owned}
    observed_map = {c.type: c for c in observed}
    if set(stored_owned) != set(observed_map):
        return False
    for ctype, obs in observed_map.items():
        cur = stored_owned[ctype]
        if (cur.get("status"), cur.get("reason"), cur.get("message", "")) != (obs.status, obs.reason, obs.message):
            return False
        if obs.observed_generation is not None and cur.get("observedGeneration") != obs.observed_generation:
            return False
    return True


def find(conditions: Iterable[JsonObj] | None, ctype: str) -> JsonObj | None:
    for cond in conditions or ():
        if cond.get("type") == ctype:
            return cond
    return None


def is_true(conditions: Iterable[JsonObj] | None, ctype: str) -> bool:
    cond = find(conditions, ctype)
    return cond is not None and cond.get("status") == "True"
