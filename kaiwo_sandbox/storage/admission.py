"""What a write is judged by besides its schema: the in-process admission hooks (the simulated
cluster's admission controllers), the PodSecurity plugin, and, for one HTTP write at a time, its
fieldValidation, its mutating webhooks and the notes (warnings, audit annotations) the plugins give.

The store is synchronous, so a scope opened around one `ObjectStore` call covers exactly that write.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from kaiwo_sandbox.contracts import GVR, AdmissionHook, JsonObj, ResourceInfo
from kaiwo_sandbox.semantics.builtin import pod_security
from kaiwo_sandbox.semantics.builtin.pod_security import Review
from kaiwo_sandbox.storage import pipeline

FieldPaths = list[str]


@dataclass(slots=True)
class AdmissionNotes:
    """What admission plugins said about one write besides yes or no."""

    warnings: list[str] = dataclasses.field(default_factory=list)  # each becomes a `Warning: 299` header
    annotations: dict[str, str] = dataclasses.field(default_factory=dict)  # for the audit record


class Admission:
    def __init__(self) -> None:
        self.unknown_fields: FieldPaths = []  # what the write in progress dropped (for Warn's Warning headers)
        self._hooks: list[AdmissionHook] = []
        self._field_validation = "Ignore"  # the fieldValidation of the HTTP write in progress
        self._notes: AdmissionNotes | None = None  # what admission said about the HTTP write in progress
        self._webhooks: AdmissionHook | None = None  # the HTTP write's admission webhooks (`webhook_admission`)

    def add_hook(self, hook: AdmissionHook) -> Callable[[], None]:
        """An in-process mutating/validating hook for every write; returns its remover."""
        self._hooks.append(hook)

        def remove() -> None:
            if hook in self._hooks:
                self._hooks.remove(hook)

        return remove

    # ------------------------------------------------------------------ scopes of one HTTP write
    @contextmanager
    def field_validation(self, mode: str) -> Iterator[FieldPaths]:
        """Scope one write's `fieldValidation`: Strict rejects unknown fields of custom resources
        with 400 instead of pruning them; Warn prunes and collects them in the yielded list (for
        Warning headers); Ignore just prunes."""
        previous = self._field_validation
        self._field_validation = mode
        self.unknown_fields = []
        try:
            yield self.unknown_fields
        finally:
            self._field_validation = previous

    @contextmanager
    def notes(self) -> Iterator[AdmissionNotes]:
        """Scope one HTTP write: the warnings (`Warning` headers) and audit annotations admission plugins
        give it are collected in the yielded notes; outside a scope (the store's own and the simulated
        controllers' writes) they are dropped, as nobody would read them."""
        previous, self._notes = self._notes, AdmissionNotes()
        try:
            yield self._notes
        finally:
            self._notes = previous

    @contextmanager
    def webhooks(self, hook: AdmissionHook) -> Iterator[None]:
        """Scope one HTTP write's mutating admission webhooks: `hook` runs after the in-tree admission
        hooks, on the defaulted candidate. Webhooks are HTTP calls and the store is synchronous, so the
        API server calls them between passes of the same write (see apiserver/webhooks/dispatch.py):
        the hook here only captures the candidate, or replays the patches the webhooks answered."""
        previous, self._webhooks = self._webhooks, hook
        try:
            yield
        finally:
            self._webhooks = previous

    # ------------------------------------------------------------------ stages of the pipeline
    def default(self, info: ResourceInfo, obj: JsonObj, *, owned: bool = False) -> JsonObj:
        """Defaulting and pruning under the write's fieldValidation (`pipeline.default`)."""
        return pipeline.default(info, obj, owned=owned, field_validation=self._field_validation,
                                unknown_sink=self.unknown_fields)

    @property
    def mutating(self) -> bool:
        """Whether any hook or webhook would see a write."""
        return bool(self._hooks) or self._webhooks is not None

    def admit(self, operation: str, gvr: GVR, obj: JsonObj, old: JsonObj | None, user: str) -> None:
        for hook in list(self._hooks):
            hook(operation, gvr, obj, old, user)  # old is the stored snapshot: hooks only read it
        if self._webhooks is not None:  # after the in-tree plugins, as the apiserver orders them
            self._webhooks(operation, gvr, obj, old, user)

    def pod_security(self, info: ResourceInfo, obj: JsonObj, namespace: Callable[[], JsonObj | None]) -> None:
        """The PodSecurity plugin: pods (enforce, audit, warn) and workload templates (audit, warn), judged
        against the labels of `namespace()` (looked up only for the kinds it judges)."""
        if info.group == "" and info.resource == "pods":
            self._note(pod_security.review_pod(obj, namespace()))
        elif (info.group, info.resource) in pod_security.POD_TEMPLATE_PATHS:
            self._note(pod_security.review_pod_controller(info.group, info.resource, obj, namespace()))

    def _note(self, review: Review) -> None:
        if self._notes is not None:
            self._notes.warnings.extend(review.warnings)
            self._notes.annotations.update(review.annotations)
        if review.denial is not None:
            raise review.denial
