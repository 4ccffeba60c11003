"""cert-manager's rules as pure functions: Go durations, its webhook's checks of a Certificate, and when a
certificate is renewed."""

from __future__ import annotations

import datetime
import re

from kaiwo_sandbox.cluster.certmanager.x509 import DEFAULT_DURATION
from kaiwo_sandbox.contracts import JsonObj

MINIMUM_DURATION = datetime.timedelta(hours=1)  # cmapi.MinimumCertificateDuration
MINIMUM_RENEW_BEFORE = datetime.timedelta(minutes=5)  # cmapi.MinimumRenewBefore

_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(h|ms|us|µs|ns|m|s)")


def parse_duration(value: object) -> datetime.timedelta | None:
    """A Go duration string ("2160h", "1h30m", "59m55s"); None when it is not one."""
    if not isinstance(value, str) or not value:
        return None
    pos, total = 0, 0.0
    while pos < len(value):
        match = _PART.match(value, pos)
        if match is None:
            return None
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    return datetime.timedelta(seconds=total)


def validate_certificate(obj: JsonObj) -> list[JsonObj]:
    """cert-manager's webhook checks (internal/apis/certmanager/validation) this sandbox relies on."""
    spec = obj.get("spec") or {}
    causes: list[JsonObj] = []

    def bad(field: str, message: str, reason: str = "FieldValueInvalid") -> None:
        causes.append({"reason": reason, "field": field, "message": message})

    if not spec.get("secretName"):
        bad("spec.secretName", "Required value: must be specified", "FieldValueRequired")
    if not (spec.get("issuerRef") or {}).get("name"):
        bad("spec.issuerRef.name", "Required value: must be specified", "FieldValueRequired")
    if not any(spec.get(k) for k in ("commonName", "dnsNames", "uris", "emailAddresses", "ipAddresses",
                                     "literalSubject")):
        bad("spec", "Invalid value: \"\": at least one of commonName (from the commonName field or from a "
                    "literalSubject), dnsNames, uriSANs, ipAddresses, emailSANs or otherNames must be set")
    duration = parse_duration(spec["duration"]) if spec.get("duration") else DEFAULT_DURATION
    renew_before = parse_duration(spec["renewBefore"]) if spec.get("renewBefore") else None
    if duration is None:
        bad("spec.duration", f"Invalid value: {spec.get('duration')!r}: not a duration")
    elif duration < MINIMUM_DURATION:
        bad("spec.duration", f"Invalid value: {spec.get('duration')!r}: certificate duration must be greater "
                             f"than {_go(MINIMUM_DURATION)}")
    if spec.get("renewBefore") and renew_before is None:
        bad("spec.renewBefore", f"Invalid value: {spec.get('renewBefore')!r}: not a duration")
    elif renew_before is not None:
        if renew_before < MINIMUM_RENEW_BEFORE:
            bad("spec.renewBefore", f"Invalid value: {spec.get('renewBefore')!r}: certificate renewBefore must be "
                                    f"greater than {_go(MINIMUM_RENEW_BEFORE)}")
        elif duration is not None and renew_before >= duration:
            bad("spec.renewBefore", f"Invalid value: {spec.get('renewBefore')!r}: certificate duration "
                                    f"{_go(duration)} must be greater than renewBefore {_go(renew_before)}")
    return causes


def _go(delta: datetime.timedelta) -> str:
    """Go's Duration.String() for whole seconds: 1h0m0s, 5m0s, 59m55s."""
    seconds = int(delta.total_seconds())
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


def renewal_time(not_before: datetime.datetime, not_after: datetime.datetime,
                 renew_before: datetime.timedelta | None) -> datetime.datetime:
    """When cert-manager renews: `renewBefore` ahead of expiry, by default a third of the lifetime
    (certificates.RenewalTime)."""
    lifetime = not_after - not_before
    before = renew_before if renew_before is not None and renew_before < lifetime else lifetime / 3
    return not_after - before
