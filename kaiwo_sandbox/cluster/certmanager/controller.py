"""A minimal cert-manager (cert-manager.io/v1): its webhook's checks of a Certificate, the issuers
controller, the certificates controller and the cainjector, in one simulated controller. Opt-in: the
sandbox installs its CRDs and runs it only when asked (`--controllers ...,cert-manager`).

- Issuer / ClusterIssuer: `selfSigned: {}` is Ready at once (reason IsReady); `ca: {secretName}` is Ready
  (KeyPairVerified, "Signing CA verified") once that Secret holds a matching tls.crt/tls.key pair
  (ErrGetKeyPair / ErrInvalidKeyPair otherwise). A ClusterIssuer's Secret lives in `cert-manager`, the
  controller's cluster resource namespace.
- Certificate: issued into `spec.secretName` (type kubernetes.io/tls: tls.crt, tls.key, ca.crt, with the
  `cert-manager.io/*` annotations cert-manager writes) when the Secret is missing or incomplete, does not
  match the spec (dnsNames, commonName, isCA, issuer), has expired, is due for renewal (`renewBefore`, by
  default a third of `duration`), or a user asked (`Issuing=True`, reason ManuallyTriggered, as
  `cmctl renew` does). Status: `Ready` (Ready, "Certificate is up to date and has not expired"),
  `Issuing` while a reissue is pending, `notBefore`, `notAfter`, `renewalTime`, `revision`. A new key at
  every issuance (rotationPolicy Always, cert-manager's default since 1.18). No CertificateRequest
  objects: issuance is direct.
- cainjector: a Mutating/ValidatingWebhookConfiguration or APIService annotated
  `cert-manager.io/inject-ca-from: <namespace>/<certificate>` gets every caBundle set to the ca.crt of
  that Certificate's Secret, and again whenever the Secret changes (`inject-ca-from-secret:
  <namespace>/<secret>` likewise, for a Secret annotated `cert-manager.io/allow-direct-injection: "true"`).
"""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import Iterable

from kaiwo_sandbox.cluster.base import Controller, Key
from kaiwo_sandbox.cluster.certmanager.rules import parse_duration, renewal_time, validate_certificate
from kaiwo_sandbox.cluster.certmanager.x509 import (
    DEFAULT_DURATION,
    KeyPair,
    b64,
    facts,
    issue,
    load_key_pair,
    unb64,
)
from kaiwo_sandbox.cluster.conditions import find_condition, set_condition
from kaiwo_sandbox.contracts import GVR, SECRETS, ApiError, JsonObj, WatchEvent, rfc3339

GROUP = "cert-manager.io"
CERTIFICATES = GVR(GROUP, "v1", "certificates")
ISSUERS = GVR(GROUP, "v1", "issuers")
CLUSTERISSUERS = GVR(GROUP, "v1", "clusterissuers")
MUTATING = GVR("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations")
VALIDATING = GVR("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations")
APISERVICES = GVR("apiregistration.k8s.io", "v1", "apiservices")
INJECTABLES = (MUTATING, VALIDATING, APISERVICES)

CLUSTER_RESOURCE_NAMESPACE = "cert-manager"
USER = "system:serviceaccount:cert-manager:cert-manager"
INJECTOR = "system:serviceaccount:cert-manager:cert-manager-cainjector"
INJECT_FROM = "cert-manager.io/inject-ca-from"
INJECT_FROM_SECRET = "cert-manager.io/inject-ca-from-secret"
ALLOW_DIRECT = "cert-manager.io/allow-direct-injection"
CERT_NAME = "cert-manager.io/certificate-name"
def _meta(obj: JsonObj) -> JsonObj:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


class CertManagerController(Controller):
    name = "cert-manager"
    watches = (ISSUERS, CLUSTERISSUERS, CERTIFICATES, SECRETS, *INJECTABLES)

    # ------------------------------------------------------------------ webhook
    def admit(self, operation: str, gvr: GVR, obj: JsonObj, old: JsonObj | None, user: str) -> None:
        if gvr != CERTIFICATES or operation not in ("CREATE", "UPDATE"):
            return
        causes = validate_certificate(obj)
        if causes:
            raise ApiError.invalid("Certificate", GROUP, str(_meta(obj).get("name") or ""), causes)

    # ------------------------------------------------------------------ keys
    def keys_for(self, event: WatchEvent) -> Iterable[Key]:
        obj, gvr = event.object, event.gvr
        meta = _meta(obj)
        namespace, name = meta.get("namespace"), str(meta.get("name") or "")
        if gvr == CERTIFICATES:
            return [] if event.type == "DELETED" else [("cert", namespace, name), *self._injection_keys()]
        if gvr in (ISSUERS, CLUSTERISSUERS):
            if event.type == "DELETED":
                return self._certs_of_issuer(gvr, namespace, name)
            return [("issuer", gvr.resource, namespace, name), *self._certs_of_issuer(gvr, namespace, name)]
        if gvr == SECRETS:
            return self._secret_keys(str(namespace or ""), name)
        if gvr in INJECTABLES:
            annotations = meta.get("annotations") or {}
            return [("inject", gvr.resource, name)] if event.type != "DELETED" and (
                INJECT_FROM in annotations or INJECT_FROM_SECRET in annotations) else []
        return []

    def _list(self, gvr: GVR, namespace: str | None = None) -> list[JsonObj]:
        try:
            items, _ = self.store.list(gvr, namespace)
        except ApiError:
            return []
        return items

    def _injection_keys(self) -> list[Key]:
        keys: list[Key] = []
        for gvr in INJECTABLES:
            for obj in self._list(gvr):
                annotations = _meta(obj).get("annotations") or {}
                if INJECT_FROM in annotations or INJECT_FROM_SECRET in annotations:
                    keys.append(("inject", gvr.resource, str(_meta(obj).get("name") or "")))
        return keys

    def _certs_of_issuer(self, gvr: GVR, namespace: str | None, name: str) -> list[Key]:
        kind = "ClusterIssuer" if gvr == CLUSTERISSUERS else "Issuer"
        return [("cert", _meta(c).get("namespace"), _meta(c).get("name"))
                for c in self._list(CERTIFICATES, None if kind == "ClusterIssuer" else namespace)
                if ((c.get("spec") or {}).get("issuerRef") or {}).get("name") == name
                and (((c.get("spec") or {}).get("issuerRef") or {}).get("kind") or "Issuer") == kind]

    def _secret_keys(self, namespace: str, name: str) -> list[Key]:
        keys: list[Key] = [("cert", namespace, _meta(c).get("name")) for c in self._list(CERTIFICATES, namespace)
                           if (c.get("spec") or {}).get("secretName") == name]
        for gvr in (ISSUERS, CLUSTERISSUERS):
            scope = namespace if gvr == ISSUERS else None
            if gvr == CLUSTERISSUERS and namespace != CLUSTER_RESOURCE_NAMESPACE:
                continue
            keys += [("issuer", gvr.resource, _meta(i).get("namespace"), _meta(i).get("name"))
                     for i in self._list(gvr, scope) if ((i.get("spec") or {}).get("ca") or {}).get("secretName") == name]
        if keys or any(f"{namespace}/{name}" == (_meta(o).get("annotations") or {}).get(INJECT_FROM_SECRET)
                 for gvr in INJECTABLES for o in self._list(gvr)):
            keys += self._injection_keys()
        return keys

    # ------------------------------------------------------------------ reconcile
    def reconcile(self, key: Key) -> float | None:
        assert isinstance(key, tuple)
        if key[0] == "issuer":
            self._reconcile_issuer(CLUSTERISSUERS if key[1] == CLUSTERISSUERS.resource else ISSUERS, key[2], str(key[3]))
            return None
        if key[0] == "cert":
            return self._reconcile_certificate(str(key[1]), str(key[2]))
        if key[0] == "inject":
            self._inject(next(g for g in INJECTABLES if g.resource == key[1]), str(key[2]))
        return None

    def _get(self, gvr: GVR, namespace: str | None, name: str) -> JsonObj | None:
        try:
            return self.store.get(gvr, namespace, name)
        except ApiError:
            return None

    def _now(self) -> datetime.datetime:
        return self.clock.now().replace(microsecond=0)

    def _write_conditions(self, gvr: GVR, obj: JsonObj, status: JsonObj) -> None:
        if {k: (obj.get("status") or {}).get(k) for k in status} == status:
            return
        meta = _meta(obj)
        with contextlib.suppress(ApiError):  # deleted meanwhile, or a newer write: its event brings us back
            self.store.patch(gvr, meta.get("namespace"), str(meta.get("name")), {"status": status}, "merge",
                             subresource="status", user=USER)

    # ------------------------------------------------------------------ issuers
    def _issuer_readiness(self, gvr: GVR, issuer: JsonObj) -> tuple[str, str, str]:
        spec = issuer.get("spec") or {}
        if "selfSigned" in spec:
            return "True", "IsReady", ""
        ca = spec.get("ca")
        if isinstance(ca, dict):
            namespace = CLUSTER_RESOURCE_NAMESPACE if gvr == CLUSTERISSUERS else str(_meta(issuer).get("namespace"))
            secret_name = str(ca.get("secretName") or "")
            secret = self._get(SECRETS, namespace, secret_name)
            if secret is None:
                return "False", "ErrGetKeyPair", (f"Error getting keypair for CA issuer: secrets \"{secret_name}\" "
                                                  "not found")
            pair = self._pair(secret)
            if pair is None or load_key_pair(pair) is None:
                return "False", "ErrInvalidKeyPair", "Error getting keypair for CA issuer: the key pair is not valid"
            return "True", "KeyPairVerified", "Signing CA verified"
        return "False", "UnsupportedIssuer", "this sandbox's cert-manager supports selfSigned and ca issuers"

    def _reconcile_issuer(self, gvr: GVR, namespace: object, name: str) -> None:
        issuer = self._get(gvr, str(namespace) if gvr == ISSUERS else None, name)
        if issuer is None:
            return
        status, reason, message = self._issuer_readiness(gvr, issuer)
        conditions = [dict(c) for c in (issuer.get("status") or {}).get("conditions") or []]
        if set_condition(conditions, "Ready", status, reason, message, rfc3339(self._now())):
            for condition in conditions:
                condition.setdefault("observedGeneration", _meta(issuer).get("generation", 1))
            self._write_conditions(gvr, issuer, {"conditions": conditions})

    @staticmethod
    def _pair(secret: JsonObj) -> KeyPair | None:
        data = secret.get("data") or {}
        cert, key = unb64(data.get("tls.crt")), unb64(data.get("tls.key"))
        return KeyPair(cert, key) if cert and key else None

    # ------------------------------------------------------------------ certificates
    def _issuer_of(self, cert: JsonObj) -> tuple[GVR, JsonObj | None]:
        ref = (cert.get("spec") or {}).get("issuerRef") or {}
        kind = str(ref.get("kind") or "Issuer")
        gvr = CLUSTERISSUERS if kind == "ClusterIssuer" else ISSUERS
        namespace = None if gvr == CLUSTERISSUERS else _meta(cert).get("namespace")
        return gvr, self._get(gvr, namespace, str(ref.get("name") or ""))

    def _reissue_reason(self, cert: JsonObj, secret: JsonObj | None, now: datetime.datetime,
                        renew_before: datetime.timedelta | None) -> tuple[str, str] | None:
        """Why the Certificate must be issued now (cert-manager's trigger policies), or None."""
        spec = cert.get("spec") or {}
        issuing = find_condition((cert.get("status") or {}).get("conditions"), "Issuing")
        if issuing is not None and issuing.get("status") == "True" and issuing.get("reason") == "ManuallyTriggered":
            return "ManuallyTriggered", str(issuing.get("message") or "Certificate re-issuance manually triggered")
        if secret is None:
            return "DoesNotExist", "Issuing certificate as Secret does not exist"
        pair = self._pair(secret)
        if pair is None:
            return "MissingData", "Issuing certificate as Secret does not contain a certificate"
        seen = facts(pair.cert_pem)
        if seen is None or load_key_pair(pair) is None:
            return "InvalidKeyPair", "Issuing certificate as Secret contains an invalid key-pair"
        annotations = _meta(secret).get("annotations") or {}
        ref = spec.get("issuerRef") or {}
        if annotations.get("cert-manager.io/issuer-name") != ref.get("name") or \
                annotations.get("cert-manager.io/issuer-kind") != (ref.get("kind") or "Issuer"):
            return "IncorrectIssuer", "Issuing certificate as Secret was previously issued by a different issuer"
        if sorted(seen.dns_names) != sorted(str(n) for n in spec.get("dnsNames") or []) or \
                seen.is_ca != bool(spec.get("isCA")):
            return "SecretMismatch", "Issuing certificate as Secret does not match the Certificate's spec"
        if now >= seen.not_after:
            return "Expired", f"Certificate expired on {seen.not_after.strftime('%a, %d %b %Y %H:%M:%S UTC')}"
        due = renewal_time(seen.not_before, seen.not_after, renew_before)
        if now >= due:
            return "Renewing", f"Renewing certificate as renewal was scheduled at {rfc3339(due)}"
        return None

    def _reconcile_certificate(self, namespace: str, name: str) -> float | None:
        cert = self._get(CERTIFICATES, namespace, name)
        if cert is None or _meta(cert).get("deletionTimestamp"):
            return None
        spec = cert.get("spec") or {}
        now = self._now()
        stamp = rfc3339(now)
        duration = parse_duration(spec.get("duration")) or DEFAULT_DURATION
        renew_before = parse_duration(spec.get("renewBefore")) if spec.get("renewBefore") else None
        secret_name = str(spec.get("secretName") or "")
        secret = self._get(SECRETS, namespace, secret_name)
        status = dict(cert.get("status") or {})
        conditions = [dict(c) for c in status.get("conditions") or []]
        reason = self._reissue_reason(cert, secret, now, renew_before)
        if reason is not None:
            issuer_gvr, issuer = self._issuer_of(cert)
            issued = self._issue(cert, issuer_gvr, issuer, duration, now, secret) if issuer is not None else None
            if issued is None:
                # Not issuable yet (the issuer is missing or not ready): Issuing stays True, as cert-manager's
                # CertificateRequest waits; the issuer's event brings us back.
                set_condition(conditions, "Issuing", "True", reason[0], reason[1], stamp)
                if find_condition(conditions, "Ready") is None or secret is None:
                    set_condition(conditions, "Ready", "False", reason[0], reason[1], stamp)
                self._write_conditions(CERTIFICATES, cert, {"conditions": conditions})
                return None
            secret = issued
            status["revision"] = int(status.get("revision") or 0) + 1
        pair = self._pair(secret) if secret is not None else None
        seen = facts(pair.cert_pem) if pair is not None else None
        if seen is None:
            return None
        conditions = [c for c in conditions if c.get("type") != "Issuing"]
        if now >= seen.not_after:
            set_condition(conditions, "Ready", "False", "Expired", "Certificate has expired", stamp)
        else:
            set_condition(conditions, "Ready", "True", "Ready", "Certificate is up to date and has not expired", stamp)
        for condition in conditions:
            condition["observedGeneration"] = _meta(cert).get("generation", 1)
        due = renewal_time(seen.not_before, seen.not_after, renew_before)
        status.update({"conditions": conditions, "notBefore": rfc3339(seen.not_before),
                       "notAfter": rfc3339(seen.not_after), "renewalTime": rfc3339(due)})
        self._write_conditions(CERTIFICATES, cert, status)
        return max((due - now).total_seconds(), 0.0) + 0.01

    def _issue(self, cert: JsonObj, issuer_gvr: GVR, issuer: JsonObj, duration: datetime.timedelta,
               now: datetime.datetime, secret: JsonObj | None) -> JsonObj | None:
        """Sign and store the certificate; the stored Secret, or None when the issuer cannot sign yet."""
        ready = find_condition((issuer.get("status") or {}).get("conditions"), "Ready")
        if ready is None or ready.get("status") != "True":
            return None
        issuer_spec = issuer.get("spec") or {}
        signer: KeyPair | None = None
        if "ca" in issuer_spec:
            ca_namespace = CLUSTER_RESOURCE_NAMESPACE if issuer_gvr == CLUSTERISSUERS else _meta(cert).get("namespace")
            ca_secret = self._get(SECRETS, str(ca_namespace), str((issuer_spec.get("ca") or {}).get("secretName")))
            signer = self._pair(ca_secret) if ca_secret is not None else None
            if signer is None:
                return None
        elif "selfSigned" not in issuer_spec:
            return None
        spec = cert.get("spec") or {}
        made = issue(spec, duration, now, signer)
        if made is None:
            return None
        pair, ca_pem = made
        meta = _meta(cert)
        ref = spec.get("issuerRef") or {}
        template = spec.get("secretTemplate") or {}
        annotations = {**(template.get("annotations") or {}),
                       CERT_NAME: str(meta.get("name")), "cert-manager.io/issuer-name": str(ref.get("name") or ""),
                       "cert-manager.io/issuer-kind": str(ref.get("kind") or "Issuer"),
                       "cert-manager.io/issuer-group": str(ref.get("group") or GROUP),
                       "cert-manager.io/common-name": str(spec.get("commonName") or ""),
                       "cert-manager.io/alt-names": ",".join(str(n) for n in spec.get("dnsNames") or []),
                       "cert-manager.io/ip-sans": ",".join(str(n) for n in spec.get("ipAddresses") or []),
                       "cert-manager.io/uri-sans": ",".join(str(n) for n in spec.get("uris") or [])}
        labels = {**(template.get("labels") or {}), "controller.cert-manager.io/fao": "true"}
        data = {"tls.crt": b64(pair.cert_pem), "tls.key": b64(pair.key_pem), "ca.crt": b64(ca_pem)}
        namespace, secret_name = str(meta.get("namespace")), str(spec.get("secretName"))
        try:
            if secret is None:
                return self.store.create(SECRETS, {
                    "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                    "metadata": {"name": secret_name, "namespace": namespace, "annotations": annotations,
                                 "labels": labels},
                    "data": data}, namespace=namespace, user=USER)
            return self.store.patch(SECRETS, namespace, secret_name, {
                "metadata": {"annotations": annotations, "labels": labels}, "data": data}, "merge", user=USER)
        except ApiError:
            return None  # a race with another writer: the Secret's event brings us back

    # ------------------------------------------------------------------ cainjector
    def _ca_for(self, annotations: JsonObj) -> str | None:
        """The caBundle (base64 PEM) an object's annotations ask for; None when not available (yet)."""
        source = annotations.get(INJECT_FROM)
        if isinstance(source, str) and "/" in source:
            namespace, name = source.split("/", 1)
            cert = self._get(CERTIFICATES, namespace, name)
            if cert is None:
                return None
            secret = self._get(SECRETS, namespace, str((cert.get("spec") or {}).get("secretName") or ""))
            if secret is None or (_meta(secret).get("annotations") or {}).get(CERT_NAME) != name:
                return None  # cainjector only trusts a Secret the Certificate wrote
        else:
            source = annotations.get(INJECT_FROM_SECRET)
            if not isinstance(source, str) or "/" not in source:
                return None
            namespace, name = source.split("/", 1)
            secret = self._get(SECRETS, namespace, name)
            if secret is None or (_meta(secret).get("annotations") or {}).get(ALLOW_DIRECT) != "true":
                return None
        ca = (secret.get("data") or {}).get("ca.crt")
        return str(ca) if ca else None

    def _inject(self, gvr: GVR, name: str) -> None:
        obj = self._get(gvr, None, name)
        if obj is None:
            return
        ca = self._ca_for(_meta(obj).get("annotations") or {})
        if ca is None:
            return
        changed = False
        if gvr == APISERVICES:
            spec = obj.setdefault("spec", {})
            if spec.get("caBundle") != ca:
                spec["caBundle"] = ca
                spec.pop("insecureSkipTLSVerify", None)
                changed = True
        else:
            for webhook in obj.get("webhooks") or []:
                client = webhook.setdefault("clientConfig", {})
                if client.get("caBundle") != ca:
                    client["caBundle"] = ca
                    changed = True
        if changed:
            # With its resourceVersion: a newer write wins, and its event brings us back.
            with contextlib.suppress(ApiError):
                self.store.update(gvr, obj, user=INJECTOR)
