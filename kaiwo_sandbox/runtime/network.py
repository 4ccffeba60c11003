"""The pod network of the sandbox's real pods: one Linux bridge per sandbox with a /24 of its own,
and one network namespace per pod joined to it by a veth pair, so every pod has its own IP and its
own ports (two Ray nodes both listen on 6379 and 8080, as two pods of a cluster do).

The host end of the bridge (`.1`) is where pods reach the API server. Nothing is routed beyond the
bridge: pods reach each other, and the sandbox's process reaches them, and that is all.
Needs root (CAP_NET_ADMIN); everything it makes carries this sandbox's prefix and is removed on close,
and what a killed sandbox left behind is removed by the next one that takes its index.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

SUBNET_BASE = "10.245.{index}.0/24"  # one /24 per running sandbox; .1 is the bridge (the host's end)
MAX_SANDBOXES = 64
LOCK_DIR = Path("/run/kaiwo-sandbox")


class NetworkError(RuntimeError):
    """The pod network could not be made (not root, no `ip`, no free index)."""


def _ip_binary() -> str:
    found = shutil.which("ip") or ("/usr/sbin/ip" if Path("/usr/sbin/ip").exists() else None)
    if not found:
        raise NetworkError("--local-image needs the `ip` command (Debian: iproute2)")
    return found


@dataclass(frozen=True, slots=True)
class PodInterface:
    netns: str
    ip: str
    host_veth: str


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class PodNetwork:
    def __init__(self, index: int, ip_binary: str) -> None:
        self.index = index
        self.ip_binary = ip_binary
        self.bridge = f"kwsb{index}"
        self.network = ipaddress.ip_network(SUBNET_BASE.format(index=index))
        self.gateway = str(self.network.network_address + 1)
        self._free = [str(self.network.network_address + n) for n in range(2, self.network.num_addresses - 1)]
        self._used: dict[str, PodInterface] = {}
        self._lock = threading.Lock()
        self._serial = 0

    # -- lifecycle --------------------------------------------------------------------------------
    @classmethod
    def create(cls) -> PodNetwork:
        if os.geteuid() != 0:
            raise NetworkError("--local-image runs pods in network namespaces: run the sandbox as root")
        ip = _ip_binary()
        LOCK_DIR.mkdir(parents=True, exist_ok=True)
        cls.reclaim_dead(ip)
        for index in range(MAX_SANDBOXES):
            owner = LOCK_DIR / f"{index}.pid"
            try:
                fd = os.open(owner, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                try:
                    holder = int(owner.read_text().strip() or "0")
                except (OSError, ValueError):
                    holder = 0
                if holder and _alive(holder):
                    continue
                cls(index, ip).remove_leftovers()
                owner.unlink(missing_ok=True)
                try:
                    fd = os.open(owner, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
                except FileExistsError:
                    continue
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
            network = cls(index, ip)
            network.remove_leftovers()
            network._bring_up()
            return network
        raise NetworkError(f"no free pod network: {MAX_SANDBOXES} sandboxes with local images already run")

    @classmethod
    def reclaim_dead(cls, ip: str) -> None:
        """Remove what every sandbox that died without closing left: its pods' processes, namespaces,
        veths and bridge (a test process killed mid-run, say), so that no real pod outlives its sandbox
        past the next start."""
        for owner in LOCK_DIR.glob("*.pid"):
            try:
                holder, index = int(owner.read_text().strip() or "0"), int(owner.stem)
            except (OSError, ValueError):
                continue
            if holder and _alive(holder):
                continue
            cls(index, ip).remove_leftovers()
            owner.unlink(missing_ok=True)

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run([self.ip_binary, *args], capture_output=True, text=True, timeout=30)
        if check and result.returncode != 0:
            raise NetworkError(f"ip {' '.join(args)}: {result.stderr.strip()}")
        return result

    def _batch(self, commands: list[str], netns: str | None = None) -> None:
        inside = ["-n", netns] if netns else []
        result = subprocess.run([self.ip_binary, *inside, "-batch", "-"], input="\n".join(commands) + "\n",
                                capture_output=True, text=True, timeout=30)
        if result.returncode != 0:
            raise NetworkError(f"setting up the pod network: {result.stderr.strip()}")

    def _bring_up(self) -> None:
        self._batch([f"link add {self.bridge} type bridge",
                     f"addr add {self.gateway}/{self.network.prefixlen} dev {self.bridge}",
                     f"link set {self.bridge} up"])

    def remove_leftovers(self) -> None:
        """Namespaces and the bridge a sandbox of this index left behind (killed before its close)."""
        prefix = f"kwsb{self.index}-"
        listed = self._run("netns", "list", check=False).stdout.split("\n")
        for line in listed:
            name = line.split(" ", 1)[0].strip()
            if name.startswith(prefix):
                kill_namespace(self.ip_binary, name)
                self._run("netns", "delete", name, check=False)
        for line in self._run("-o", "link", "show", check=False).stdout.splitlines():
            name = line.split(":", 2)[1].strip().split("@", 1)[0] if line.count(":") >= 2 else ""
            if name.startswith(f"kwv{self.index}x"):
                self._run("link", "delete", name, check=False)
        self._run("link", "delete", self.bridge, check=False)

    def close(self) -> None:
        with self._lock:
            names = [iface.netns for iface in self._used.values()]
            self._used.clear()
        for name in names:
            kill_namespace(self.ip_binary, name)
            self._run("netns", "delete", name, check=False)
        self._run("link", "delete", self.bridge, check=False)
        (LOCK_DIR / f"{self.index}.pid").unlink(missing_ok=True)

    # -- pods -------------------------------------------------------------------------------------
    def add_pod(self) -> PodInterface:
        with self._lock:
            if not self._free:
                raise NetworkError(f"the pod network {self.network} has no free address")
            ip = self._free.pop(0)
            self._serial += 1
            serial = self._serial
        netns = f"kwsb{self.index}-{serial}"
        host_veth = f"kwv{self.index}x{serial}"[:15]
        iface = PodInterface(netns, ip, host_veth)
        try:
            self._batch([f"netns add {netns}",
                         f"link add {host_veth} type veth peer name eth0 netns {netns}",
                         f"link set {host_veth} master {self.bridge} up"])
            self._batch([f"addr add {ip}/{self.network.prefixlen} dev eth0", "link set lo up", "link set eth0 up",
                         f"route add default via {self.gateway}"], netns=netns)
        except NetworkError:
            self._run("netns", "delete", netns, check=False)
            self._run("link", "delete", host_veth, check=False)
            with self._lock:
                self._free.append(ip)
            raise
        with self._lock:
            self._used[netns] = iface
        return iface

    def remove_pod(self, iface: PodInterface) -> None:
        """Kill what is left in the pod's namespace, then remove it (the veth goes with it)."""
        kill_namespace(self.ip_binary, iface.netns)
        self._run("netns", "delete", iface.netns, check=False)
        with self._lock:
            if self._used.pop(iface.netns, None) is not None:
                self._free.append(iface.ip)


def namespace_pids(ip_binary: str, netns: str) -> list[int]:
    result = subprocess.run([ip_binary, "netns", "pids", netns], capture_output=True, text=True, timeout=30)
    return [int(p) for p in result.stdout.split() if p.isdigit()]


def kill_namespace(ip_binary: str, netns: str) -> None:
    """SIGKILL every process in the namespace: what a container runtime does when it removes a sandbox."""
    for pid in namespace_pids(ip_binary, netns):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)
