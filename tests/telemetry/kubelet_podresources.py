"""A real gRPC server speaking the kubelet PodResources v1 `List` on a unix socket, for tests."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from concurrent import futures
from contextlib import contextmanager
from pathlib import Path

import grpc

from kaiwo_ray.telemetry.podresources import SERVICE, ListPodResourcesRequest, ListPodResourcesResponse

# (namespace, pod, container, resource, [device ids])
Allocation = tuple[str, str, str, str, list[str]]


def response_of(allocations: list[Allocation]) -> bytes:
    response = ListPodResourcesResponse()
    pods: dict[tuple[str, str], object] = {}
    for namespace, pod, container, resource, ids in allocations:
        entry = pods.get((namespace, pod))
        if entry is None:
            entry = pods[(namespace, pod)] = response.pod_resources.add(name=pod, namespace=namespace)
        box = entry.containers.add(name=container)  # type: ignore[attr-defined]
        box.cpu_ids.extend([2, 3])
        box.devices.add(resource_name=resource, device_ids=ids)
    return bytes(response.SerializeToString())


@contextmanager
def kubelet_socket(answer: Callable[[], bytes]) -> Iterator[Path]:
    """Serve `List` (its reply: whatever `answer()` returns, as wire bytes) on a fresh unix socket."""
    folder = Path(tempfile.mkdtemp(prefix="kubelet-", dir="/tmp"))  # unix socket paths max 107 bytes
    socket = folder / "kubelet.sock"
    calls: list[int] = []

    def list_pods(request: object, context: grpc.ServicerContext) -> bytes:
        calls.append(1)
        return answer()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    handler = grpc.unary_unary_rpc_method_handler(list_pods, request_deserializer=ListPodResourcesRequest.FromString,
                                                  response_serializer=lambda raw: raw)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, {"List": handler}),))
    server.add_insecure_port(f"unix://{socket}")
    server.start()
    try:
        yield socket
    finally:
        server.stop(grace=None)
        shutil.rmtree(folder, ignore_errors=True)
