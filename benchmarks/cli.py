"""The `kaiwo` CLI's speed beside kubectl, measured in one run on the same machine.

    start-up: `kaiwo --help` and `kaiwo version` (target <= 150 ms) beside `kubectl version --client`
    stack:    importing the CLI's HTTP stack (`kaiwo_ray.cli.api`, urllib3) beside the operator's
              (`kaiwo_ray.kube.client`, kubernetes.aio + aiohttp): what one CLI command would pay at
              start-up for sharing the operator's client, the reason the CLI keeps its own transport
              (both address resources through the same `kube.resources.Resource` table)
    listing:  `kaiwo list jobs -A` vs `kubectl get kaiwojobs -A` over N KaiwoJobs in the sandbox
              (target: kaiwo <= 1.5x kubectl); default N=2000, `--scale 10000` for the issue's figure.

Medians of alternating runs; each client is a fresh process, as a user types it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

KAIWO = str(Path(sys.executable).parent / "kaiwo")
START_TARGET_MS = 150.0
LIST_TARGET_RATIO = 1.5


def timed(argv: list[str], env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=600)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.decode()[-500:]}")
    return elapsed


def sample(commands: dict[str, list[str]], repeats: int, env: dict[str, str] | None = None) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(repeats):  # alternate, so a noisy moment hits every party alike
        for name, argv in commands.items():
            samples[name].append(timed(argv, env))
    return samples


def medians(commands: dict[str, list[str]], repeats: int, env: dict[str, str] | None = None) -> dict[str, float]:
    return {name: statistics.median(values) for name, values in sample(commands, repeats, env).items()}


def populate(sb: object, count: int) -> None:
    from kaiwo_sandbox.contracts import GVR

    kaiwojobs = GVR("kaiwo.silogen.ai", "v1alpha1", "kaiwojobs")
    namespaces = [f"team-{i}" for i in range(10)]

    def create_batch(start: int, stop: int) -> None:
        store = sb.store  # type: ignore[attr-defined]
        for i in range(start, stop):
            ns = namespaces[i % len(namespaces)]
            store.create(kaiwojobs, {
                "apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": "KaiwoJob",
                "metadata": {"name": f"job-{i:05d}", "namespace": ns, "labels": {"team": ns}},
                "spec": {"user": f"user{i % 37}@example.com", "image": "ghcr.io/silogen/rocm-ray:6.4",
                         "gpus": 8 * (i % 3), "clusterQueue": "kaiwo", "entrypoint": "python train.py --epochs 3",
                         "env": [{"name": "SEED", "value": str(i)}]},
                "status": {"status": ("RUNNING", "PENDING", "COMPLETE")[i % 3]}}, namespace=ns)

    from kaiwo_sandbox.contracts import NAMESPACES

    for ns in namespaces:
        sb.call(sb.store.create, NAMESPACES, {"metadata": {"name": ns}})  # type: ignore[attr-defined]
    for start in range(0, count, 500):
        sb.call(create_batch, start, min(count, start + 500), timeout=120)  # type: ignore[attr-defined]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=int, default=2000, help="KaiwoJobs in the sandbox (default 2000)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    kubectl = shutil.which("kubectl")

    start = {"kaiwo --help": [KAIWO, "--help"], "kaiwo version": [KAIWO, "version"]}
    if kubectl:
        start["kubectl version --client"] = [kubectl, "version", "--client"]
    start["python -c pass"] = [sys.executable, "-c", "pass"]  # the interpreter's own floor
    samples = sample(start, max(args.repeats, 9))
    for name, values in samples.items():
        target = f" (target <= {START_TARGET_MS:.0f} ms)" if name.startswith("kaiwo") else " (baseline)"
        print(f"start_time[{name}]: median {statistics.median(values) * 1000:.0f} ms, "
              f"best {min(values) * 1000:.0f} ms{target}")

    stacks = {"cli stack (kaiwo_ray.cli.api)": [sys.executable, "-c", "import kaiwo_ray.cli.api"],
              "operator stack (kaiwo_ray.kube.client)": [sys.executable, "-c", "import kaiwo_ray.kube.client"]}
    imports = medians(stacks, max(args.repeats, 9))
    for name, seconds in imports.items():
        print(f"import_time[{name}]: median {seconds * 1000:.0f} ms")
    cli_s, operator_s = imports.values()
    print(f"import_cost_of_sharing: +{(operator_s - cli_s) * 1000:.0f} ms per CLI command "
          f"({operator_s / cli_s:.1f}x the CLI's own stack; a figure, no target)")

    if not kubectl:
        print("list_ratio: skipped (kubectl not installed: make tools)")
        return 0
    from kaiwo_ray.api.crd import all_crds
    from kaiwo_sandbox.testing import start_sandbox

    with start_sandbox(nodes=[], extra_crds=list(all_crds())) as sb:  # the sandbox knows no Kaiwo kinds itself
        populate(sb, args.scale)
        env = {**os.environ, "KUBECONFIG": str(sb.kubeconfig_path)}
        listing = {"kaiwo list jobs -A": [KAIWO, "list", "jobs", "-A"],
                   "kubectl get kaiwojobs -A": [kubectl, "get", "kaiwojobs", "-A"]}
        figures = medians(listing, args.repeats, env)
    for name, seconds in figures.items():
        print(f"list_time[{name}, {args.scale} KaiwoJobs]: {seconds * 1000:.0f} ms")
    ratio = figures["kaiwo list jobs -A"] / figures["kubectl get kaiwojobs -A"]
    print(f"list_ratio: {ratio:.2f}x kubectl (target <= {LIST_TARGET_RATIO})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
