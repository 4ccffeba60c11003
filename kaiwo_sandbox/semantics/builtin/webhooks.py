"""Mutating/ValidatingWebhookConfiguration (admissionregistration.k8s.io/v1): the defaults the
apiserver's SetDefaults_* fill in and the validation it refuses with, so that what the API server
calls (apiserver/webhooks/) is always complete. Rules as k8s.io/api admissionregistration/v1 types.go
and pkg/apis/admissionregistration/validation at v1.32, reduced to what a configuration can get wrong
that changes which webhook is called, or how.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kaiwo_sandbox.contracts import JsonObj

Causes = list[JsonObj]

OPERATIONS = frozenset({"*", "CREATE", "UPDATE", "DELETE", "CONNECT"})
SIDE_EFFECTS = frozenset({"None", "NoneOnDryRun"})


def _default_webhook(webhook: JsonObj, *, mutating: bool) -> None:
    webhook.setdefault("failurePolicy", "Fail")
    webhook.setdefault("matchPolicy", "Equivalent")
    webhook.setdefault("timeoutSeconds", 10)
    webhook.setdefault("namespaceSelector", {})
    webhook.setdefault("objectSelector", {})
    if mutating:
        webhook.setdefault("reinvocationPolicy", "Never")
    for rule in webhook.get("rules") or []:
        if isinstance(rule, dict):
            rule.setdefault("scope", "*")
    service = (webhook.get("clientConfig") or {}).get("service")
    if isinstance(service, dict):
        service.setdefault("port", 443)


def _defaulter(mutating: bool) -> Callable[[JsonObj], None]:
    def default(obj: JsonObj) -> None:
        for webhook in obj.get("webhooks") or []:
            if isinstance(webhook, dict):
                _default_webhook(webhook, mutating=mutating)
    return default


def _cause(field: str, reason: str, message: str) -> JsonObj:
    return {"reason": reason, "field": field, "message": message}


def _unsupported(field: str, value: Any, allowed: list[str]) -> JsonObj:
    listed = ", ".join(f'"{a}"' for a in allowed)
    return _cause(field, "FieldValueNotSupported", f'Unsupported value: "{value}": supported values: {listed}')


def _validate_webhook(webhook: JsonObj, path: str, *, mutating: bool) -> Causes:
    causes: Causes = []
    name = webhook.get("name")
    if not name:
        causes.append(_cause(f"{path}.name", "FieldValueRequired", "Required value"))
    elif "." not in str(name):
        causes.append(_cause(f"{path}.name", "FieldValueInvalid",
                             f'Invalid value: "{name}": should be a domain with at least three segments '
                             "separated by dots"))
    side = webhook.get("sideEffects")
    if side is None:
        causes.append(_cause(f"{path}.sideEffects", "FieldValueRequired",
                             'Required value: must specify one of "None", "NoneOnDryRun"'))
    elif side not in SIDE_EFFECTS:
        causes.append(_unsupported(f"{path}.sideEffects", side, sorted(SIDE_EFFECTS)))
    versions = webhook.get("admissionReviewVersions")
    if not versions:
        causes.append(_cause(f"{path}.admissionReviewVersions", "FieldValueRequired",
                             "Required value: must specify one of v1, v1beta1"))
    elif not {"v1", "v1beta1"} & set(versions):
        causes.append(_cause(f"{path}.admissionReviewVersions", "FieldValueInvalid",
                             f"Invalid value: {versions}: must include at least one of v1, v1beta1"))
    for field, allowed in (("failurePolicy", ["Fail", "Ignore"]), ("matchPolicy", ["Equivalent", "Exact"])):
        if webhook.get(field) not in allowed:
            causes.append(_unsupported(f"{path}.{field}", webhook.get(field), allowed))
    if mutating and webhook.get("reinvocationPolicy") not in ("Never", "IfNeeded"):
        causes.append(_unsupported(f"{path}.reinvocationPolicy", webhook.get("reinvocationPolicy"),
                                   ["IfNeeded", "Never"]))
    timeout = webhook.get("timeoutSeconds")
    if not isinstance(timeout, int) or not 1 <= timeout <= 30:
        causes.append(_cause(f"{path}.timeoutSeconds", "FieldValueInvalid",
                             f"Invalid value: {timeout}: the timeout value must be between 1 and 30 seconds"))
    causes.extend(_validate_client_config(webhook.get("clientConfig") or {}, f"{path}.clientConfig"))
    for r, rule in enumerate(webhook.get("rules") or []):
        rule_path = f"{path}.rules[{r}]"
        for field in ("operations", "apiGroups", "apiVersions", "resources"):
            if not rule.get(field):
                causes.append(_cause(f"{rule_path}.{field}", "FieldValueRequired", "Required value"))
        for o, op in enumerate(rule.get("operations") or []):
            if op not in OPERATIONS:
                causes.append(_unsupported(f"{rule_path}.operations[{o}]", op, sorted(OPERATIONS)))
        if rule.get("scope") not in ("*", "Cluster", "Namespaced"):
            causes.append(_unsupported(f"{rule_path}.scope", rule.get("scope"), ["*", "Cluster", "Namespaced"]))
    return causes


def _validate_client_config(config: JsonObj, path: str) -> Causes:
    url, service = config.get("url"), config.get("service")
    if (url is None) == (service is None):
        return [_cause(path, "FieldValueRequired", "Required value: exactly one of url or service is required")]
    if url is not None:
        if not str(url).startswith("https://"):
            return [_cause(f"{path}.url", "FieldValueInvalid",
                           f'Invalid value: "{url}": \'https\' is the only allowed URL scheme')]
        return []
    if not isinstance(service, dict):
        return [_cause(f"{path}.service", "FieldValueInvalid", "Invalid value: must be an object")]
    causes: Causes = []
    for field in ("name", "namespace"):
        if not service.get(field):
            causes.append(_cause(f"{path}.service.{field}", "FieldValueRequired", "Required value: service "
                                 f"{field} is required"))
    port = service.get("port")
    if not isinstance(port, int) or not 1 <= port <= 65535:
        causes.append(_cause(f"{path}.service.port", "FieldValueInvalid",
                             f"Invalid value: {port}: port is not valid: must be between 1 and 65535, inclusive"))
    svc_path = service.get("path")
    if svc_path is not None and not str(svc_path).startswith("/"):
        causes.append(_cause(f"{path}.service.path", "FieldValueInvalid",
                             f'Invalid value: "{svc_path}": must start with a \'/\''))
    return causes


def _validator(mutating: bool) -> Callable[[JsonObj, JsonObj | None], Causes]:
    def validate(obj: JsonObj, old: JsonObj | None) -> Causes:
        causes: Causes = []
        seen: set[str] = set()
        for i, webhook in enumerate(obj.get("webhooks") or []):
            path = f"webhooks[{i}]"
            if not isinstance(webhook, dict):
                causes.append(_cause(path, "FieldValueInvalid", "Invalid value: must be an object"))
                continue
            causes.extend(_validate_webhook(webhook, path, mutating=mutating))
            name = str(webhook.get("name") or "")
            if name in seen:
                causes.append(_cause(f"{path}.name", "FieldValueDuplicate", f'Duplicate value: "{name}"'))
            seen.add(name)
        return causes
    return validate


GROUP = "admissionregistration.k8s.io"
DEFAULTERS: dict[tuple[str, str], Callable[[JsonObj], None]] = {
    (GROUP, "MutatingWebhookConfiguration"): _defaulter(True),
    (GROUP, "ValidatingWebhookConfiguration"): _defaulter(False),
}
VALIDATORS: dict[tuple[str, str], Callable[[JsonObj, JsonObj | None], Causes]] = {
    (GROUP, "MutatingWebhookConfiguration"): _validator(True),
    (GROUP, "ValidatingWebhookConfiguration"): _validator(False),
}
