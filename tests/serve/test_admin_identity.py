"""What `kaiwo-ray dev` gives the admin API (serve/admin_identity.py): its own ServiceAccount, role and token
Secret in the sandbox, and a kubeconfig that authenticates as that account, which may read and impersonate
but not create workloads."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from kaiwo_sandbox.testing import start_sandbox
from serve.admin_identity import USER, provision_local
from serve.state import AdminSettings


def test_provision_local_writes_a_kubeconfig_of_the_admin_apis_own_account(tmp_path: Path) -> None:
    with start_sandbox(nodes=[], authorization="RBAC", cluster=["token-controller"]) as sb:
        written = provision_local(sb.kubeconfig_path, tmp_path / "admin-api.kubeconfig")
        assert written.stat().st_mode & 0o777 == 0o600
        provision_local(sb.kubeconfig_path, written)  # again (a restarted dev loop): the objects exist already

        def kubectl(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(["kubectl", "--kubeconfig", str(written), "--cache-dir", str(tmp_path / "cache"),
                                   *args], capture_output=True, text=True, timeout=60)

        whoami = kubectl("auth", "whoami", "-o", "json")
        assert whoami.returncode == 0, whoami.stderr
        assert json.loads(whoami.stdout)["status"]["userInfo"]["username"] == USER
        assert kubectl("auth", "can-i", "list", "kaiwojobs.kaiwo.silogen.ai", "-A").stdout.strip() == "yes"
        assert kubectl("auth", "can-i", "create", "kaiwojobs.kaiwo.silogen.ai", "-n", "x").stdout.strip() == "no"
        assert kubectl("auth", "can-i", "impersonate", "users").stdout.strip() == "yes"
        ledger = AdminSettings().ledger_namespace  # the GPU ledger's ConfigMaps (serve/usage.py)
        assert kubectl("auth", "can-i", "list", "configmaps", "-n", ledger).stdout.strip() == "yes"
        assert kubectl("auth", "can-i", "list", "configmaps", "-n", "default").stdout.strip() == "no"
        reader = kubectl("get", "configmap", "extension-apiserver-authentication", "-n", "kube-system", "-o", "name")
        assert reader.stdout.strip() == "configmap/extension-apiserver-authentication", reader.stderr
