"""Decoding the Kubernetes protobuf wire format for the kinds kubectl's typed generators send.

`kubectl create namespace|configmap|secret|serviceaccount|priorityclass|deployment|job|service`
post protobuf bodies (`application/vnd.kubernetes.protobuf`), not JSON, and cannot be made to fall
back. The sandbox is JSON-only otherwise, so this module turns those bodies into the JSON objects
they encode: the `k8s\\0` envelope (runtime.Unknown), then each kind's message per the field
numbers of k8s.io/api's generated.proto (checked against bodies kubectl 1.32 sends). Fields the
generators never set are not modelled and are dropped. Other kinds raise ApiError 415. The wire
format itself is in `protobuf_wire`; the review kinds' messages in `auth.protobuf_reviews`.
"""

from __future__ import annotations

from kaiwo_sandbox.apiserver.auth.protobuf_reviews import REVIEW_KINDS
from kaiwo_sandbox.apiserver.protobuf_wire import (
    OBJECT_META,
    Decoder,
    b64,
    boolean,
    fields,
    int_or_string,
    integer,
    message,
    quantity,
    raw,
    string,
)
from kaiwo_sandbox.contracts import ApiError, JsonObj

MAGIC = b"k8s\x00"
_LOCAL_REFERENCE = message({1: ("name", string, "one")})
_LABEL_SELECTOR = message({
    1: ("matchLabels", string, "map"),
    2: ("matchExpressions", message({1: ("key", string, "one"), 2: ("operator", string, "one"),
                                     3: ("values", string, "many")}), "many"),
})
_CONTAINER = message({
    1: ("name", string, "one"), 2: ("image", string, "one"), 3: ("command", string, "many"),
    4: ("args", string, "many"), 5: ("workingDir", string, "one"),
    6: ("ports", message({1: ("name", string, "one"), 2: ("hostPort", integer, "one"),
                          3: ("containerPort", integer, "kept"), 4: ("protocol", string, "one"),
                          5: ("hostIP", string, "one")}), "many"),
    7: ("env", message({1: ("name", string, "one"), 2: ("value", string, "one")}), "many"),
    8: ("resources", message({1: ("limits", quantity, "map"), 2: ("requests", quantity, "map")}), "kept"),
    13: ("terminationMessagePath", string, "one"), 14: ("imagePullPolicy", string, "one"),
    16: ("stdin", boolean, "one"), 17: ("stdinOnce", boolean, "one"), 18: ("tty", boolean, "one"),
    20: ("terminationMessagePolicy", string, "one"),
})
_TOLERATION = message({1: ("key", string, "one"), 2: ("operator", string, "one"), 3: ("value", string, "one"),
                       4: ("effect", string, "one"), 5: ("tolerationSeconds", integer, "kept")})
_POD_SPEC = message({
    2: ("containers", _CONTAINER, "many"), 3: ("restartPolicy", string, "one"),
    4: ("terminationGracePeriodSeconds", integer, "kept"), 5: ("activeDeadlineSeconds", integer, "kept"),
    6: ("dnsPolicy", string, "one"), 7: ("nodeSelector", string, "map"), 8: ("serviceAccountName", string, "one"),
    10: ("nodeName", string, "one"), 19: ("schedulerName", string, "one"), 20: ("initContainers", _CONTAINER, "many"),
    22: ("tolerations", _TOLERATION, "many"), 24: ("priorityClassName", string, "one"),
})
_POD_TEMPLATE = message({1: ("metadata", OBJECT_META, "kept"), 2: ("spec", _POD_SPEC, "kept")})
_DEPLOYMENT_SPEC = message({
    1: ("replicas", integer, "kept"), 2: ("selector", _LABEL_SELECTOR, "kept"), 3: ("template", _POD_TEMPLATE, "kept"),
    4: ("strategy", message({1: ("type", string, "one"), 2: ("rollingUpdate", message({
        1: ("maxUnavailable", int_or_string, "kept"), 2: ("maxSurge", int_or_string, "kept")}), "kept")}), "kept"),
    5: ("minReadySeconds", integer, "one"), 6: ("revisionHistoryLimit", integer, "kept"), 7: ("paused", boolean, "one"),
    9: ("progressDeadlineSeconds", integer, "kept"),
})
_JOB_SPEC = message({
    1: ("parallelism", integer, "kept"), 2: ("completions", integer, "kept"), 3: ("activeDeadlineSeconds", integer, "kept"),
    4: ("selector", _LABEL_SELECTOR, "kept"), 5: ("manualSelector", boolean, "kept"), 6: ("template", _POD_TEMPLATE, "kept"),
    7: ("backoffLimit", integer, "kept"), 8: ("ttlSecondsAfterFinished", integer, "kept"),
    9: ("completionMode", string, "one"), 10: ("suspend", boolean, "kept"),
})
_SERVICE_SPEC = message({
    1: ("ports", message({1: ("name", string, "one"), 2: ("protocol", string, "one"), 3: ("port", integer, "kept"),
                          4: ("targetPort", int_or_string, "kept"), 5: ("nodePort", integer, "one")}), "many"),
    2: ("selector", string, "map"), 3: ("clusterIP", string, "one"), 4: ("type", string, "one"),
    5: ("externalIPs", string, "many"),
})

_CORE_KINDS: dict[tuple[str, str], Decoder] = {
    ("v1", "ConfigMap"): message({1: ("metadata", OBJECT_META, "kept"), 2: ("data", string, "map"),
                                  3: ("binaryData", b64, "map"), 4: ("immutable", boolean, "kept")}),
    ("v1", "Secret"): message({1: ("metadata", OBJECT_META, "kept"), 2: ("data", b64, "map"),
                               3: ("type", string, "one"), 4: ("stringData", string, "map"),
                               5: ("immutable", boolean, "kept")}),
    ("v1", "Namespace"): message({1: ("metadata", OBJECT_META, "kept"),
                                  2: ("spec", message({1: ("finalizers", string, "many")}), "kept")}),
    ("v1", "ServiceAccount"): message({1: ("metadata", OBJECT_META, "kept"),
                                       3: ("imagePullSecrets", _LOCAL_REFERENCE, "many"),
                                       4: ("automountServiceAccountToken", boolean, "kept")}),
    ("v1", "Service"): message({1: ("metadata", OBJECT_META, "kept"), 2: ("spec", _SERVICE_SPEC, "kept")}),
    ("scheduling.k8s.io/v1", "PriorityClass"): message({
        1: ("metadata", OBJECT_META, "kept"), 2: ("value", integer, "kept"), 3: ("globalDefault", boolean, "one"),
        4: ("description", string, "one"), 5: ("preemptionPolicy", string, "one")}),
    ("apps/v1", "Deployment"): message({1: ("metadata", OBJECT_META, "kept"), 2: ("spec", _DEPLOYMENT_SPEC, "kept")}),
    ("batch/v1", "Job"): message({1: ("metadata", OBJECT_META, "kept"), 2: ("spec", _JOB_SPEC, "kept")}),
}

KINDS: dict[tuple[str, str], Decoder] = {**_CORE_KINDS, **REVIEW_KINDS}


def decode(body: bytes) -> JsonObj:
    """The JSON object a protobuf request body encodes; ApiError 415 for kinds we can't decode."""
    if not body.startswith(MAGIC):
        raise ApiError.bad_request("protobuf body without the k8s envelope")
    try:
        envelope = dict(fields(body[len(MAGIC):]))
        type_meta = dict(fields(raw(envelope.get(1, b""))))
        api_version = string(type_meta.get(1, b""))
        kind = string(type_meta.get(2, b""))
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
