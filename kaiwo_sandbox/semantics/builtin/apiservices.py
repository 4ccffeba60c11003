"""APIService (apiregistration.k8s.io/v1): the defaults and the validation of kube-aggregator v1.32
(pkg/apis/apiregistration/v1/defaults.go, validation/validation.go), reduced to the fields the
aggregator (apiserver/aggregation/) reads, so what it routes by is always well formed."""

from __future__ import annotations

import re
from collections.abc import Callable

from kaiwo_sandbox.contracts import JsonObj

GROUP = "apiregistration.k8s.io"
Causes = list[JsonObj]
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _cause(field: str, reason: str, message: str) -> JsonObj:
    return {"field": field, "reason": reason, "message": message}


def default(obj: JsonObj) -> None:
    """SetDefaults_ServiceReference: a Service reference's port defaults to 443."""
    service = (obj.get("spec") or {}).get("service")
    if isinstance(service, dict) and service.get("port") is None:
        service["port"] = 443


def validate(obj: JsonObj, old: JsonObj | None) -> Causes:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [_cause("spec", "FieldValueRequired", "Required value")]
    causes: Causes = []
    name = str((obj.get("metadata") or {}).get("name") or "")
    group, version = str(spec.get("group") or ""), str(spec.get("version") or "")
    expected = f"{version}.{group}" if group else version
    if name != expected:
        causes.append(_cause("metadata.name", "FieldValueInvalid",
                             f'Invalid value: "{name}": must be `spec.version+"."+spec.group`: "{expected}"'))
    if group and not _DNS1123_SUBDOMAIN.fullmatch(group):
        causes.append(_cause("spec.group", "FieldValueInvalid", f'Invalid value: "{group}": a lowercase RFC 1123 '
                             "subdomain must consist of lower case alphanumeric characters, '-' or '.'"))
    if not version:
        causes.append(_cause("spec.version", "FieldValueRequired", "Required value"))
    elif not _DNS1123_LABEL.fullmatch(version):
        causes.append(_cause("spec.version", "FieldValueInvalid", f'Invalid value: "{version}": a lowercase RFC '
                             "1123 label must consist of lower case alphanumeric characters or '-'"))
    for field, low, high in (("groupPriorityMinimum", 1, 20000), ("versionPriority", 1, 1000)):
        value = spec.get(field)
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value < high:
            causes.append(_cause(f"spec.{field}", "FieldValueInvalid",
                                 f"Invalid value: {value if value is not None else 0}: must be positive and less "
                                 f"than {high}"))
    service = spec.get("service")
    insecure = bool(spec.get("insecureSkipTLSVerify"))
    if isinstance(service, dict):
        for field in ("namespace", "name"):
            if not service.get(field):
                causes.append(_cause(f"spec.service.{field}", "FieldValueRequired", "Required value"))
        port = service.get("port")
        if not isinstance(port, int) or not 1 <= port <= 65535:
            causes.append(_cause("spec.service.port", "FieldValueInvalid",
                                 f"Invalid value: {port}: must be between 1 and 65535, inclusive"))
        if insecure and spec.get("caBundle"):
            causes.append(_cause("spec.insecureSkipTLSVerify", "FieldValueInvalid",
                                 "Invalid value: true: may not be true if caBundle is present"))
    elif service is None and (insecure or spec.get("caBundle")):
        # A local APIService (no Service) has no TLS to configure.
        field = "spec.insecureSkipTLSVerify" if insecure else "spec.caBundle"
        causes.append(_cause(field, "FieldValueInvalid", "Invalid value: local APIServices may not have a caBundle "
                             "or insecureSkipTLSVerify"))
    return causes


DEFAULTERS: dict[tuple[str, str], Callable[[JsonObj], None]] = {(GROUP, "APIService"): default}
VALIDATORS: dict[tuple[str, str], Callable[[JsonObj, JsonObj | None], Causes]] = {(GROUP, "APIService"): validate}
