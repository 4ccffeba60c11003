"""The webhooks' certificate decisions (kaiwo_ray/admission/certs.py): what is minted, what the Secret
holds, and when a stored certificate must be replaced."""

from __future__ import annotations

import datetime

from kaiwo_ray.admission import certs

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
NAMES = certs.service_names("kaiwo-ray-webhooks", "kaiwo-system")


def test_the_certificate_names_the_service_as_the_api_server_dials_it_and_round_trips_the_secret() -> None:
    bundle = certs.issue(NAMES, NOW)
    found = certs.facts(bundle)
    assert NAMES[0] == "kaiwo-ray-webhooks.kaiwo-system.svc"
    assert set(NAMES) <= set(found.names)
    assert found.signed_by_bundle
    assert found.not_after == NOW + certs.VALIDITY
    assert certs.from_secret_data(bundle.secret_data()) == bundle
    assert certs.rotation_reason(bundle, NAMES, NOW) is None


def test_a_rotation_keeps_the_previous_ca_only() -> None:
    first = certs.issue(NAMES, NOW)
    second = certs.issue(NAMES, NOW, previous=first)
    third = certs.issue(NAMES, NOW, previous=second)
    assert certs.split_pem(second.ca_pem)[1] == certs.split_pem(first.ca_pem)[0]
    assert certs.split_pem(third.ca_pem) == [certs.split_pem(third.ca_pem)[0], certs.split_pem(second.ca_pem)[0]]
    assert certs.facts(third).signed_by_bundle
    # Minted in the same second, the CAs still differ by name: OpenSSL finds an issuer by name, and a
    # server still presenting the previous certificate must verify against the new bundle.
    from cryptography import x509

    subjects = {x509.load_pem_x509_certificate(pem).subject for pem in certs.split_pem(third.ca_pem)}
    assert len(subjects) == 2
    assert certs.facts(certs.Bundle(second.cert_pem, second.key_pem, third.ca_pem)).signed_by_bundle


def test_when_a_stored_certificate_is_replaced() -> None:
    bundle = certs.issue(NAMES, NOW)
    expiry = NOW + certs.VALIDITY
    assert certs.rotation_reason(None, NAMES, NOW) == "no certificate yet"
    assert certs.rotation_reason(bundle, NAMES, expiry - certs.LOOKAHEAD - datetime.timedelta(hours=1)) is None
    assert "expires at" in str(certs.rotation_reason(bundle, NAMES, expiry - certs.LOOKAHEAD))
    other = certs.service_names("elsewhere", "kaiwo-system")
    assert certs.rotation_reason(bundle, other, NOW) == "the certificate does not name elsewhere.kaiwo-system.svc"
    foreign = certs.issue(NAMES, NOW)
    mixed = certs.Bundle(bundle.cert_pem, bundle.key_pem, foreign.ca_pem)
    assert certs.rotation_reason(mixed, NAMES, NOW) == "the certificate is not signed by a CA in ca.crt"
    broken = certs.Bundle(b"not a certificate", bundle.key_pem, bundle.ca_pem)
    assert str(certs.rotation_reason(broken, NAMES, NOW)).startswith("the stored certificate cannot be read")
    assert certs.from_secret_data({"tls.crt": "x"}) is None
    assert certs.from_secret_data({"tls.crt": "!!", "tls.key": "a", "ca.crt": "a"}) is None


def test_cert_manager_keeps_the_certificate_only_where_a_certificate_writes_our_secret() -> None:
    mine = {"metadata": {"name": "kaiwo-ray-webhooks"}, "spec": {"secretName": "kaiwo-ray-webhook-cert"}}
    other = {"metadata": {"name": "ca"}, "spec": {"secretName": "kaiwo-ray-webhooks-ca"}}
    assert certs.cert_manager_certificate(("v1",), [other, mine], "kaiwo-ray-webhook-cert") == "kaiwo-ray-webhooks"
    assert certs.cert_manager_certificate(("v1",), [other], "kaiwo-ray-webhook-cert") is None  # installed, not used
    assert certs.cert_manager_certificate((), [mine], "kaiwo-ray-webhook-cert") is None  # not served


def test_doctor_warns_of_cert_managers_certificate_only_past_its_usual_renewal() -> None:
    now = datetime.datetime(2026, 6, 1, tzinfo=datetime.UTC)
    found = certs.facts(certs.issue(["a.b.svc"], now, validity=datetime.timedelta(hours=3)))
    assert certs.warning_window(found, by_cert_manager=True) == datetime.timedelta(hours=1, minutes=1, seconds=40)
    assert certs.warning_window(found, by_cert_manager=False) == certs.LOOKAHEAD
