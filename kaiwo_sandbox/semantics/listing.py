"""Selecting and paging lists: parsed label/field selectors (cached per string) and continue tokens."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from functools import lru_cache

import orjson

from kaiwo_sandbox.contracts import ApiError, JsonObj
from kaiwo_sandbox.semantics.selectors import (
    FieldSelector,
    LabelSelector,
    parse_field_selector,
    parse_label_selector,
)


@lru_cache(maxsize=512)
def _label_selector(text: str) -> LabelSelector:
    return parse_label_selector(text)


@lru_cache(maxsize=512)
def _field_selector(text: str, kind: str) -> FieldSelector:
    return parse_field_selector(text, kind=kind)


def _labels(obj: JsonObj) -> dict[str, str]:
    labels: dict[str, str] = (obj.get("metadata") or {}).get("labels") or {}
    return labels


@dataclass(slots=True)
class Selection:
    """Label and field selectors of a list or watch, parsed once."""

    label: LabelSelector | None = None
    field: FieldSelector | None = None

    @classmethod
    def parse(cls, label_selector: str | None, field_selector: str | None, kind: str) -> Selection:
        return cls(_label_selector(label_selector) if label_selector else None,
                   _field_selector(field_selector, kind) if field_selector else None)

    @property
    def everything(self) -> bool:
        return self.label is None and self.field is None

    def matches(self, obj: JsonObj) -> bool:
        if self.label is not None and not self.label.matches(_labels(obj)):
            return False
        return self.field is None or self.field.matches(obj)


@dataclass(slots=True)
class ListResult:
    """A page of a list: stored snapshots (read-only, in the requested version's form)."""

    items: list[JsonObj]
    resource_version: str
    continue_token: str | None = None
    remaining: int | None = None


def encode_continue(rv: int, start: str) -> str:
    raw = orjson.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start})
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_continue(token: str) -> tuple[int, str]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = orjson.loads(raw)
        return int(data["rv"]), str(data["start"])
    except Exception as exc:
        raise ApiError.bad_request(f"continue key is not valid: {exc}") from None
