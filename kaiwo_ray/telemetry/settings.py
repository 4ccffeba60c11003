"""Settings of the telemetry actors and aggregator (passed from `kaiwo-ray up|dev` to the actors)."""

from __future__ import annotations

from dataclasses import dataclass, field

AGGREGATOR_NAME = "gpu-telemetry-aggregator"
ACTOR_PREFIX = "gpu-telemetry-"
# Nodes are sampled at the middle of each interval of the operator's clock (interval * (k + 1/2)): half an
# interval away from the controllers' polls (at whole multiples), so a poll never races the sample of its
# own moment, and a simulation (kaiwo_ray.telemetry.sources.SamplingSource with an interval) can tell
# which sample a live poll would have read.
SAMPLE_PHASE = 0.5


@dataclass(slots=True)
class TelemetrySettings:
    backend: str = "auto"  # auto | nvidia | amd | sandbox | none
    interval: float = 1.0  # seconds between samples
    stale_after: float = 0.0  # seconds without a sample before a node's GPUs are unknown; 0: 3 x interval + 2
    kubeconfig: str | None = None  # the sandbox backend reads the simulated GPUs through the API server
    in_cluster: bool = False
    podresources_socket: str = "/var/lib/kubelet/pod-resources/kubelet.sock"
    metrics_host: str = "127.0.0.1"
    metrics_port: int | None = 0  # the aggregator's /metrics; 0: any free port, None: not served
    reconcile_interval: float = 2.0  # how often the fleet compares actors with the live Ray nodes
    # Only Ray nodes offering this custom resource get a telemetry actor (deploy/: `kaiwo_gpu_telemetry`,
    # from the gpu-telemetry worker group's rayStartParams: one actor per GPU node, none on the head);
    # empty: every node (`kaiwo-ray up|dev`).
    node_resource: str = ""
    # Ray resources the aggregator asks for (deploy/: the head's, beside the controllers).
    aggregator_resources: dict[str, float] = field(default_factory=dict)

    @property
    def effective_stale_after(self) -> float:
        return self.stale_after if self.stale_after > 0 else 3 * self.interval + 2.0


def actor_name(ray_node_id: str) -> str:
    return f"{ACTOR_PREFIX}{ray_node_id[:16]}"
