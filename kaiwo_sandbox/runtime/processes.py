"""The container runtime of the sandbox's real pods: each container is a process on this machine,
started in its pod's network namespace (`network.py`) and in a mount namespace of its own, where the
kubelet's files are where a container finds them:

    /etc/hosts                                     the pod's hosts file (cluster DNS, `podspec.hosts_file`)
    /run/secrets/kubernetes.io/serviceaccount/     token, ca.crt, namespace (a tmpfs hides the host's /run)
    /tmp                                           private to the pod; where the sandbox's Python environment
                                                   lives under /tmp (a checkout there), its directories are
                                                   shown again at their own paths, as an image carries its files
    /run                                           a tmpfs of the pod's own
    /run/kaiwo-ray/work                            the container's own working directory (`--local-commands`
                                                   pods without a workingDir)
    <mountPath> under /run, /var/run or /tmp        its Secret and ConfigMap volumes (`podspec.volume_files`)

Everything else of the file system is this machine's, with the sandbox's Python environment first on
PATH: that is what a "local image" is. stdout and stderr go to one log file per container start.
The runtime only starts, signals and observes; the kubelet decides (`cluster/nodes/realpods.py`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kaiwo_sandbox.contracts import JsonObj
from kaiwo_sandbox.runtime.network import PodInterface, PodNetwork, kill_namespace
from kaiwo_sandbox.runtime.podspec import (
    VolumeFiles,
    container_argv,
    is_local_image,
    local_command,
    runs_locally,
)

SA_MOUNT = "/run/secrets/kubernetes.io/serviceaccount"
WORK_MOUNT = "/run/kaiwo-ray/work"  # under the container's own /run: visible to it and to exec alike
TokenMinter = Callable[[str, str], str]  # (namespace, service account) -> bearer token


PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True)  # loaded here: the child between fork and exec only calls it


def _die_with_sandbox() -> None:
    """In the child before exec: SIGTERM when the sandbox's thread that started it dies, however it dies
    (the container's own processes then stop as on a pod deletion; a sandbox killed outright leaves the
    rest to the next sandbox's start, `PodNetwork.reclaim_dead`)."""
    with contextlib.suppress(OSError, AttributeError):
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def environment_dirs_under_tmp() -> list[str]:
    """The top-level directories under /tmp that hold the sandbox's Python environment (what a local image
    runs): the virtual environment, its interpreter and every import path (an editable checkout's too)."""
    candidates = [sys.prefix, sys.base_prefix, sys.executable, os.path.realpath(sys.executable), *sys.path]
    found: set[str] = set()
    for candidate in candidates:
        parts = Path(os.path.abspath(candidate or "/")).parts
        if len(parts) > 2 and parts[1] == "tmp":
            found.add(f"/tmp/{parts[2]}")
    return sorted(found)


def image_path() -> str:
    """PATH inside a local image: the sandbox's own environment first (ray, python, kaiwo-ray), then the system's."""
    own = str(Path(sys.executable).parent)
    return f"{own}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(slots=True)
class ContainerProcess:
    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    env: dict[str, str]
    cwd: str
    started_monotonic: float = field(default_factory=time.monotonic)
    stop_requested: bool = False
    stdin_once: bool = False  # `stdinOnce`: the first attach that closes stdin closes it for good

    def poll(self) -> int | None:
        code = self.popen.poll()
        if code is None:
            return None
        return 128 - code if code < 0 else code  # killed by signal N: the runtime reports 128+N

    def signal_session(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, sig)


@dataclass(slots=True)
class LocalPod:
    uid: str
    namespace: str
    name: str
    iface: PodInterface
    root: Path
    service_account: str | None
    processes: dict[str, ContainerProcess] = field(default_factory=dict)
    logs: dict[str, list[Path]] = field(default_factory=dict)  # container -> one log per start
    hosts_text: str = ""

    @property
    def ip(self) -> str:
        return self.iface.ip

    @property
    def hosts_path(self) -> Path:
        return self.root / "hosts"


def _available(program: str) -> bool:
    return shutil.which(program, path=image_path()) is not None


class LocalRuntime:
    """Starts and stops the real pods of one sandbox. Thread-safe where the API server's streams and
    the kubelet meet (logs, exec)."""

    def __init__(self, images: Iterable[str], root: Path, *, commands: bool = False) -> None:
        self.images = frozenset(images)
        self.commands = commands  # `--local-commands`: pods whose commands run on this machine run for real
        self.root = root
        self.network: PodNetwork | None = None
        self.api_host = ""
        self.api_port = 0
        self.ca_pem = ""
        self.mint_token: TokenMinter | None = None
        self._pods: dict[str, LocalPod] = {}
        self._lock = threading.Lock()
        self._stoppers: list[threading.Thread] = []
        self._tools = {name: shutil.which(name) or f"/usr/bin/{name}" for name in
                       ("unshare", "nsenter", "sh", "mount", "mkdir", "rmdir", "hostname")}

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.network = PodNetwork.create()
        self.api_host = self.network.gateway

    def configure_api(self, port: int, ca_pem: str, mint_token: TokenMinter) -> None:
        self.api_port = port
        self.ca_pem = ca_pem
        self.mint_token = mint_token

    def close(self) -> None:
        with self._lock:
            pods = list(self._pods.values())
            self._pods.clear()
        for pod in pods:
            self._terminate(pod, grace=0.0)
        for thread in self._stoppers:
            thread.join(timeout=5)
        if self.network is not None:
            self.network.close()
            self.network = None

    # -- queries ----------------------------------------------------------------------------------
    def runs(self, pod: JsonObj) -> bool:
        """Whether `pod` runs as real processes here (`podspec.runs_locally`)."""
        return runs_locally(pod, self.images, self.commands, _available)

    def argv(self, container: JsonObj) -> list[str]:
        """What starts `container`: its command as written for a local image, else the command
        `--local-commands` runs it with (`podspec.local_command`)."""
        if is_local_image(str(container.get("image", "")), self.images) or not self.commands:
            return container_argv(container)
        return local_command(container, _available) or container_argv(container)

    def pod(self, uid: str) -> LocalPod | None:
        with self._lock:
            return self._pods.get(uid)

    def pods(self) -> list[LocalPod]:
        with self._lock:
            return list(self._pods.values())

    def reachable(self) -> dict[str, str]:
        """pod uid -> IP of every real pod."""
        with self._lock:
            return {uid: pod.ip for uid, pod in self._pods.items()}

    def log_file(self, uid: str, container: str, *, previous: bool = False) -> Path | None:
        pod = self.pod(uid)
        if pod is None:
            return None
        files = pod.logs.get(container) or []
        index = -2 if previous else -1
        return files[index] if len(files) >= (2 if previous else 1) else None

    def exec_command(self, uid: str, container: str, argv: list[str]) -> tuple[list[str], dict[str, str], str] | None:
        """(argv, env, cwd) that runs `argv` inside the running container: its namespaces, its env."""
        pod = self.pod(uid)
        process = pod.processes.get(container) if pod else None
        if pod is None or process is None or process.poll() is not None:
            return None
        # nsenter opens a --wd path before it enters the mount namespace: a directory only the container
        # sees (its own WORK_MOUNT) is taken from the container's process instead (`--wd` bare), where
        # the start script's `cd` left it.
        wd = "--wd" if process.cwd == WORK_MOUNT else "--wd=" + process.cwd
        command = [self._tools["nsenter"], "--target", str(process.popen.pid), "--net", "--mount", "--uts",
                   wd, "--", *argv]
        return command, dict(process.env), process.cwd

    # -- pods -------------------------------------------------------------------------------------
    def ensure_pod(self, uid: str, namespace: str, name: str, service_account: str | None) -> LocalPod:
        """The pod's sandbox (network namespace, files), made once per pod uid."""
        existing = self.pod(uid)
        if existing is not None:
            return existing
        assert self.network is not None, "LocalRuntime.start() first"
        iface = self.network.add_pod()
        root = self.root / f"{namespace}_{name}_{uid}"
        (root / "tmp").mkdir(parents=True, exist_ok=True)
        (root / "tmp").chmod(0o1777)
        (root / "logs").mkdir(exist_ok=True)
        (root / "hosts").write_text(f"127.0.0.1\tlocalhost\n{iface.ip}\t{name}\n")
        pod = LocalPod(uid, namespace, name, iface, root, service_account)
        if service_account is not None:
            self._project_service_account(pod, service_account)
        with self._lock:
            self._pods[uid] = pod
        return pod

    def _project_service_account(self, pod: LocalPod, service_account: str) -> None:
        """token, ca.crt and namespace, as the kubelet projects the kube-api-access volume."""
        directory = pod.root / "serviceaccount"
        directory.mkdir(exist_ok=True)
        token = self.mint_token(pod.namespace, service_account) if self.mint_token else ""
        (directory / "token").write_text(token)
        (directory / "ca.crt").write_text(self.ca_pem)
        (directory / "namespace").write_text(pod.namespace)

    @staticmethod
    def _write_volume(pod: LocalPod, volume: VolumeFiles) -> Path:
        """The volume's files in the pod's directory (replaced whole, as the kubelet swaps its data dir)."""
        directory = pod.root / "volumes" / volume.volume
        if directory.exists():
            shutil.rmtree(directory)
        directory.mkdir(parents=True)
        for name, content in volume.files.items():
            target = directory / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
            target.chmod(volume.mode)
        return directory

    def write_hosts(self, pod: LocalPod, text: str) -> None:
        """Rewrite the hosts file in place: the containers see it through a bind mount of this inode."""
        if text == pod.hosts_text:
            return
        with open(pod.hosts_path, "r+") as handle:
            handle.seek(0)
            handle.write(text)
            handle.truncate()
        pod.hosts_text = text

    def start_container(self, pod: LocalPod, container: str, argv: list[str], env: dict[str, str],
                        working_dir: str | None, *, own_workdir: bool = False, stdin: bool = False,
                        stdin_once: bool = False, volumes: Iterable[VolumeFiles] = ()) -> ContainerProcess:
        """Start one container. `own_workdir`: without a workingDir it starts in a directory of its own
        (WORK_MOUNT, kept across its restarts) instead of `/`. `stdin`: its stdin is a pipe an attach
        writes to (`stdin: true` in its spec), else it is closed. `volumes`: Secret/ConfigMap volumes,
        written now (their objects as they are at this start) and bind-mounted at their paths."""
        assert self.network is not None
        restart = len(pod.logs.get(container) or [])
        log_path = pod.root / "logs" / f"{container}.{restart}.log"
        own = own_workdir and not working_dir
        cwd = working_dir or (WORK_MOUNT if own else "/")
        mount, mkdir = self._tools["mount"], self._tools["mkdir"]
        setup = [f"{self._tools['hostname']} {shlex.quote(pod.name[:63])}",
                 f"{mount} --bind {shlex.quote(str(pod.hosts_path))} /etc/hosts",
                 f"{mount} -t tmpfs -o mode=755 tmpfs /run"]
        if pod.service_account is not None:
            setup += [f"{mkdir} -p {SA_MOUNT}",
                      f"{mount} --bind {shlex.quote(str(pod.root / 'serviceaccount'))} {SA_MOUNT}"]
        # Secret/ConfigMap volumes: their files (this machine's, under the pod's directory, which may lie
        # under /tmp) are held on /run before the private /tmp hides them, and moved to their paths last.
        mounted = list(volumes)
        for index, volume in enumerate(mounted):
            source = self._write_volume(pod, volume)
            setup += [f"{mkdir} -p /run/.volumes/{index}", f"{mount} --bind {shlex.quote(str(source))} /run/.volumes/{index}"]
        if own:
            work = pod.root / "work" / container
            work.mkdir(parents=True, exist_ok=True)
            setup += [f"{mkdir} -p {WORK_MOUNT}", f"{mount} --bind {shlex.quote(str(work))} {WORK_MOUNT}"]
        # A private /tmp. The environment's own directories under /tmp (a checkout there) are held on /run
        # while the pod's /tmp is mounted, then shown again at their paths: hiding them would hide `ray`
        # and `python` too, and a TMPDIR elsewhere would make Ray's socket paths longer than AF_UNIX allows.
        kept = environment_dirs_under_tmp()
        for index, path in enumerate(kept):
            setup += [f"{mkdir} -p /run/.image/{index}", f"{mount} --bind {shlex.quote(path)} /run/.image/{index}"]
        setup.append(f"{mount} --bind {shlex.quote(str(pod.root / 'tmp'))} /tmp")
        for index, path in enumerate(kept):
            setup += [f"{mkdir} -p {shlex.quote(path)}", f"{mount} --move /run/.image/{index} {shlex.quote(path)}"]
        if kept:
            setup.append(f"{self._tools['rmdir']} " + " ".join(f"/run/.image/{i}" for i in range(len(kept)))
                         + " /run/.image")
        for index, volume in enumerate(mounted):  # last: a mount path may lie under the private /run or /tmp
            setup += [f"{mkdir} -p {shlex.quote(volume.mount_path)}",
                      f"{mount} --move /run/.volumes/{index} {shlex.quote(volume.mount_path)}"]
        if mounted:
            setup.append(f"{self._tools['rmdir']} " + " ".join(f"/run/.volumes/{i}" for i in range(len(mounted)))
                         + " /run/.volumes")
        script = " && ".join(setup) + f' && cd {shlex.quote(cwd)} && exec "$@"'
        command = [self.network.ip_binary, "netns", "exec", pod.iface.netns, self._tools["unshare"], "--uts",
                   "--mount", "--propagation", "private", "--", self._tools["sh"], "-c", script, "sh", *argv]
        # HOME in the pod's private /tmp: a container starts with a home of its own, and the host's
        # (~/.ray/auth_token, caches) must not leak into it.
        # GRPC_DNS_RESOLVER: the sandbox's cluster DNS is the hosts file, which gRPC's default c-ares
        # resolver never reads (it asks DNS servers only); Ray's GCS client resolves with gRPC.
        full_env = {"PATH": image_path(), "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8",
                    "GRPC_DNS_RESOLVER": "native", **env}
        with open(log_path, "ab") as log:
            popen = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                     env=full_env, start_new_session=True, preexec_fn=_die_with_sandbox)
        pod.logs.setdefault(container, []).append(log_path)
        process = ContainerProcess(container, popen, log_path, full_env, cwd, stdin_once=stdin_once)
        pod.processes[container] = process
        return process

    def stop_container(self, process: ContainerProcess, grace: float) -> None:
        """SIGTERM now, SIGKILL after `grace` seconds if it still runs (in the background)."""
        if process.stop_requested:
            return
        process.stop_requested = True
        process.signal_session(signal.SIGTERM)

        def escalate() -> None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.popen.wait(timeout=max(grace, 0.0))
                return
            process.signal_session(signal.SIGKILL)

        self._background(escalate)

    def remove_pod(self, uid: str, grace: float) -> None:
        """The pod is gone: SIGTERM its containers, SIGKILL what still runs after `grace`, then remove
        its namespace and files."""
        with self._lock:
            pod = self._pods.pop(uid, None)
        if pod is not None:
            self._background(lambda: self._terminate(pod, grace))

    def _terminate(self, pod: LocalPod, grace: float) -> None:
        for process in pod.processes.values():
            process.signal_session(signal.SIGTERM)
        deadline = time.monotonic() + max(grace, 0.0)
        for process in pod.processes.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.popen.wait(timeout=max(deadline - time.monotonic(), 0.0))
        if self.network is not None:
            kill_namespace(self.network.ip_binary, pod.iface.netns)
            for process in pod.processes.values():
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.popen.wait(timeout=5)
            self.network.remove_pod(pod.iface)
        shutil.rmtree(pod.root, ignore_errors=True)

    def _background(self, work: Callable[[], None]) -> None:
        thread = threading.Thread(target=work, name="sandbox-pod-stop", daemon=True)
        self._stoppers = [t for t in self._stoppers if t.is_alive()]
        self._stoppers.append(thread)
        thread.start()
