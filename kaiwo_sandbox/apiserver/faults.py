"""Fault injection for HTTP clients (never for in-process controller writes): make chosen requests
fail or slow down, cut watch streams, and expire resourceVersions — the failures an operator must
survive on a real cluster. Off by default; deterministic (seeded) when probabilistic."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kaiwo_sandbox.contracts import ApiError, JsonObj

_REASONS = {409: "Conflict", 429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable",
            504: "Timeout", 403: "Forbidden", 404: "NotFound"}


@dataclass(slots=True)
class FaultRule:
    """Requests matching every set filter fail with `code` (or only get `latency` when code is 0).

    `resources` entries are plurals, optionally qualified by group (`jobs.batch`, `pods`);
    `times` limits how many matching requests are hit (None: all), `probability` hits each match
    with that chance, drawn from the injector's seeded generator."""

    code: int = 500
    verbs: frozenset[str] | None = None
    resources: frozenset[str] | None = None
    namespaces: frozenset[str] | None = None
    names: frozenset[str] | None = None
    times: int | None = None
    probability: float | None = None
    latency: float = 0.0
    retry_after: int = 1
    message: str | None = None
    id: int = 0
    hits: int = field(default=0)

    def matches(self, verb: str, group: str, resource: str, namespace: str, name: str) -> bool:
        if self.verbs is not None and verb not in self.verbs:
            return False
        if self.resources is not None:
            qualified = f"{resource}.{group}" if group else resource
            if resource not in self.resources and qualified not in self.resources:
                return False
        if self.namespaces is not None and namespace not in self.namespaces:
            return False
        return self.names is None or name in self.names

    def error(self, verb: str, resource: str, name: str) -> ApiError:
        reason = _REASONS.get(self.code, "InternalError")
        message = self.message or f"injected fault: {verb} {resource} {name}".rstrip()
        details: JsonObj = {"name": name, "kind": resource}
        if self.code == 429:
            details["retryAfterSeconds"] = self.retry_after
        return ApiError(self.code, reason, message, details)

    def to_json(self) -> JsonObj:
        return {"id": self.id, "code": self.code, "verbs": sorted(self.verbs or ()) or None,
                "resources": sorted(self.resources or ()) or None,
                "namespaces": sorted(self.namespaces or ()) or None, "names": sorted(self.names or ()) or None,
                "times": self.times, "probability": self.probability, "latency": self.latency,
                "retryAfter": self.retry_after, "message": self.message, "hits": self.hits}


def _set(values: Iterable[str] | str | None) -> frozenset[str] | None:
    if values is None:
        return None
    if isinstance(values, str):
        return frozenset({values})
    return frozenset(values)


class FaultInjector:
    def __init__(self, seed: int = 0) -> None:
        self._rules: list[FaultRule] = []
        self._ids = itertools.count(1)
        self._random = random.Random(seed)
        self._force_gone = 0
        self._watch_cutters: list[Callable[[int], None]] = []

    # ------------------------------------------------------------------ configuration
    def fail(self, *, code: int = 500, verbs: Iterable[str] | str | None = None,
             resources: Iterable[str] | str | None = None, namespaces: Iterable[str] | str | None = None,
             names: Iterable[str] | str | None = None, times: int | None = None,
             probability: float | None = None, latency: float = 0.0, retry_after: int = 1,
             message: str | None = None) -> int:
        """Add a rule; returns its id (for `remove`)."""
        if code not in (0, *_REASONS):
            raise ValueError(f"unsupported fault code {code}; use one of {sorted(_REASONS)} or 0 (latency only)")
        if probability is not None and not 0.0 <= probability <= 1.0:
            raise ValueError(f"probability must be within [0, 1], got {probability}")
        rule = FaultRule(code=code, verbs=_set(verbs), resources=_set(resources), namespaces=_set(namespaces),
                         names=_set(names), times=times, probability=probability, latency=latency,
                         retry_after=retry_after, message=message, id=next(self._ids))
        self._rules.append(rule)
        return rule.id

    def delay(self, seconds: float, **filters: object) -> int:
        """Add latency (no failure) to matching requests."""
        return self.fail(code=0, latency=seconds, **filters)  # type: ignore[arg-type]

    def add_json(self, spec: JsonObj) -> int:
        """A rule from the control endpoint's JSON (camelCase keys as documented in docs/sandbox.md)."""
        allowed = {"code", "verbs", "resources", "namespaces", "names", "times", "probability", "latency",
                   "retryAfter", "message"}
        unknown = set(spec) - allowed
        if unknown:
            raise ValueError(f"unknown fault fields {sorted(unknown)}; allowed: {sorted(allowed)}")
        return self.fail(code=int(spec.get("code", 500)), verbs=spec.get("verbs"), resources=spec.get("resources"),
                         namespaces=spec.get("namespaces"), names=spec.get("names"), times=spec.get("times"),
                         probability=spec.get("probability"), latency=float(spec.get("latency", 0.0)),
                         retry_after=int(spec.get("retryAfter", 1)), message=spec.get("message"))

    def remove(self, rule_id: int) -> None:
        self._rules = [r for r in self._rules if r.id != rule_id]

    def clear(self) -> None:
        self._rules.clear()
        self._force_gone = 0

    def rules(self) -> list[FaultRule]:
        return list(self._rules)

    def seed(self, seed: int) -> None:
        self._random = random.Random(seed)

    def expire_next(self, count: int = 1) -> None:
        """The next `count` watches with a resourceVersion (or list continuations) get 410 Gone."""
        self._force_gone += count

    def cut_watches(self, after_events: int = 0) -> int:
        """Close every open watch stream now (or after it sends `after_events` more events).
        Returns how many streams were affected."""
        cutters = list(self._watch_cutters)
        for cut in cutters:
            cut(after_events)
        return len(cutters)

    # ------------------------------------------------------------------ used by the server
    def register_watch(self, cutter: Callable[[int], None]) -> Callable[[], None]:
        self._watch_cutters.append(cutter)

        def unregister() -> None:
            if cutter in self._watch_cutters:
                self._watch_cutters.remove(cutter)

        return unregister

    def take_forced_gone(self) -> bool:
        if self._force_gone > 0:
            self._force_gone -= 1
            return True
        return False

    def check(self, verb: str, group: str, resource: str, namespace: str, name: str) -> tuple[float, ApiError | None]:
        """(latency to add, error to answer) for one request."""
        if not self._rules:
            return 0.0, None
        latency = 0.0
        for rule in list(self._rules):
            if not rule.matches(verb, group, resource, namespace, name):
                continue
            if rule.probability is not None and self._random.random() >= rule.probability:
                continue
            rule.hits += 1
            if rule.times is not None:
                rule.times -= 1
                if rule.times <= 0:
                    self.remove(rule.id)
            latency += rule.latency
            if rule.code:
                return latency, rule.error(verb, resource, name)
        return latency, None
