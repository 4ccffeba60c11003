"""Benchmark: what RBAC enforcement costs the sandbox per request, measured as a ratio in one run.

Two sandboxes, one `allow-all` (the default) and one `rbac`, each holding deploy/'s operator role and
binding plus `--noise` unrelated ClusterRoles/ClusterRoleBindings and RoleBindings (a busy cluster's
RBAC). One client per sandbox, authenticated as deploy's ServiceAccount, sends the same requests over a
kept-alive HTTPS connection, in alternating blocks so that machine noise hits both alike. Prints the
latency of each mode, the RBAC/allow-all ratio, and the policy evaluation time per request.

    .venv/bin/python benchmarks/sandbox_rbac.py [--requests N] [--noise N] [--scale]
"""

from __future__ import annotations

import argparse
import http.client
import ssl
import statistics
import sys
import time
from pathlib import Path

import kubernetes
import yaml

from kaiwo_sandbox.testing import RunningSandbox, start_sandbox

DEPLOY = Path(__file__).resolve().parents[1] / "deploy" / "base"
NAMESPACE = "kaiwo-system"
# What the operator asks (granted by its ClusterRole, and by its Role in kaiwo-system: the Lease, absent: 404).
PATHS = ("/api/v1/namespaces/team/configmaps", "/apis/batch/v1/namespaces/team/jobs",
         f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/kaiwo-ray-kaiwojob")


def _prepare(sb: RunningSandbox, noise: int) -> str:
    api = sb.api_client()
    core = kubernetes.client.CoreV1Api(api)
    for namespace in (NAMESPACE, "team"):
        core.create_namespace({"metadata": {"name": namespace}})
    core.create_namespaced_config_map("team", {"metadata": {"name": "settings"}, "data": {"a": "b"}})
    for name in ("serviceaccount.yaml", "rbac-operator.yaml"):
        for doc in yaml.safe_load_all((DEPLOY / name).read_text()):
            kubernetes.utils.create_from_dict(api, doc)
    rbac = kubernetes.client.RbacAuthorizationV1Api(api)
    for n in range(noise):
        rbac.create_cluster_role({"metadata": {"name": f"noise-{n}"}, "rules": [
            {"apiGroups": [""], "resources": ["pods", "services"], "verbs": ["get", "list"]}]})
        rbac.create_cluster_role_binding({"metadata": {"name": f"noise-{n}"}, "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"noise-{n}"},
            "subjects": [{"kind": "User", "name": f"someone-{n}"}]})
        rbac.create_namespaced_role_binding("team", {"metadata": {"name": f"noise-{n}"}, "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"noise-{n}"},
            "subjects": [{"kind": "Group", "name": f"team-{n}"}]})
    return sb.service_account_token(NAMESPACE, "kaiwo-ray")


class Client:
    def __init__(self, sb: RunningSandbox, token: str) -> None:
        assert sb.sandbox.cert is not None
        context = ssl.create_default_context(cadata=sb.sandbox.cert.cert_pem.decode())
        self.connection = http.client.HTTPSConnection("127.0.0.1", sb.sandbox.port, context=context, timeout=30)
        self.headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}

    def get(self, path: str) -> float:
        started = time.perf_counter()
        self.connection.request("GET", path, headers=self.headers)
        response = self.connection.getresponse()
        response.read()
        assert response.status in (200, 404), (path, response.status)  # never 403
        return time.perf_counter() - started


def _evaluation_seconds(sb: RunningSandbox, repeats: int) -> float:
    """Seconds per RBAC decision (the policy cached, as between RBAC writes), on the sandbox's loop."""
    from kaiwo_sandbox.apiserver.auth.authn import service_account_user
    from kaiwo_sandbox.apiserver.auth.rbac import Attributes

    authz = sb.sandbox.access.authz
    attrs = Attributes(service_account_user(NAMESPACE, "kaiwo-ray"), "list", namespace="team", api_group="batch",
                       resource="jobs")

    def run() -> float:
        assert authz.authorize(attrs).allowed
        started = time.perf_counter()
        for _ in range(repeats):
            authz.authorize(attrs)
        return (time.perf_counter() - started) / repeats

    return sb.call(run)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--noise", type=int, default=50)
    parser.add_argument("--scale", action="store_true", help="10x the requests and the RBAC noise")
    args = parser.parse_args()
    if args.scale:
        args.requests *= 10
        args.noise *= 10
    started = time.monotonic()
    with start_sandbox(nodes=[]) as open_sb, start_sandbox(nodes=[], authorization="RBAC") as rbac_sb:
        clients = {"allow-all": Client(open_sb, _prepare(open_sb, args.noise)),
                   "rbac": Client(rbac_sb, _prepare(rbac_sb, args.noise))}
        samples: dict[str, list[float]] = {mode: [] for mode in clients}
        for client in clients.values():  # warm: TLS handshake, first policy build
            for path in PATHS:
                client.get(path)
        block = 100
        for start in range(0, args.requests, block):
            for mode, client in clients.items():
                samples[mode] += [client.get(PATHS[i % len(PATHS)]) for i in range(start, start + block)]
        evaluation = _evaluation_seconds(rbac_sb, 20000)
    p50 = {mode: statistics.median(s) * 1e3 for mode, s in samples.items()}
    p99 = {mode: statistics.quantiles(s, n=100)[98] * 1e3 for mode, s in samples.items()}
    for mode in clients:
        print(f"GET latency p50 {mode}: {p50[mode]:.3f} ms")
        print(f"GET latency p99 {mode}: {p99[mode]:.3f} ms")
    print(f"p50 ratio rbac/allow-all: {p50['rbac'] / p50['allow-all']:.3f} (target <= 1.10)")
    print(f"p99 ratio rbac/allow-all: {p99['rbac'] / p99['allow-all']:.3f} (target <= 1.25)")
    print(f"RBAC decision with {3 * args.noise + 2} bindings and roles: {evaluation * 1e6:.1f} us "
          "(target <= 50 us)")
    print(f"requests per mode: {args.requests}")
    print(f"benchmark wall time: {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
