"""Readiness, liveness and startup probes of real pods, run as the kubelet's prober runs them: an HTTP
GET to the pod's IP (2xx and 3xx succeed), a TCP connect, or a command executed inside the container
(exit 0 succeeds). gRPC probes are checked as a TCP connect. Each probe is one blocking call, made on
the prober's threads, never on the sandbox's event loop.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import subprocess
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from kaiwo_sandbox.contracts import JsonObj

ExecResolver = Callable[[list[str]], tuple[list[str], dict[str, str], str] | None]


@dataclass(frozen=True, slots=True)
class ProbeResult:
    ok: bool
    message: str = ""


def _port(value: object, container: JsonObj) -> int:
    if isinstance(value, int):
        return value
    text = str(value)
    if text.isdigit():
        return int(text)
    for port in container.get("ports") or []:
        if port.get("name") == text:
            return int(port.get("containerPort", 0))
    raise ValueError(f"port {text!r} is not declared by the container")


def run_probe(probe: JsonObj, pod_ip: str, container: JsonObj, exec_in: ExecResolver) -> ProbeResult:
    timeout = float(probe.get("timeoutSeconds") or 1)
    try:
        if "httpGet" in probe:
            spec = probe["httpGet"] or {}
            port = _port(spec.get("port"), container)
            host = str(spec.get("host") or pod_ip)
            path = str(spec.get("path") or "/")
            if str(spec.get("scheme") or "HTTP").upper() == "HTTPS":
                context = ssl.create_default_context()
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
                conn: http.client.HTTPConnection = http.client.HTTPSConnection(host, port, timeout=timeout,
                                                                               context=context)
            else:
                conn = http.client.HTTPConnection(host, port, timeout=timeout)
            try:
                headers = {str(h.get("name")): str(h.get("value")) for h in spec.get("httpHeaders") or []}
                headers.setdefault("User-Agent", "kube-probe/1.32")
                conn.request("GET", path, headers=headers)
                status = conn.getresponse().status
            finally:
                conn.close()
            if 200 <= status < 400:
                return ProbeResult(True)
            return ProbeResult(False, f"HTTP probe failed with statuscode: {status}")
        if "tcpSocket" in probe or "grpc" in probe:
            spec = probe.get("tcpSocket") or probe.get("grpc") or {}
            port = _port(spec.get("port"), container)
            with socket.create_connection((str(spec.get("host") or pod_ip), port), timeout=timeout):
                return ProbeResult(True)
        if "exec" in probe:
            argv = [str(a) for a in (probe["exec"] or {}).get("command") or []]
            resolved = exec_in(argv)
            if resolved is None:
                return ProbeResult(False, "container is not running")
            command, env, _cwd = resolved
            result = subprocess.run(command, env=env, capture_output=True, timeout=timeout)
            if result.returncode == 0:
                return ProbeResult(True)
            output = (result.stdout + result.stderr).decode(errors="replace").strip()
            return ProbeResult(False, output or f"command {argv!r} exited with {result.returncode}")
    except subprocess.TimeoutExpired:
        return ProbeResult(False, f"command timed out after {timeout:g}s")
    except (OSError, ValueError, http.client.HTTPException) as err:
        return ProbeResult(False, str(err))
    return ProbeResult(True)  # a probe with no handler: the API server would have refused it


@dataclass(slots=True)
class ProbeState:
    """One probe of one container: when it is next due and its consecutive results."""

    kind: str  # readiness | liveness | startup
    spec: JsonObj
    started_at: float  # the container's start, in the kubelet's seconds
    successes: int = 0
    failures: int = 0
    next_due: float = 0.0
    passed: bool = False  # readiness: ready; liveness/startup: not failed past the threshold
    in_flight: Future[ProbeResult] | None = None
    last_message: str = ""
    reports: list[str] = field(default_factory=list)  # failure messages not reported yet

    def __post_init__(self) -> None:
        self.next_due = self.started_at + float(self.spec.get("initialDelaySeconds") or 0)
        self.passed = self.kind != "readiness"

    @property
    def period(self) -> float:
        return float(self.spec.get("periodSeconds") or 10)

    def record(self, result: ProbeResult) -> bool:
        """Count a result; True when the outcome flipped (ready/unready, healthy/failed)."""
        before = self.passed
        if result.ok:
            self.successes, self.failures = self.successes + 1, 0
            if self.successes >= int(self.spec.get("successThreshold") or 1):
                self.passed = True
        else:
            self.failures, self.successes = self.failures + 1, 0
            self.last_message = result.message
            self.reports.append(result.message)
            if self.failures >= int(self.spec.get("failureThreshold") or 3):
                self.passed = False
        return before != self.passed


class Prober:
    """The kubelet's probe workers: a few threads shared by every real pod."""

    def __init__(self, workers: int = 4) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sandbox-prober")

    def submit(self, probe: JsonObj, pod_ip: str, container: JsonObj, exec_in: ExecResolver) -> Future[ProbeResult]:
        return self._pool.submit(run_probe, probe, pod_ip, container, exec_in)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
