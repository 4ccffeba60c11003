"""Protobuf decoders for the review kinds and TokenRequest, which kubectl posts as protobuf
(`kubectl auth can-i`, `auth can-i --list`, `auth whoami`, `create token`). Field numbers from
k8s.io/api/{authorization,authentication}/v1/generated.proto; plugged into protobuf.KINDS."""

from __future__ import annotations

from kaiwo_sandbox.apiserver.protobuf import _OBJECT_META, Decoder, _int, _string, message

_RESOURCE_ATTRIBUTES = message({
    1: ("namespace", _string, "one"), 2: ("verb", _string, "one"), 3: ("group", _string, "one"),
    4: ("version", _string, "one"), 5: ("resource", _string, "one"), 6: ("subresource", _string, "one"),
    7: ("name", _string, "one"),
})
_NON_RESOURCE_ATTRIBUTES = message({1: ("path", _string, "one"), 2: ("verb", _string, "one")})
_SELF_ACCESS_SPEC = message({1: ("resourceAttributes", _RESOURCE_ATTRIBUTES, "one"),
                             2: ("nonResourceAttributes", _NON_RESOURCE_ATTRIBUTES, "one")})
_ACCESS_SPEC = message({1: ("resourceAttributes", _RESOURCE_ATTRIBUTES, "one"),
                        2: ("nonResourceAttributes", _NON_RESOURCE_ATTRIBUTES, "one"),
                        3: ("user", _string, "one"), 4: ("groups", _string, "many"), 6: ("uid", _string, "one")})

REVIEW_KINDS: dict[tuple[str, str], Decoder] = {
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): message({
        1: ("metadata", _OBJECT_META, "kept"), 2: ("spec", _SELF_ACCESS_SPEC, "kept")}),
    ("authorization.k8s.io/v1", "SubjectAccessReview"): message({
        1: ("metadata", _OBJECT_META, "kept"), 2: ("spec", _ACCESS_SPEC, "kept")}),
    ("authorization.k8s.io/v1", "LocalSubjectAccessReview"): message({
        1: ("metadata", _OBJECT_META, "kept"), 2: ("spec", _ACCESS_SPEC, "kept")}),
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview"): message({
        1: ("metadata", _OBJECT_META, "kept"), 2: ("spec", message({1: ("namespace", _string, "one")}), "kept")}),
    ("authentication.k8s.io/v1", "SelfSubjectReview"): message({1: ("metadata", _OBJECT_META, "kept")}),
    ("authentication.k8s.io/v1", "TokenReview"): message({
        1: ("metadata", _OBJECT_META, "kept"),
        2: ("spec", message({1: ("token", _string, "one"), 2: ("audiences", _string, "many")}), "kept")}),
    ("authentication.k8s.io/v1", "TokenRequest"): message({
        1: ("metadata", _OBJECT_META, "kept"),
        2: ("spec", message({1: ("audiences", _string, "many"), 4: ("expirationSeconds", _int, "one")}), "kept")}),
}
