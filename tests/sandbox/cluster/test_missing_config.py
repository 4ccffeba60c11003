"""A pod naming a Secret or ConfigMap that does not exist does not start, as the kubelet has it: an
env reference leaves its container waiting in CreateContainerConfigError, a volume leaves the pod
ContainerCreating with FailedMount events; the pod starts once the object (and key) appears."""

from __future__ import annotations

from typing import Any

WORKLOADS = ["scheduler", "kubelet"]


def pod(name: str, **spec: Any) -> dict[str, Any]:
    container = {"name": "main", "image": "busybox", "command": ["sleep", "infinity"], **spec.pop("container", {})}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [container], **spec}}


def waiting(c: Any, name: str) -> tuple[str, str, Any] | None:
    found = c.core.read_namespaced_pod(name, "default")
    statuses = found.status.container_statuses or []
    if not statuses or statuses[0].state.waiting is None:
        return None
    return found.status.phase, statuses[0].state.waiting.reason, statuses[0].state.waiting.message


def running(c: Any, name: str) -> bool:
    return bool(c.core.read_namespaced_pod(name, "default").status.phase == "Running")


def messages(c: Any, name: str, reason: str) -> list[str]:
    return [e.message for e in c.events(name=name) if e.reason == reason]


def test_a_missing_secret_in_env_is_a_container_config_error_until_it_and_its_key_exist(
        sandbox_factory: Any, clients_factory: Any, wait_for: Any) -> None:
    c = clients_factory(sandbox_factory(cluster=WORKLOADS))
    env = [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}},
           {"name": "OPTIONAL", "valueFrom": {"secretKeyRef": {"name": "absent", "key": "x", "optional": True}}}]
    c.core.create_namespaced_pod("default", pod("trainer", container={"env": env}))
    state = wait_for(lambda: (lambda w: w if w and w[1] == "CreateContainerConfigError" else None)(
        waiting(c, "trainer")), timeout=20, message="CreateContainerConfigError")
    assert state == ("Pending", "CreateContainerConfigError", 'secret "hf-token" not found')
    assert c.core.read_namespaced_pod("trainer", "default").status.pod_ip  # the sandbox is up; the container is not
    wait_for(lambda: messages(c, "trainer", "Failed") == ['Error: secret "hf-token" not found'], timeout=10,
             message="the kubelet's Failed event")

    c.core.create_namespaced_secret("default", {"metadata": {"name": "hf-token"}, "stringData": {"other": "x"}})
    wait_for(lambda: (waiting(c, "trainer") or ("", "", ""))[2] == "couldn't find key token in Secret default/hf-token",
             timeout=20, message="the missing key named")
    assert not running(c, "trainer")

    c.core.patch_namespaced_secret("hf-token", "default", {"stringData": {"token": "t0k"}})
    wait_for(lambda: running(c, "trainer"), timeout=20, message="started once the key exists")


def test_a_missing_config_map_in_env_from_blocks_its_container(sandbox_factory: Any, clients_factory: Any,
                                                               wait_for: Any) -> None:
    c = clients_factory(sandbox_factory(cluster=WORKLOADS))
    c.core.create_namespaced_pod("default", pod("reader", container={"envFrom": [{"configMapRef": {"name": "cfg"}}]}))
    state = wait_for(lambda: (lambda w: w if w and w[1] == "CreateContainerConfigError" else None)(
        waiting(c, "reader")), timeout=20, message="CreateContainerConfigError")
    assert state[2] == 'configmap "cfg" not found'
    c.core.create_namespaced_config_map("default", {"metadata": {"name": "cfg"}, "data": {"A": "1"}})
    wait_for(lambda: running(c, "reader"), timeout=20, message="started once the ConfigMap exists")


def test_a_missing_secret_volume_keeps_the_pod_container_creating_with_failed_mount(
        sandbox_factory: Any, clients_factory: Any, wait_for: Any) -> None:
    c = clients_factory(sandbox_factory(cluster=WORKLOADS))
    volumes = [{"name": "creds", "secret": {"secretName": "s3-credentials"}},
               {"name": "maybe", "configMap": {"name": "absent", "optional": True}}]
    c.core.create_namespaced_pod("default", pod("loader", volumes=volumes, container={
        "volumeMounts": [{"name": "creds", "mountPath": "/creds"}]}))
    wait_for(lambda: messages(c, "loader", "FailedMount"), timeout=20, message="FailedMount")
    assert messages(c, "loader", "FailedMount") == [
        'MountVolume.SetUp failed for volume "creds" : secret "s3-credentials" not found']
    found = c.core.read_namespaced_pod("loader", "default")
    assert waiting(c, "loader") == ("Pending", "ContainerCreating", None)
    assert found.status.pod_ip is None and found.status.host_ip  # no sandbox until the volumes mount
    conditions = {cond.type: cond.status for cond in found.status.conditions}
    assert conditions["PodReadyToStartContainers"] == "False" and conditions["Ready"] == "False"

    c.core.create_namespaced_secret("default", {"metadata": {"name": "s3-credentials"}, "stringData": {"id": "a"}})
    wait_for(lambda: running(c, "loader"), timeout=20, message="started once the Secret exists")
    assert c.core.read_namespaced_pod("loader", "default").status.pod_ip


def test_a_volume_naming_a_missing_key_fails_to_mount(sandbox_factory: Any, clients_factory: Any,
                                                      wait_for: Any) -> None:
    c = clients_factory(sandbox_factory(cluster=WORKLOADS))
    c.core.create_namespaced_config_map("default", {"metadata": {"name": "settings"}, "data": {"a": "1"}})
    volumes = [{"name": "cfg", "projected": {"sources": [
        {"configMap": {"name": "settings", "items": [{"key": "b", "path": "b"}]}}]}}]
    c.core.create_namespaced_pod("default", pod("picky", volumes=volumes))
    wait_for(lambda: messages(c, "picky", "FailedMount") == [
        'MountVolume.SetUp failed for volume "cfg" : configmap references non-existent config key: b'],
        timeout=20, message="FailedMount naming the key")
    c.core.patch_namespaced_config_map("settings", "default", {"data": {"b": "2"}})
    wait_for(lambda: running(c, "picky"), timeout=20, message="started once the key exists")
