"""Protobuf bodies from kubectl's typed generators, decoded into the JSON objects they encode."""

from __future__ import annotations

import pytest

from kaiwo_sandbox.apiserver.protobuf import MAGIC, decode
from kaiwo_sandbox.contracts import ApiError


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, value: bytes | int | str) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    raw = value.encode() if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(raw)) + raw


def _envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    return MAGIC + _field(1, _field(1, api_version) + _field(2, kind)) + _field(2, raw)


def test_configmap_with_labels_and_data() -> None:
    meta = _field(1, "settings") + _field(2, "") + _field(11, _field(1, "app") + _field(2, "demo"))
    raw = _field(1, meta) + _field(2, _field(1, "a") + _field(2, "1")) + _field(2, _field(1, "b") + _field(2, "2"))
    assert decode(_envelope("v1", "ConfigMap", raw)) == {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings", "labels": {"app": "demo"}}, "data": {"a": "1", "b": "2"}}


def test_secret_bytes_become_base64_and_priority_class_ints() -> None:
    secret = decode(_envelope("v1", "Secret", _field(1, _field(1, "s")) + _field(2, _field(1, "pw") + _field(2, b"hi"))
                              + _field(3, "Opaque")))
    assert secret["data"] == {"pw": "aGk="} and secret["type"] == "Opaque"
    priority = decode(_envelope("scheduling.k8s.io/v1", "PriorityClass", _field(1, _field(1, "p")) + _field(2, 1000)))
    assert priority["value"] == 1000


def test_unsupported_kinds_are_415() -> None:
    with pytest.raises(ApiError) as exc:
        decode(_envelope("batch/v1", "CronJob", b""))
    assert exc.value.code == 415
    with pytest.raises(ApiError) as exc:
        decode(b"not protobuf")
    assert exc.value.code == 400
