"""Protobuf decoders for the review kinds and TokenRequest, which kubectl posts as protobuf
(`kubectl auth can-i`, `auth can-i --list`, `auth whoami`, `create token`). Field numbers from
k8s.io/api/{authorization,authentication}/v1/generated.proto; `protobuf.KINDS` includes them."""

from __future__ import annotations

from kaiwo_sandbox.apiserver.protobuf_wire import OBJECT_META, Decoder, integer, message, string

_RESOURCE_ATTRIBUTES = message({
    1: ("namespace", string, "one"), 2: ("verb", string, "one"), 3: ("group", string, "one"),
    4: ("version", string, "one"), 5: ("resource", string, "one"), 6: ("subresource", string, "one"),
    7: ("name", string, "one"),
})
_NON_RESOURCE_ATTRIBUTES = message({1: ("path", string, "one"), 2: ("verb", string, "one")})
_SELF_ACCESS_SPEC = message({1: ("resourceAttributes", _RESOURCE_ATTRIBUTES, "one"),
                             2: ("nonResourceAttributes", _NON_RESOURCE_ATTRIBUTES, "one")})
_ACCESS_SPEC = message({1: ("resourceAttributes", _RESOURCE_ATTRIBUTES, "one"),
                        2: ("nonResourceAttributes", _NON_RESOURCE_ATTRIBUTES, "one"),
                        3: ("user", string, "one"), 4: ("groups", string, "many"), 6: ("uid", string, "one")})

REVIEW_KINDS: dict[tuple[str, str], Decoder] = {
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): message({
        1: ("metadata", OBJECT_META, "kept"), 2: ("spec", _SELF_ACCESS_SPEC, "kept")}),
    ("authorization.k8s.io/v1", "SubjectAccessReview"): message({
        1: ("metadata", OBJECT_META, "kept"), 2: ("spec", _ACCESS_SPEC, "kept")}),
    ("authorization.k8s.io/v1", "LocalSubjectAccessReview"): message({
        1: ("metadata", OBJECT_META, "kept"), 2: ("spec", _ACCESS_SPEC, "kept")}),
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview"): message({
        1: ("metadata", OBJECT_META, "kept"), 2: ("spec", message({1: ("namespace", string, "one")}), "kept")}),
    ("authentication.k8s.io/v1", "SelfSubjectReview"): message({1: ("metadata", OBJECT_META, "kept")}),
    ("authentication.k8s.io/v1", "TokenReview"): message({
        1: ("metadata", OBJECT_META, "kept"),
        2: ("spec", message({1: ("token", string, "one"), 2: ("audiences", string, "many")}), "kept")}),
    ("authentication.k8s.io/v1", "TokenRequest"): message({
        1: ("metadata", OBJECT_META, "kept"),
        2: ("spec", message({1: ("audiences", string, "many"), 4: ("expirationSeconds", integer, "one")}), "kept")}),
}
