"""`kaiwo-ray dev`: a simulated cluster, a private local Ray and the operator on it, in one command.

The sandbox runs as a subprocess (`kaiwo-ray sandbox`), not a thread: it gets its own interpreter
(no GIL contention with the driver on a small machine) and the same code path users run by hand.
It lives in its own session so that a terminal's Ctrl-C reaches only this process, which then
stops things in order — controllers first (they finish in-flight reconciles against a still
running API), then Ray, then the sandbox — and it is tied to this process with PDEATHSIG so that
it cannot outlive a `kill -9` of `dev`.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from hosts.cli import sandbox as sandbox_cli
from hosts.cli import telemetry_flags
from hosts.runtime.cpu_policy import batch_wanted
from hosts.runtime.operator_runtime import StopSignal, format_health, format_memory, process_tree_memory

READY_LINE = "Kubeconfig written to"
SANDBOX_START_TIMEOUT = 60.0
PR_SET_PDEATHSIG = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", type=Path, default=Path(".kaiwo/kubeconfig"), metavar="PATH",
                        help="where to write the sandbox's kubeconfig (default: .kaiwo/kubeconfig)")
    parser.add_argument("--nodes", type=Path, metavar="FILE",
                        help="seed exactly these Nodes (default: two AMD MI300X, one NVIDIA H100, one CPU node)")
    parser.add_argument("--time-factor", type=float, default=1.0, metavar="F",
                        help="scale simulated durations (0.1 = ten times faster than real time)")
    sandbox_cli.add_clock_arguments(parser)
    parser.add_argument("--port", type=int, default=0, help="sandbox port on 127.0.0.1 (default: any free port)")
    sandbox_cli.add_local_image_argument(parser)
    parser.add_argument("--health-interval", type=float, default=10.0, metavar="SECONDS",
                        help="how often to check the controller actors")
    from serve.cli_hooks import add_cli_arguments

    add_cli_arguments(parser, default_auth="none")
    parser.add_argument("--no-webhooks", action="store_true",
                        help="do not run the admission webhooks (registered in the sandbox as "
                             "deploy/components/webhooks registers them)")
    parser.add_argument("--webhooks-port", type=int, default=0, metavar="PORT",
                        help="the webhook server's port on 127.0.0.1 (default: any free port)")
    telemetry_flags.add_arguments(parser, dev=True)


def next_steps(kubeconfig: Path, admin_url: str | None = None) -> str:
    return "\n".join([
        "",
        *([f"Admin API and dashboard: {admin_url}  (API docs: {admin_url}/docs)"] if admin_url else []),
        "kaiwo-ray dev is ready. Try, in another terminal:",
        f"  export KUBECONFIG={kubeconfig}",
        "  kubectl apply -f examples/cpu-job.yaml",
        "  kubectl get kaiwojobs -w",
        "  kubectl get workloads,jobs,pods",
        "Press Ctrl-C to stop everything.",
    ])


def _die_with_parent() -> None:
    """In the child before exec: get SIGTERM when the `dev` process dies, however it dies."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def spawn_sandbox(kubeconfig: Path, nodes: Path | None, time_factor: float, port: int,
                  log_path: Path, local_images: list[str] | None = None,
                  local_commands: bool = False, clock_origin: float | None = None) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "hosts.cli.main", "sandbox", "--kubeconfig", str(kubeconfig),
               "--time-factor", repr(time_factor), "--port", str(port)]
    if clock_origin is not None:
        command += ["--scaled-clock", "--clock-origin", repr(clock_origin)]
    for image in local_images or []:
        command += ["--local-image", image]
    if local_commands:
        command.append("--local-commands")
    if nodes is not None:
        command += ["--nodes", str(nodes)]
    with log_path.open("wb") as log_file:
        return subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, preexec_fn=_die_with_parent)


def wait_for_sandbox(process: subprocess.Popen[bytes], log_path: Path, stop: StopSignal,
                     timeout: float = SANDBOX_START_TIMEOUT) -> str | None:
    """None once the sandbox is serving; otherwise why not."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if READY_LINE in log_path.read_text(errors="replace"):
            return None
        if process.poll() is not None:
            return f"the sandbox exited with code {process.returncode}:\n{_tail(log_path)}"
        if stop.wait(0.1):
            return "interrupted"
    return f"the sandbox did not start within {timeout:.0f}s:\n{_tail(log_path)}"


def stop_sandbox(process: subprocess.Popen[bytes], timeout: float = 15.0) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(5.0)


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def run(args: argparse.Namespace) -> int:
    if args.time_factor <= 0:
        print("kaiwo-ray dev: --time-factor must be greater than 0", file=sys.stderr)
        return 2
    if args.clock_origin is not None and not args.scaled_clock:
        print("kaiwo-ray dev: --clock-origin needs --scaled-clock", file=sys.stderr)
        return 2
    if args.health_interval <= 0:
        print("kaiwo-ray dev: --health-interval must be greater than 0", file=sys.stderr)
        return 2
    try:
        batch = batch_wanted(os.environ)  # read before anything starts: a wrong value fails here, first
    except ValueError as exc:
        print(f"kaiwo-ray dev: {exc}", file=sys.stderr)
        return 2
    nodes: Path | None = None
    if args.nodes is not None:
        from kaiwo_ray.manifests import ManifestReadError
        from kaiwo_ray.nodes import load_nodes

        nodes = args.nodes.expanduser().resolve()
        try:
            load_nodes(str(nodes))  # fail here, with the file's problem, rather than in the subprocess
        except (ManifestReadError, OSError) as exc:
            print(f"kaiwo-ray dev: --nodes {args.nodes}: {exc}", file=sys.stderr)
            return 2
    kubeconfig = args.kubeconfig.expanduser().resolve()
    try:
        kubeconfig.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"kaiwo-ray dev: cannot create {kubeconfig.parent}: {exc}", file=sys.stderr)
        return 2
    with StopSignal() as stop:
        return _run(kubeconfig, nodes, args, stop, batch)


def _scale_clock(time_factor: float, origin: float | None) -> float:
    """Put this process, and the Ray workers it starts (they inherit the environment), on the cluster's
    scaled clock (from `origin`, or from now); returns the origin the sandbox is given too."""
    from kaiwo_ray import clock

    scale = clock.Scale(float(int(time.time())) if origin is None else origin, time_factor)
    os.environ[clock.SCALE_ENV] = scale.encode()
    clock.set_scale(scale)
    return scale.origin


def _admin_identity(kubeconfig: Path) -> Path | None:
    """As deploy/base gives the admin API its own ServiceAccount: provisioned in the sandbox, and a
    kubeconfig beside the sandbox's that authenticates as it (None, said, when that failed: the admin API
    then runs with the sandbox's admin credentials)."""
    from serve.admin_identity import provision_local

    try:
        return provision_local(kubeconfig, kubeconfig.parent / "admin-api.kubeconfig")
    except Exception as err:
        print(f"admin API identity not provisioned: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
        return None


def _run(kubeconfig: Path, nodes: Path | None, args: argparse.Namespace, stop: StopSignal, batch: bool) -> int:
    from kaiwo_ray.controllers.manager import HostSettings, default_controller_names

    log_path = kubeconfig.parent / "sandbox.log"
    began = time.monotonic()
    origin = _scale_clock(args.time_factor, args.clock_origin) if args.scaled_clock else None
    sandbox = spawn_sandbox(kubeconfig, nodes, args.time_factor, args.port, log_path, args.local_images,
                            bool(getattr(args, "local_commands", False)), origin)
    started_ray = False
    supervisor = None
    fleet = None
    try:
        problem = wait_for_sandbox(sandbox, log_path, stop)
        if problem == "interrupted":
            return 0
        if problem is not None:
            print(f"kaiwo-ray dev: {problem}", file=sys.stderr)
            return 1
        print(f"Sandbox cluster is up (log: {log_path}); starting Ray...", flush=True)

        from actors.supervisor import StartInterrupted, Supervisor, SupervisorError, init_ray

        try:
            started_ray = init_ray(None, namespace="kaiwo", num_cpus=2)
        except Exception as err:  # Ray raises a plain Exception when its node does not come up
            print(f"kaiwo-ray dev: cannot start Ray: {err}", file=sys.stderr)
            return 1
        stop.install()
        if stop.event.is_set():
            return 0
        host = HostSettings(kubeconfig=str(kubeconfig), tune_gc=True, batch_scheduling=batch)
        if not args.no_webhooks:
            # as deploy/components/webhooks: what the webhooks label is tracked by a KaiwoJob/KaiwoService
            os.environ.setdefault("MANAGED_WORKLOADS_ENABLED", "true")
        problem = telemetry_flags.configure(args, host)
        if problem is not None:
            print(f"kaiwo-ray dev: {problem}", file=sys.stderr)
            return 2
        fleet = telemetry_flags.start_fleet(args, host, "kaiwo", detached=False)
        supervisor = Supervisor(host, default_controller_names(host), namespace="kaiwo")
        try:
            rows = supervisor.start(interrupted=stop.event.is_set)
        except StartInterrupted:
            supervisor = None
            return 0
        except SupervisorError as err:
            supervisor = None
            print(f"kaiwo-ray dev: controllers failed to start: {err}", file=sys.stderr)
            return 1
        print(format_health(rows), flush=True)
        from serve.aggregated_local import free_port, register_local
        from serve.cli_hooks import start_from_cli, stop_admin

        aggregated_port = free_port()
        admin_kubeconfig = _admin_identity(kubeconfig) if not getattr(args, "no_admin", False) else None
        admin_url = start_from_cli(args, kubeconfig=str(admin_kubeconfig or kubeconfig), in_cluster=False,
                                   ray_namespace="kaiwo", aggregated_port=aggregated_port)
        if admin_url is not None:
            try:  # as deploy/components/aggregated-api: the admin API through the Kubernetes API
                register_local(str(kubeconfig), aggregated_port)
                print("Admin API through the Kubernetes API: kubectl get workloadsummaries -A "
                      "(APIService v1alpha1.admin.kaiwo.silogen.ai)", flush=True)
            except Exception as err:
                print(f"aggregated admin API not registered: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
            from kaiwo_ray.cli.admin_link import advertise

            advertise(kubeconfig, admin_url)  # `kaiwo monitor` finds the telemetry through it
        webhooks = None
        if not args.no_webhooks:
            from serve.webhook_local import start_local

            try:
                webhooks = start_local(str(kubeconfig), port=args.webhooks_port)
                print(f"Admission webhooks: {webhooks.url} (registered as Service "
                      "kaiwo-system/kaiwo-ray-webhooks)", flush=True)
            except Exception as err:  # the operator runs on without them; say why
                print(f"admission webhooks not started: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
        print(format_memory(process_tree_memory()), flush=True)
        print(f"(started in {time.monotonic() - began:.1f}s)", flush=True)
        print(next_steps(kubeconfig, admin_url), flush=True)

        from hosts.cli.up import stop_supervisor, supervise

        supervise(supervisor, stop, args.health_interval)
        if admin_url is not None:
            with contextlib.suppress(Exception):
                stop_admin()
        stop_supervisor(supervisor, 10.0, sys.stdout)
        supervisor = None
        if webhooks is not None:  # after the controllers: their last Job writes still pass the webhooks
            webhooks.stop()
        return 0
    finally:
        if supervisor is not None:
            with contextlib.suppress(Exception):
                supervisor.stop(grace_seconds=2.0)
        telemetry_flags.stop_fleet(fleet)
        if started_ray:
            import ray

            ray.shutdown()
        stop_sandbox(sandbox)
        print("Stopped: controllers, Ray and the sandbox.", flush=True)
