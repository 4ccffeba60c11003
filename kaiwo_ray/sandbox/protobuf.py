"""Decoding the Kubernetes protobuf wire format for the kinds kubectl's typed generators send.

`kubectl create namespace|configmap|secret|serviceaccount|priorityclass` post protobuf bodies
(`application/vnd.kubernetes.protobuf`), not JSON, and cannot be made to fall back. The sandbox
is JSON-only otherwise, so this module turns those few bodies into the JSON objects they encode:
the `k8s\\0` envelope (runtime.Unknown), then each kind's message per its generated.proto field
numbers. Other kinds raise ApiError 415, answered as a server without that codec would.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kaiwo_ray.sandbox.types import ApiError, JsonObj

MAGIC = b"k8s\x00"
Decoder = Callable[[Any], Any]  # takes an int (varint) or bytes (length-delimited)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) pairs: ints for varints and fixed-width, bytes for length-delimited."""
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            out.append((number, value))
        elif wire == 2:
            length, pos = _varint(data, pos)
            out.append((number, data[pos:pos + length]))
            pos += length
        elif wire == 1:
            out.append((number, int.from_bytes(data[pos:pos + 8], "little")))
            pos += 8
        elif wire == 5:
            out.append((number, int.from_bytes(data[pos:pos + 4], "little")))
            pos += 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
    return out


def _string(value: Any) -> str:
    return bytes(value).decode("utf-8")


def _bool(value: Any) -> bool:
    return bool(value)


def _int(value: Any) -> int:
    number = int(value)
    return number - (1 << 64) if number >= 1 << 63 else number


def _b64(value: Any) -> str:
    return base64.b64encode(bytes(value)).decode()


def _raw(value: int | bytes) -> bytes:
    return value if isinstance(value, bytes) else b""


def _time(value: Any) -> str:
    parts = dict(fields(bytes(value)))
    seconds = _int(parts.get(1, 0))
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def message(schema: dict[int, tuple[str, Decoder, bool]]) -> Decoder:
    """A decoder for a message: field number -> (json name, value decoder, repeated)."""
    def decode(data: bytes) -> JsonObj:
        obj: JsonObj = {}
        for number, value in fields(bytes(data)):
            entry = schema.get(number)
            if entry is None:
                continue  # a field we don't model: dropped, as pruning would
            name, decoder, repeated = entry
            decoded = decoder(value)
            if repeated:
                obj.setdefault(name, []).append(decoded)
            elif decoded != "" and decoded is not False:  # Go's omitempty on the JSON side
                obj[name] = decoded
        return obj

    return decode


def map_of(value_decoder: Decoder) -> Decoder:
    """Map fields are repeated {1: key, 2: value} entries; collected by `_merge_maps`."""
    def decode(data: bytes) -> tuple[str, Any]:
        parts = dict(fields(bytes(data)))
        return _string(_raw(parts.get(1, b""))), value_decoder(_raw(parts.get(2, b"")))

    return decode


def _merge_maps(obj: Any, map_fields: set[str]) -> Any:
    if isinstance(obj, dict):
        for key in list(obj):
            if key in map_fields and isinstance(obj[key], list):
                obj[key] = dict(obj[key])
            else:
                obj[key] = _merge_maps(obj[key], map_fields)
    elif isinstance(obj, list):
        return [_merge_maps(v, map_fields) for v in obj]
    return obj


_OWNER_REFERENCE = message({1: ("kind", _string, False), 2: ("name", _string, False), 3: ("uid", _string, False),
                            4: ("controller", _bool, False), 5: ("apiVersion", _string, False),
                            7: ("blockOwnerDeletion", _bool, False)})
_OBJECT_META = message({
    1: ("name", _string, False), 2: ("generateName", _string, False), 3: ("namespace", _string, False),
    5: ("uid", _string, False), 6: ("resourceVersion", _string, False), 7: ("generation", _int, False),
    8: ("creationTimestamp", _time, False), 11: ("labels", map_of(_string), True),
    12: ("annotations", map_of(_string), True), 13: ("ownerReferences", _OWNER_REFERENCE, True),
    14: ("finalizers", _string, True),
})
_LOCAL_REFERENCE = message({1: ("name", _string, False)})

KINDS: dict[tuple[str, str], Decoder] = {
    ("v1", "ConfigMap"): message({1: ("metadata", _OBJECT_META, False), 2: ("data", map_of(_string), True),
                                  3: ("binaryData", map_of(_b64), True), 4: ("immutable", _bool, False)}),
    ("v1", "Secret"): message({1: ("metadata", _OBJECT_META, False), 2: ("data", map_of(_b64), True),
                               3: ("type", _string, False), 4: ("stringData", map_of(_string), True),
                               5: ("immutable", _bool, False)}),
    ("v1", "Namespace"): message({1: ("metadata", _OBJECT_META, False),
                                  2: ("spec", message({1: ("finalizers", _string, True)}), False)}),
    ("v1", "ServiceAccount"): message({1: ("metadata", _OBJECT_META, False),
                                       3: ("imagePullSecrets", _LOCAL_REFERENCE, True),
                                       4: ("automountServiceAccountToken", _bool, False)}),
    ("scheduling.k8s.io/v1", "PriorityClass"): message({
        1: ("metadata", _OBJECT_META, False), 2: ("value", _int, False), 3: ("globalDefault", _bool, False),
        4: ("description", _string, False), 5: ("preemptionPolicy", _string, False)}),
}
_MAP_FIELDS = {"labels", "annotations", "data", "binaryData", "stringData"}


def decode(body: bytes) -> JsonObj:
    """The JSON object a protobuf request body encodes; ApiError 415 for kinds we can't decode."""
    if not body.startswith(MAGIC):
        raise ApiError.bad_request("protobuf body without the k8s envelope")
    try:
        envelope = dict(fields(body[len(MAGIC):]))
        type_meta = dict(fields(_raw(envelope.get(1, b""))))
        api_version = _string(_raw(type_meta.get(1, b"")))
        kind = _string(_raw(type_meta.get(2, b"")))
        decoder = KINDS.get((api_version, kind))
        if decoder is None:
            raise ApiError.unsupported_media_type(
                f"the sandbox decodes protobuf only for {', '.join(k for _, k in sorted(KINDS))}, not "
                f"{api_version} {kind}; send JSON (for example `kubectl create -f` or `kubectl apply`)")
        obj: JsonObj = _merge_maps(decoder(_raw(envelope.get(2, b""))), _MAP_FIELDS)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError.bad_request(f"unable to decode protobuf body: {exc}") from None
    obj["apiVersion"] = api_version
    obj["kind"] = kind
    return obj
