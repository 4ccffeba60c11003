"""Pod Security admission (the built-in `PodSecurity` plugin), as pure functions.

A namespace labelled `pod-security.kubernetes.io/enforce: baseline|restricted` refuses pods that
break the Pod Security Standard of that level with 403 Forbidden and the real plugin's message:

    pods "x" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false
    (container "c" must set securityContext.allowPrivilegeEscalation=false), ...

`pod-security.kubernetes.io/warn` adds a warning (`would violate PodSecurity "restricted:latest": ...`,
a `Warning` header) and `.../audit` the audit annotation `pod-security.kubernetes.io/audit-violations`
with the same text; both also judge the pod template of the workload resources (Deployment,
ReplicaSet, StatefulSet, DaemonSet, Job, CronJob, ReplicationController, PodTemplate) on create and
update, which enforce never refuses (only their pods are refused). A pod the enforce level refuses
gets no warning (the plugin adds none to a rejected request); a judged pod carries the audit
annotation `pod-security.kubernetes.io/enforce-policy`.

Checks, reasons, details and their order follow k8s.io/pod-security-admission/policy at its latest
policy version: baseline checks first, then (restricted) the restricted ones, each restricted check
replacing the baseline check it overlaps (capabilities, hostPath/volume types, seccomp). An
unparseable level fails closed to `restricted`, an unparseable version reads as `latest`.

Not simulated (docs/sandbox.md): pod updates (only creation is checked), exemptions, per-version
differences of older policy versions, the deprecated AppArmor/seccomp annotations, and the warnings a
namespace label change gives about existing pods.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from kaiwo_sandbox.contracts import ApiError, JsonObj

LABEL_PREFIX = "pod-security.kubernetes.io/"
ENFORCE, AUDIT, WARN = "enforce", "audit", "warn"
ENFORCE_LABEL = LABEL_PREFIX + ENFORCE
ENFORCE_VERSION_LABEL = LABEL_PREFIX + "enforce-version"
WARN_LABEL = LABEL_PREFIX + WARN
AUDIT_LABEL = LABEL_PREFIX + AUDIT
# Audit annotations (the plugin's keys under its prefix).
ENFORCE_POLICY_ANNOTATION = LABEL_PREFIX + "enforce-policy"
AUDIT_VIOLATIONS_ANNOTATION = LABEL_PREFIX + "audit-violations"
# The workload resources whose pod template the plugin judges (warn and audit only), by (group,
# resource): the path to the template.
POD_TEMPLATE_PATHS: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "podtemplates"): ("template",),
    ("", "replicationcontrollers"): ("spec", "template"),
    ("apps", "replicasets"): ("spec", "template"),
    ("apps", "deployments"): ("spec", "template"),
    ("apps", "statefulsets"): ("spec", "template"),
    ("apps", "daemonsets"): ("spec", "template"),
    ("batch", "jobs"): ("spec", "template"),
    ("batch", "cronjobs"): ("spec", "jobTemplate", "spec", "template"),
}
PRIVILEGED, BASELINE, RESTRICTED = "privileged", "baseline", "restricted"
LEVELS = (PRIVILEGED, BASELINE, RESTRICTED)
LATEST = "latest"
_VERSION = re.compile(r"^v1\.(0|[1-9][0-9]*)$")

# Baseline: capabilities a container may add (the container runtime's default set).
BASELINE_CAPABILITIES = frozenset({
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
    "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
})
# Baseline: the "safe" sysctls.
SAFE_SYSCTLS = frozenset({
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
})
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})
# Restricted: the inline volume sources a pod may use (everything else, hostPath first, is refused).
RESTRICTED_VOLUME_SOURCES = frozenset({
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret",
})
VOLUME_SOURCES = (
    "hostPath", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "nfs", "iscsi", "glusterfs", "rbd",
    "flexVolume", "cinder", "cephfs", "flocker", "fc", "azureFile", "vsphereVolume", "quobyte", "azureDisk",
    "photonPersistentDisk", "portworxVolume", "scaleIO", "storageos",
)

Violation = tuple[str, str]  # (forbidden reason, forbidden detail)
Check = Callable[[JsonObj], Violation | None]


@dataclass(frozen=True, slots=True)
class Policy:
    """The level and version a namespace enforces."""

    level: str
    version: str

    def __str__(self) -> str:
        return f"{self.level}:{self.version}"


def mode_policy(namespace_labels: dict[str, Any] | None, mode: str) -> Policy:
    """A namespace's policy for one mode (enforce, audit, warn): `privileged:latest` when unlabelled."""
    labels = namespace_labels or {}
    level = labels.get(LABEL_PREFIX + mode)
    if level is None:
        level = PRIVILEGED
    elif level not in LEVELS:
        level = RESTRICTED  # the real plugin fails closed on a level it cannot parse
    version = labels.get(f"{LABEL_PREFIX}{mode}-version")
    if not isinstance(version, str) or not (version == LATEST or _VERSION.match(version)):
        version = LATEST
    return Policy(str(level), version)


def enforced_policy(namespace_labels: dict[str, Any] | None) -> Policy:
    """What a namespace's labels enforce: `privileged:latest` when unlabelled."""
    return mode_policy(namespace_labels, ENFORCE)


def check_pod(level: str, pod_spec: JsonObj) -> list[Violation]:
    """Every violation of `level` by a pod spec, in the real plugin's order."""
    if level == PRIVILEGED:
        return []
    checks = [*_BASELINE_CHECKS, *(_OVERLAPPING_BASELINE_CHECKS if level == BASELINE else _RESTRICTED_CHECKS)]
    return [found for check in checks if (found := check(pod_spec)) is not None]


def violation_summary(violations: Sequence[Violation]) -> str:
    """`reason (detail), reason (detail)`: the plugin's aggregate forbidden detail."""
    return ", ".join(f"{reason} ({detail})" if detail else reason for reason, detail in violations)


@dataclass(slots=True)
class Review:
    """The plugin's answer to one request: a refusal (enforce, pods only), warnings for the client,
    annotations for the audit log."""

    denial: ApiError | None = None
    warnings: list[str] = field(default_factory=list)
    annotations: dict[str, str] = field(default_factory=dict)


def _labels(namespace: JsonObj | None) -> dict[str, Any] | None:
    labels = ((namespace or {}).get("metadata") or {}).get("labels")
    return labels if isinstance(labels, dict) else None


def _review(pod_spec: JsonObj, labels: dict[str, Any] | None, *, enforce: bool, name: str) -> Review:
    """EvaluatePod: enforce (when asked), then audit, then warn unless the request is refused."""
    review = Review()
    results: dict[Policy, list[Violation]] = {}

    def judged(policy: Policy) -> list[Violation]:
        if policy not in results:
            results[policy] = check_pod(policy.level, pod_spec)
        return results[policy]

    if enforce:
        policy = mode_policy(labels, ENFORCE)
        review.annotations[ENFORCE_POLICY_ANNOTATION] = str(policy)
        violations = judged(policy)
        if violations:
            review.denial = ApiError(
                403, "Forbidden",
                f'pods "{name}" is forbidden: violates PodSecurity "{policy}": {violation_summary(violations)}',
                {"name": name, "kind": "pods"})
    audit = mode_policy(labels, AUDIT)
    if violations := judged(audit):
        review.annotations[AUDIT_VIOLATIONS_ANNOTATION] = (
            f'would violate PodSecurity "{audit}": {violation_summary(violations)}')
    if review.denial is None:
        warn = mode_policy(labels, WARN)
        if violations := judged(warn):
            review.warnings.append(f'would violate PodSecurity "{warn}": {violation_summary(violations)}')
    return review


def _fully_privileged(labels: dict[str, Any] | None, modes: Sequence[str]) -> bool:
    return all(mode_policy(labels, mode).level == PRIVILEGED for mode in modes)


def review_pod(pod: JsonObj, namespace: JsonObj | None) -> Review:
    """All three modes on a pod being created in `namespace`."""
    labels = _labels(namespace)
    if _fully_privileged(labels, (ENFORCE, AUDIT, WARN)):
        return Review()
    spec = pod.get("spec")
    name = str((pod.get("metadata") or {}).get("name") or "")
    return _review(spec if isinstance(spec, dict) else {}, labels, enforce=True, name=name)


def review_pod_controller(group: str, resource: str, obj: JsonObj, namespace: JsonObj | None) -> Review:
    """Audit and warn on the pod template of a workload resource being created or updated (never a
    refusal: enforce judges only the pods); nothing for other resources."""
    path = POD_TEMPLATE_PATHS.get((group, resource))
    labels = _labels(namespace)
    if path is None or _fully_privileged(labels, (AUDIT, WARN)):
        return Review()
    template: Any = obj
    for step in path:
        template = template.get(step) if isinstance(template, dict) else None
    spec = template.get("spec") if isinstance(template, dict) else None
    if not isinstance(spec, dict):
        return Review()  # no pod template (e.g. a CronJob without one): nothing to judge
    return _review(spec, labels, enforce=False, name="")


def admit_pod(pod: JsonObj, namespace: JsonObj | None) -> None:
    """Enforce mode on a pod being created in `namespace`: 403 Forbidden listing every violation."""
    denial = review_pod(pod, namespace).denial
    if denial is not None:
        raise denial


# ---------------------------------------------------------------- helpers (the plugin's wording)
def _containers(spec: JsonObj) -> Iterator[JsonObj]:
    """Init containers, containers, ephemeral containers: the plugin's visiting order."""
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for container in spec.get(key) or ():
            if isinstance(container, dict):
                yield container


def _context(obj: JsonObj) -> JsonObj:
    context = obj.get("securityContext")
    return context if isinstance(context, dict) else {}


def _plural(singular: str, plural: str, count: int) -> str:
    return singular if count == 1 else plural


def _quote(values: Sequence[Any]) -> str:
    return ", ".join(f'"{value}"' for value in values)


def _named(singular: str, plural: str, names: Sequence[str]) -> str:
    return f"{_plural(singular, plural, len(names))} {_quote(names)}"


def _name(container: JsonObj) -> str:
    return str(container.get("name", ""))


# ---------------------------------------------------------------- baseline
def _app_armor(spec: JsonObj) -> Violation | None:
    setters: list[str] = []
    values: set[str] = set()

    def bad(obj: JsonObj) -> bool:
        profile = _context(obj).get("appArmorProfile")
        if isinstance(profile, dict) and profile.get("type") not in ("RuntimeDefault", "Localhost"):
            values.add(str(profile.get("type")))
            return True
        return False

    if bad(spec):
        setters.append("pod")
    names = [_name(c) for c in _containers(spec) if bad(c)]
    if names:
        setters.append(_named("container", "containers", names))
    if not setters:
        return None
    return (_plural("forbidden AppArmor profile", "forbidden AppArmor profiles", len(values)),
            f"{' and '.join(setters)} must not set AppArmor profile type to {_quote(sorted(values))}")


def _host_namespaces(spec: JsonObj) -> Violation | None:
    used = [f"{key}=true" for key in ("hostNetwork", "hostPID", "hostIPC") if spec.get(key) is True]
    return ("host namespaces", ", ".join(used)) if used else None


def _host_ports(spec: JsonObj) -> Violation | None:
    names: list[str] = []
    ports: set[str] = set()
    for container in _containers(spec):
        found = {str(p["hostPort"]) for p in container.get("ports") or () if isinstance(p, dict) and p.get("hostPort")}
        if found:
            names.append(_name(container))
            ports |= found
    if not names:
        return None
    return ("hostPort", f'{_named("container", "containers", names)} {_plural("uses", "use", len(names))} '
                        f'{_plural("hostPort", "hostPorts", len(ports))} {", ".join(sorted(ports))}')


def _privileged(spec: JsonObj) -> Violation | None:
    names = [_name(c) for c in _containers(spec) if _context(c).get("privileged") is True]
    if not names:
        return None
    return ("privileged", f"{_named('container', 'containers', names)} must not set securityContext.privileged=true")


def _proc_mount(spec: JsonObj) -> Violation | None:
    names: list[str] = []
    values: set[str] = set()
    for container in _containers(spec):
        mount = _context(container).get("procMount")
        if mount not in (None, "", "Default"):
            names.append(_name(container))
            values.add(str(mount))
    if not names:
        return None
    return ("procMount", f"{_named('container', 'containers', names)} must not set securityContext.procMount to "
                         f"{_quote(sorted(values))}")


def _selinux(spec: JsonObj) -> Violation | None:
    setters: list[str] = []
    types: set[str] = set()
    fields: set[str] = set()

    def bad(options: Any) -> bool:
        if not isinstance(options, dict):
            return False
        found = False
        if str(options.get("type") or "") not in SELINUX_TYPES:
            types.add(str(options.get("type")))
            found = True
        for key in ("user", "role"):
            if options.get(key):
                fields.add(key)
                found = True
        return found

    if bad(_context(spec).get("seLinuxOptions")):
        setters.append("pod")
    names = [_name(c) for c in _containers(spec) if bad(_context(c).get("seLinuxOptions"))]
    if names:
        setters.append(_named("container", "containers", names))
    if not setters:
        return None
    problems = [_named("type", "types", sorted(types))] if types else []
    problems += [f"{key} may not be set" for key in ("user", "role") if key in fields]
    return ("seLinuxOptions", f"{' and '.join(setters)} set forbidden securityContext.seLinuxOptions: "
                              f"{'; '.join(problems)}")


def _sysctls(spec: JsonObj) -> Violation | None:
    names = [str(s.get("name")) for s in _context(spec).get("sysctls") or ()
             if isinstance(s, dict) and s.get("name") not in SAFE_SYSCTLS]
    return ("forbidden sysctls", ", ".join(names)) if names else None


def _host_process(spec: JsonObj) -> Violation | None:
    def host_process(obj: JsonObj) -> bool:
        return (_context(obj).get("windowsOptions") or {}).get("hostProcess") is True

    names = [_name(c) for c in _containers(spec) if host_process(c)]
    if not names and not host_process(spec):
        return None
    setters = (["pod"] if host_process(spec) else []) + ([_named("container", "containers", names)] if names else [])
    return ("hostProcess", f"{' and '.join(setters)} must not set securityContext.windowsOptions.hostProcess=true")


def _added_capabilities(container: JsonObj) -> list[str]:
    added = (_context(container).get("capabilities") or {}).get("add") or ()
    return [str(cap) for cap in added]


def _capabilities_baseline(spec: JsonObj) -> Violation | None:
    names: list[str] = []
    extra: set[str] = set()
    for container in _containers(spec):
        forbidden = {cap for cap in _added_capabilities(container) if cap not in BASELINE_CAPABILITIES}
        if forbidden:
            names.append(_name(container))
            extra |= forbidden
    if not names:
        return None
    return ("non-default capabilities", f"{_named('container', 'containers', names)} must not include "
                                        f"{_quote(sorted(extra))} in securityContext.capabilities.add")


def _host_path_volumes(spec: JsonObj) -> Violation | None:
    names = [str(v.get("name")) for v in spec.get("volumes") or () if isinstance(v, dict) and v.get("hostPath")]
    return ("hostPath volumes", _named("volume", "volumes", names)) if names else None


def _seccomp_setters(spec: JsonObj, *, required: bool) -> Violation | None:
    """Seccomp: an explicit profile must be RuntimeDefault or Localhost; `required` (restricted): the pod
    or every container must set one."""
    setters: list[str] = []
    values: set[str] = set()
    pod_profile = _context(spec).get("seccompProfile")
    pod_set = False
    if isinstance(pod_profile, dict):
        if pod_profile.get("type") in ("RuntimeDefault", "Localhost"):
            pod_set = True
        else:
            setters.append("pod")
            values.add(str(pod_profile.get("type")))
    explicit: list[str] = []
    implicit: list[str] = []
    for container in _containers(spec):
        profile = _context(container).get("seccompProfile")
        if isinstance(profile, dict):
            if profile.get("type") not in ("RuntimeDefault", "Localhost"):
                explicit.append(_name(container))
                values.add(str(profile.get("type")))
        elif not pod_set:
            implicit.append(_name(container))
    if explicit:
        setters.append(_named("container", "containers", explicit))
    if setters:
        return ("seccompProfile", f"{' and '.join(setters)} must not set securityContext.seccompProfile.type to "
                                  f"{_quote(sorted(values))}")
    if required and implicit:
        return ("seccompProfile", f"pod or {_named('container', 'containers', implicit)} must set "
                                  'securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"')
    return None


def _seccomp_baseline(spec: JsonObj) -> Violation | None:
    return _seccomp_setters(spec, required=False)


# ---------------------------------------------------------------- restricted
def _allow_privilege_escalation(spec: JsonObj) -> Violation | None:
    names = [_name(c) for c in _containers(spec) if _context(c).get("allowPrivilegeEscalation") is not False]
    if not names:
        return None
    return ("allowPrivilegeEscalation != false",
            f"{_named('container', 'containers', names)} must set securityContext.allowPrivilegeEscalation=false")


def _capabilities_restricted(spec: JsonObj) -> Violation | None:
    missing_drop: list[str] = []
    adding: list[str] = []
    forbidden: set[str] = set()
    for container in _containers(spec):
        capabilities = _context(container).get("capabilities")
        if not isinstance(capabilities, dict):
            missing_drop.append(_name(container))
            continue
        if "ALL" not in (capabilities.get("drop") or ()):
            missing_drop.append(_name(container))
        extra = {cap for cap in _added_capabilities(container) if cap != "NET_BIND_SERVICE"}
        if extra:
            adding.append(_name(container))
            forbidden |= extra
    details = []
    if missing_drop:
        details.append(f'{_named("container", "containers", missing_drop)} must set '
                       'securityContext.capabilities.drop=["ALL"]')
    if adding:
        details.append(f"{_named('container', 'containers', adding)} must not include {_quote(sorted(forbidden))} "
                       "in securityContext.capabilities.add")
    return ("unrestricted capabilities", "; ".join(details)) if details else None


def _restricted_volumes(spec: JsonObj) -> Violation | None:
    names: list[str] = []
    types: set[str] = set()
    for volume in spec.get("volumes") or ():
        if not isinstance(volume, dict) or any(volume.get(source) is not None for source in RESTRICTED_VOLUME_SOURCES):
            continue
        names.append(str(volume.get("name")))
        types.add(next((source for source in VOLUME_SOURCES if volume.get(source) is not None), "unknown"))
    if not names:
        return None
    return ("restricted volume types",
            f'{_named("volume", "volumes", names)} {_plural("uses", "use", len(names))} '
            f'{_plural("restricted volume type", "restricted volume types", len(types))} {_quote(sorted(types))}')


def _user_namespaced(spec: JsonObj) -> bool:
    """`hostUsers: false`: root in the pod is not root on the node; runAsNonRoot/runAsUser are relaxed."""
    return spec.get("hostUsers") is False


def _run_as_non_root(spec: JsonObj) -> Violation | None:
    if _user_namespaced(spec):
        return None
    setters: list[str] = []
    pod_value = _context(spec).get("runAsNonRoot")
    if pod_value is False:
        setters.append("pod")
    explicit: list[str] = []
    implicit: list[str] = []
    for container in _containers(spec):
        value = _context(container).get("runAsNonRoot")
        if value is False:
            explicit.append(_name(container))
        elif value is None and pod_value is not True:
            implicit.append(_name(container))
    if explicit:
        setters.append(_named("container", "containers", explicit))
    if setters:
        return ("runAsNonRoot != true", f"{' and '.join(setters)} must not set securityContext.runAsNonRoot=false")
    if implicit:
        return ("runAsNonRoot != true",
                f"pod or {_named('container', 'containers', implicit)} must set securityContext.runAsNonRoot=true")
    return None


def _run_as_user(spec: JsonObj) -> Violation | None:
    if _user_namespaced(spec):
        return None
    setters = ["pod"] if _context(spec).get("runAsUser") == 0 else []
    names = [_name(c) for c in _containers(spec) if _context(c).get("runAsUser") == 0]
    if names:
        setters.append(_named("container", "containers", names))
    return ("runAsUser=0", f"{' and '.join(setters)} must not set runAsUser=0") if setters else None


def _seccomp_restricted(spec: JsonObj) -> Violation | None:
    return _seccomp_setters(spec, required=True)


# The plugin's registration order (file order within a level). Baseline checks that a restricted
# check supersedes ("overlapping") run only at the baseline level.
_BASELINE_CHECKS: tuple[Check, ...] = (
    _app_armor, _host_namespaces, _host_ports, _privileged, _proc_mount, _selinux, _sysctls, _host_process,
)
_OVERLAPPING_BASELINE_CHECKS: tuple[Check, ...] = (_capabilities_baseline, _host_path_volumes, _seccomp_baseline)
_RESTRICTED_CHECKS: tuple[Check, ...] = (
    _allow_privilege_escalation, _capabilities_restricted, _restricted_volumes, _run_as_non_root, _run_as_user,
    _seccomp_restricted,
)
