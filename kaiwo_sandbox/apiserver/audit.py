"""The audit log: one record per HTTP API request, so tests and benchmarks can count calls
("the operator made 3 PATCHes to jobs") the way one reads a real apiserver's audit log."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field

from kaiwo_sandbox.contracts import JsonObj

MAX_RECORDS = 1_000_000  # bounded so a long `make dev` session cannot grow without limit


@dataclass(frozen=True, slots=True)
class AuditRecord:
    timestamp: float  # time.time()
    user: str
    verb: str  # get, list, watch, create, update, patch, delete, deletecollection
    group: str
    resource: str
    subresource: str
    namespace: str
    name: str
    code: int
    # Audit annotations admission gave the request (e.g. `pod-security.kubernetes.io/audit-violations`).
    annotations: dict[str, str] = field(default_factory=dict)
    # The acting user's uid and extra (an impersonated user's: Impersonate-Uid, Impersonate-Extra-*), and
    # who impersonated them: a real audit event's `impersonatedUser` is this record's user, and its
    # `user` the impersonator.
    uid: str = ""
    extra: dict[str, list[str]] = field(default_factory=dict)
    impersonator: str = ""

    def to_json(self) -> JsonObj:
        return asdict(self)


class AuditLog:
    def __init__(self) -> None:
        self._records: list[AuditRecord] = []

    def record(self, entry: AuditRecord) -> None:
        if len(self._records) >= MAX_RECORDS:
            del self._records[: MAX_RECORDS // 10]
        self._records.append(entry)

    def records(self, *, verb: str | None = None, resource: str | None = None, user: str | None = None,
                namespace: str | None = None, group: str | None = None) -> list[AuditRecord]:
        """Records matching every given filter, oldest first."""
        return [r for r in list(self._records)
                if (verb is None or r.verb == verb) and (resource is None or r.resource == resource)
                and (user is None or r.user == user) and (namespace is None or r.namespace == namespace)
                and (group is None or r.group == group)]

    def count(self, verb: str | None = None, resource: str | None = None, *, user: str | None = None) -> int:
        return len(self.records(verb=verb, resource=resource, user=user))

    def by_verb(self, *, user: str | None = None) -> dict[str, int]:
        return dict(Counter(r.verb for r in self.records(user=user)))

    def clear(self) -> None:
        self._records.clear()

    def __len__(self) -> int:
        return len(self._records)
