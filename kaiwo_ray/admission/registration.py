"""The webhooks as the API server must know them: one Mutating- and one ValidatingWebhookConfiguration,
pointed at the operator's Service (in-cluster) or at a URL (`kaiwo-ray dev` on localhost). The paths
are upstream's (`/mutate-batch-v1-job`, ...; its `ray-io-ray-io` paths named a group that does not
exist and are `ray-io` here). deploy/components/webhooks holds the same objects as YAML; a test keeps
the two equal."""

from __future__ import annotations

import copy
from dataclasses import dataclass

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.labels import LABEL_MANAGED, LABEL_RUN_ID

NAME = "kaiwo-ray"
EXEMPT_NAMESPACES = ("kube-system", "kaiwo-system")
TIMEOUT_SECONDS = 5  # upstream's; well under the API server's 10 s default, and a refusal is cheap


@dataclass(frozen=True, slots=True)
class Hook:
    name: str
    path: str
    group: str
    version: str
    resource: str
    operations: tuple[str, ...]


MUTATING: tuple[Hook, ...] = (
    Hook("mjob.kaiwo.silogen.ai", "/mutate-batch-v1-job", "batch", "v1", "jobs", ("CREATE", "UPDATE")),
    Hook("mdeployment.kaiwo.silogen.ai", "/mutate-apps-v1-deployment", "apps", "v1", "deployments",
         ("CREATE", "UPDATE")),
    Hook("mrayjob.kaiwo.silogen.ai", "/mutate-ray-io-v1-rayjob", "ray.io", "v1", "rayjobs", ("CREATE", "UPDATE")),
    Hook("mrayservice.kaiwo.silogen.ai", "/mutate-ray-io-v1-rayservice", "ray.io", "v1", "rayservices",
         ("CREATE", "UPDATE")),
    # Record the authenticated submitter (kaiwo_ray/admission/submitter.py; docs/accounting.md).
    *(Hook(f"m{plural[:-1]}.kaiwo.silogen.ai", f"/mutate-kaiwo-silogen-ai-v1alpha1-{plural[:-1]}",
           "kaiwo.silogen.ai", "v1alpha1", plural, ("CREATE", "UPDATE")) for plural in ("kaiwojobs", "kaiwoservices")),
)
VALIDATING: tuple[Hook, ...] = (
    Hook("vjob.kaiwo.silogen.ai", "/validate-batch-v1-job", "batch", "v1", "jobs", ("CREATE",)),
    Hook("vdeployment.kaiwo.silogen.ai", "/validate-apps-v1-deployment", "apps", "v1", "deployments", ("CREATE",)),
    Hook("vrayjob.kaiwo.silogen.ai", "/validate-ray-io-v1-rayjob", "ray.io", "v1", "rayjobs", ("CREATE",)),
    Hook("vrayservice.kaiwo.silogen.ai", "/validate-ray-io-v1-rayservice", "ray.io", "v1", "rayservices",
         ("CREATE",)),
    *(Hook(f"v{plural[:-1]}.kaiwo.silogen.ai", f"/validate-{group.replace('.', '-')}-v1alpha1-{plural[:-1]}",
           group, "v1alpha1", plural, ("CREATE", "UPDATE"))
      for group, plural in (("kaiwo.silogen.ai", "kaiwojobs"), ("kaiwo.silogen.ai", "kaiwoservices"),
                            ("kaiwo.silogen.ai", "kaiwoqueueconfigs"), ("config.kaiwo.silogen.ai", "kaiwoconfigs"))),
)


def _webhook(hook: Hook, client: JsonObj, *, mutating: bool) -> JsonObj:
    webhook: JsonObj = {
        "name": hook.name,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",  # true here: admission only labels, defaults and validates
        "failurePolicy": "Fail",
        "timeoutSeconds": TIMEOUT_SECONDS,
        "clientConfig": client,
        "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                                    "values": list(EXEMPT_NAMESPACES)}]},
        "rules": [{"operations": list(hook.operations), "apiGroups": [hook.group], "apiVersions": [hook.version],
                   "resources": [hook.resource]}],
    }
    selector = _OBJECT_SELECTORS.get((mutating, hook.group.endswith("kaiwo.silogen.ai")))
    if selector is not None:
        webhook["objectSelector"] = copy.deepcopy(selector)  # each webhook its own (no YAML aliases either)
    if mutating:
        webhook["reinvocationPolicy"] = "Never"
    return webhook


# The API server skips a call whose objectSelector does not match (cluster-mechanics 2.3), so no create
# waits for a webhook that would answer "allowed, unchanged": the plain kinds' mutating ones act only on
# objects labelled managed "true" (the Kaiwo kinds' mutating ones, which record the submitter, on every
# KaiwoJob/KaiwoService), the plain kinds' validating ones refuse only objects without the label and
# without Kaiwo's run-id (what the operator renders for a KaiwoJob/KaiwoService is Kaiwo's already, and
# its creates do not wait on, or fail with, the webhook server).
_OBJECT_SELECTORS: dict[tuple[bool, bool], JsonObj] = {
    (True, False): {"matchLabels": {LABEL_MANAGED: "true"}},
    (False, False): {"matchExpressions": [{"key": LABEL_MANAGED, "operator": "DoesNotExist"},
                                          {"key": LABEL_RUN_ID, "operator": "DoesNotExist"}]},
}


def configurations(*, ca_bundle: str = "", service: tuple[str, str, int] | None = None,
                   url: str | None = None) -> list[JsonObj]:
    """Both configurations; `service` is (namespace, name, port), else every path hangs off `url`."""
    def client(path: str) -> JsonObj:
        out: JsonObj = {}
        if service is not None:
            namespace, name, port = service
            out["service"] = {"namespace": namespace, "name": name, "port": port, "path": path}
        else:
            out["url"] = str(url).rstrip("/") + path
        if ca_bundle:
            out["caBundle"] = ca_bundle
        return out

    return [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
         "metadata": {"name": NAME}, "webhooks": [_webhook(h, client(h.path), mutating=True) for h in MUTATING]},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
         "metadata": {"name": NAME}, "webhooks": [_webhook(h, client(h.path), mutating=False) for h in VALIDATING]},
    ]
