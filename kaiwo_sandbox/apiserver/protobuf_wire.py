"""The protobuf wire format as the sandbox reads it: fields of a message, the scalar decoders, and
`message`, which builds a decoder from a field-number schema. Shared by the kind tables in
`protobuf` (core kinds) and `auth.protobuf_reviews` (the review kinds).

JSON rendering follows Go's encoding of the same struct: zero values of `omitempty` fields are left
out ("one"), pointer and required fields keep their zero ("kept").
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

from kaiwo_sandbox.contracts import JsonObj

Decoder = Callable[[Any], Any]  # takes an int (varint) or bytes (length-delimited)
Mode = Literal["one", "kept", "many", "map"]
Schema = dict[int, tuple[str, Decoder, Mode]]


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
            if pos + length > len(data):
                raise ValueError("truncated field")
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


def raw(value: int | bytes) -> bytes:
    return value if isinstance(value, bytes) else b""


def string(value: Any) -> str:
    return raw(value).decode("utf-8")


def boolean(value: Any) -> bool:
    return bool(value)


def integer(value: Any) -> int:
    number = int(value) if isinstance(value, int) else 0
    return number - (1 << 64) if number >= 1 << 63 else number


def b64(value: Any) -> str:
    return base64.b64encode(raw(value)).decode()


def timestamp(value: Any) -> str | None:
    seconds = integer(dict(fields(raw(value))).get(1, 0))
    if seconds == 0:
        return None  # Go's zero metav1.Time encodes as JSON null (kubectl's own JSON carries it too)
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def quantity(value: Any) -> str:
    return string(dict(fields(raw(value))).get(1, b""))


def int_or_string(value: Any) -> int | str:
    parts = dict(fields(raw(value)))
    if integer(parts.get(1, 0)) == 1:
        return string(parts.get(3, b""))
    return integer(parts.get(2, 0))


def message(schema: Schema) -> Decoder:
    def decode(data: Any) -> JsonObj:
        obj: JsonObj = {}
        for number, value in fields(raw(data)):
            entry = schema.get(number)
            if entry is None:
                continue  # not modelled: dropped, as pruning would
            name, decoder, mode = entry
            if mode == "map":
                parts = dict(fields(raw(value)))
                obj.setdefault(name, {})[string(parts.get(1, b""))] = decoder(parts.get(2, b""))
            elif mode == "many":
                obj.setdefault(name, []).append(decoder(value))
            else:
                decoded = decoder(value)
                if mode == "kept" or decoded not in ("", False, 0):  # Go omitempty
                    obj[name] = decoded
        return obj

    return decode


OWNER_REFERENCE = message({1: ("kind", string, "one"), 2: ("name", string, "one"), 3: ("uid", string, "one"),
                            4: ("controller", boolean, "one"), 5: ("apiVersion", string, "one"),
                            7: ("blockOwnerDeletion", boolean, "one")})
OBJECT_META = message({
    1: ("name", string, "one"), 2: ("generateName", string, "one"), 3: ("namespace", string, "one"),
    5: ("uid", string, "one"), 6: ("resourceVersion", string, "one"), 7: ("generation", integer, "one"),
    8: ("creationTimestamp", timestamp, "kept"), 11: ("labels", string, "map"), 12: ("annotations", string, "map"),
    13: ("ownerReferences", OWNER_REFERENCE, "many"), 14: ("finalizers", string, "many"),
})
