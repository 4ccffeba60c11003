"""Decoding the Kubernetes protobuf wire format for the kinds kubectl's typed generators send.

`kubectl create namespace|configmap|secret|serviceaccount|priorityclass|deployment|job|service`
post protobuf bodies (`application/vnd.kubernetes.protobuf`), not JSON, and cannot be made to fall
back. The sandbox is JSON-only otherwise, so this module turns those bodies into the JSON objects
they encode: the `k8s\\0` envelope (runtime.Unknown), then each kind's message per the field
numbers of k8s.io/api's generated.proto (checked against bodies kubectl 1.32 sends). Fields the
generators never set are not modelled and are dropped. Other kinds raise ApiError 415.

JSON rendering follows Go's encoding of the same struct: zero values of `omitempty` fields are left
out ("one"), pointer and required fields keep their zero ("kept").
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

from kaiwo_sandbox.contracts import ApiError, JsonObj

MAGIC = b"k8s\x00"
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


def _raw(value: int | bytes) -> bytes:
    return value if isinstance(value, bytes) else b""


def _string(value: Any) -> str:
    return _raw(value).decode("utf-8")


def _bool(value: Any) -> bool:
    return bool(value)


def _int(value: Any) -> int:
    number = int(value) if isinstance(value, int) else 0
    return number - (1 << 64) if number >= 1 << 63 else number


def _b64(value: Any) -> str:
    return base64.b64encode(_raw(value)).decode()


def _time(value: Any) -> str | None:
    seconds = _int(dict(fields(_raw(value))).get(1, 0))
    if seconds == 0:
        return None  # Go's zero metav1.Time encodes as JSON null (kubectl's own JSON carries it too)
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _quantity(value: Any) -> str:
    return _string(dict(fields(_raw(value))).get(1, b""))


def _int_or_string(value: Any) -> int | str:
    parts = dict(fields(_raw(value)))
    if _int(parts.get(1, 0)) == 1:
        return _string(parts.get(3, b""))
    return _int(parts.get(2, 0))


def message(schema: Schema) -> Decoder:
    def decode(data: Any) -> JsonObj:
        obj: JsonObj = {}
        for number, value in fields(_raw(data)):
            entry = schema.get(number)
            if entry is None:
                continue  # not modelled: dropped, as pruning would
            name, decoder, mode = entry
            if mode == "map":
                parts = dict(fields(_raw(value)))
                obj.setdefault(name, {})[_string(parts.get(1, b""))] = decoder(parts.get(2, b""))
            elif mode == "many":
                obj.setdefault(name, []).append(decoder(value))
            else:
                decoded = decoder(value)
                if mode == "kept" or decoded not in ("", False, 0):  # Go omitempty
                    obj[name] = decoded
        return obj

    return decode


_OWNER_REFERENCE = message({1: ("kind", _string, "one"), 2: ("name", _string, "one"), 3: ("uid", _string, "one"),
                            4: ("controller", _bool, "one"), 5: ("apiVersion", _string, "one"),
                            7: ("blockOwnerDeletion", _bool, "one")})
_OBJECT_META = message({
    1: ("name", _string, "one"), 2: ("generateName", _string, "one"), 3: ("namespace", _string, "one"),
    5: ("uid", _string, "one"), 6: ("resourceVersion", _string, "one"), 7: ("generation", _int, "one"),
    8: ("creationTimestamp", _time, "kept"), 11: ("labels", _string, "map"), 12: ("annotations", _string, "map"),
    13: ("ownerReferences", _OWNER_REFERENCE, "many"), 14: ("finalizers", _string, "many"),
})
_LOCAL_REFERENCE = message({1: ("name", _string, "one")})
_LABEL_SELECTOR = message({
    1: ("matchLabels", _string, "map"),
    2: ("matchExpressions", message({1: ("key", _string, "one"), 2: ("operator", _string, "one"),
                                     3: ("values", _string, "many")}), "many"),
})
_CONTAINER = message({
    1: ("name", _string, "one"), 2: ("image", _string, "one"), 3: ("command", _string, "many"),
    4: ("args", _string, "many"), 5: ("workingDir", _string, "one"),
    6: ("ports", message({1: ("name", _string, "one"), 2: ("hostPort", _int, "one"),
                          3: ("containerPort", _int, "kept"), 4: ("protocol", _string, "one"),
                          5: ("hostIP", _string, "one")}), "many"),
    7: ("env", message({1: ("name", _string, "one"), 2: ("value", _string, "one")}), "many"),
    8: ("resources", message({1: ("limits", _quantity, "map"), 2: ("requests", _quantity, "map")}), "kept"),
    13: ("terminationMessagePath", _string, "one"), 14: ("imagePullPolicy", _string, "one"),
    16: ("stdin", _bool, "one"), 17: ("stdinOnce", _bool, "one"), 18: ("tty", _bool, "one"),
    20: ("terminationMessagePolicy", _string, "one"),
})
_TOLERATION = message({1: ("key", _string, "one"), 2: ("operator", _string, "one"), 3: ("value", _string, "one"),
                       4: ("effect", _string, "one"), 5: ("tolerationSeconds", _int, "kept")})
_POD_SPEC = message({
    2: ("containers", _CONTAINER, "many"), 3: ("restartPolicy", _string, "one"),
    4: ("terminationGracePeriodSeconds", _int, "kept"), 5: ("activeDeadlineSeconds", _int, "kept"),
    6: ("dnsPolicy", _string, "one"), 7: ("nodeSelector", _string, "map"), 8: ("serviceAccountName", _string, "one"),
    10: ("nodeName", _string, "one"), 19: ("schedulerName", _string, "one"), 20: ("initContainers", _CONTAINER, "many"),
    22: ("tolerations", _TOLERATION, "many"), 24: ("priorityClassName", _string, "one"),
})
_POD_TEMPLATE = message({1: ("metadata", _OBJECT_META, "kept"), 2: ("spec", _POD_SPEC, "kept")})
_DEPLOYMENT_SPEC = message({
    1: ("replicas", _int, "kept"), 2: ("selector", _LABEL_SELECTOR, "kept"), 3: ("template", _POD_TEMPLATE, "kept"),
    4: ("strategy", message({1: ("type", _string, "one"), 2: ("rollingUpdate", message({
        1: ("maxUnavailable", _int_or_string, "kept"), 2: ("maxSurge", _int_or_string, "kept")}), "kept")}), "kept"),
    5: ("minReadySeconds", _int, "one"), 6: ("revisionHistoryLimit", _int, "kept"), 7: ("paused", _bool, "one"),
    9: ("progressDeadlineSeconds", _int, "kept"),
})
_JOB_SPEC = message({
    1: ("parallelism", _int, "kept"), 2: ("completions", _int, "kept"), 3: ("activeDeadlineSeconds", _int, "kept"),
    4: ("selector", _LABEL_SELECTOR, "kept"), 5: ("manualSelector", _bool, "kept"), 6: ("template", _POD_TEMPLATE, "kept"),
    7: ("backoffLimit", _int, "kept"), 8: ("ttlSecondsAfterFinished", _int, "kept"),
    9: ("completionMode", _string, "one"), 10: ("suspend", _bool, "kept"),
})
_SERVICE_SPEC = message({
    1: ("ports", message({1: ("name", _string, "one"), 2: ("protocol", _string, "one"), 3: ("port", _int, "kept"),
                          4: ("targetPort", _int_or_string, "kept"), 5: ("nodePort", _int, "one")}), "many"),
    2: ("selector", _string, "map"), 3: ("clusterIP", _string, "one"), 4: ("type", _string, "one"),
    5: ("externalIPs", _string, "many"),
})

KINDS: dict[tuple[str, str], Decoder] = {
    ("v1", "ConfigMap"): message({1: ("metadata", _OBJECT_META, "kept"), 2: ("data", _string, "map"),
                                  3: ("binaryData", _b64, "map"), 4: ("immutable", _bool, "kept")}),
    ("v1", "Secret"): message({1: ("metadata", _OBJECT_META, "kept"), 2: ("data", _b64, "map"),
                               3: ("type", _string, "one"), 4: ("stringData", _string, "map"),
                               5: ("immutable", _bool, "kept")}),
    ("v1", "Namespace"): message({1: ("metadata", _OBJECT_META, "kept"),
                                  2: ("spec", message({1: ("finalizers", _string, "many")}), "kept")}),
    ("v1", "ServiceAccount"): message({1: ("metadata", _OBJECT_META, "kept"),
                                       3: ("imagePullSecrets", _LOCAL_REFERENCE, "many"),
                                       4: ("automountServiceAccountToken", _bool, "kept")}),
    ("v1", "Service"): message({1: ("metadata", _OBJECT_META, "kept"), 2: ("spec", _SERVICE_SPEC, "kept")}),
    ("scheduling.k8s.io/v1", "PriorityClass"): message({
        1: ("metadata", _OBJECT_META, "kept"), 2: ("value", _int, "kept"), 3: ("globalDefault", _bool, "one"),
        4: ("description", _string, "one"), 5: ("preemptionPolicy", _string, "one")}),
    ("apps/v1", "Deployment"): message({1: ("metadata", _OBJECT_META, "kept"), 2: ("spec", _DEPLOYMENT_SPEC, "kept")}),
    ("batch/v1", "Job"): message({1: ("metadata", _OBJECT_META, "kept"), 2: ("spec", _JOB_SPEC, "kept")}),
}


def _review_kinds() -> dict[tuple[str, str], Decoder]:
    from kaiwo_sandbox.apiserver.auth.protobuf_reviews import (
        REVIEW_KINDS,  # after KINDS: it reuses this module's parts
    )

    return REVIEW_KINDS


KINDS.update(_review_kinds())


def decode(body: bytes) -> JsonObj:
    """The JSON object a protobuf request body encodes; ApiError 415 for kinds we can't decode."""
    if not body.startswith(MAGIC):
        raise ApiError.bad_request("protobuf body without the k8s envelope")
    try:
        envelope = dict(fields(body[len(MAGIC):]))
        type_meta = dict(fields(_raw(envelope.get(1, b""))))
        api_version = _string(type_meta.get(1, b""))
        kind = _string(type_meta.get(2, b""))
        decoder = KINDS.get((api_version, kind))
        if decoder is None:
            supported = ", ".join(sorted(k for _, k in KINDS))
            raise ApiError.unsupported_media_type(
                f"the sandbox decodes protobuf only for {supported}, not {api_version} {kind}; send JSON "
                "(for example `kubectl create -f` or `kubectl apply`)")
        obj: JsonObj = decoder(envelope.get(2, b""))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError.bad_request(f"unable to decode protobuf body: {exc}") from None
    obj["apiVersion"] = api_version
    obj["kind"] = kind
    return obj
