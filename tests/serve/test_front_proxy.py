"""Request-header authentication (serve/front_proxy.py), pure: what an aggregated server reads from the
extension-apiserver-authentication ConfigMap and from the aggregator's headers."""

from __future__ import annotations

import pytest

from serve.auth import User
from serve.front_proxy import (
    NotAllowed,
    RequestHeaderConfig,
    authenticate,
    client_common_name,
    from_configmap,
)

CONFIG = RequestHeaderConfig(ca_pem="PEM", allowed_names=("front-proxy-client",))


def test_the_configmap_gives_the_ca_the_names_and_the_headers() -> None:
    config = from_configmap({"requestheader-client-ca-file": "PEM", "requestheader-allowed-names": '["a","b"]',
                             "requestheader-username-headers": '["X-Remote-User"]',
                             "requestheader-group-headers": '["X-Remote-Group"]',
                             "requestheader-extra-headers-prefix": '["X-Remote-Extra-"]'})
    assert config == RequestHeaderConfig("PEM", ("a", "b"), ("x-remote-user",), ("x-remote-group",),
                                         ("x-remote-extra-",))
    assert from_configmap({"client-ca-file": "PEM"}) is None  # no requestheader CA: trust no certificate
    with pytest.raises(ValueError):
        from_configmap({"requestheader-client-ca-file": "PEM", "requestheader-group-headers": '"X"'})


def test_the_user_groups_and_extra_come_from_the_headers() -> None:
    headers = [("X-Remote-User", "alice"), ("X-Remote-Group", "devs"), ("X-Remote-Group", "system:authenticated"),
               ("X-Remote-Extra-Scopes", "a"), ("X-Remote-Extra-Scopes", "b"),
               ("X-Remote-Extra-example.com%2Fteam", "x"), ("Authorization", "Bearer ignored")]
    assert authenticate(CONFIG, "front-proxy-client", headers) == User(
        "alice", ("devs", "system:authenticated"), "", (("example.com/team", ("x",)), ("scopes", ("a", "b"))))
    assert authenticate(CONFIG, "front-proxy-client", [("X-Remote-Group", "devs")]) is None


def test_a_certificate_for_a_name_outside_the_allowed_list_is_refused() -> None:
    with pytest.raises(NotAllowed, match="x509: subject with cn=someone is not in the allowed list"):
        authenticate(CONFIG, "someone", [("X-Remote-User", "alice")])
    anyone = RequestHeaderConfig(ca_pem="PEM")  # an empty list allows every name the CA signed
    assert authenticate(anyone, "someone", [("X-Remote-User", "alice")]) == User("alice")


def test_only_the_tls_extension_names_the_client() -> None:
    assert client_common_name({"type": "http", "headers": []}) is None
    assert client_common_name({"extensions": {"tls": {"client_cert_common_name": "front-proxy-client"}}}) == (
        "front-proxy-client")
