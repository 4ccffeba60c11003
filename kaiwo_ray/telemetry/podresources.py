"""A client of the kubelet PodResources API v1 (`List`), the way the DCGM and AMD exporters learn
which pod and container holds which device.

The messages are built from protobuf descriptors at import (mirroring `podresources_v1.proto` in
this folder, field for field) instead of generated code: no protoc step, nothing generated to keep
in sync or out of mypy. Unknown fields of newer kubelets are skipped by protobuf, as in any client.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

KUBELET_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
SERVICE = "v1.PodResourcesLister"
LIST_METHOD = f"/{SERVICE}/List"

_F = descriptor_pb2.FieldDescriptorProto
_STRING, _INT64, _UINT64, _MESSAGE = _F.TYPE_STRING, _F.TYPE_INT64, _F.TYPE_UINT64, _F.TYPE_MESSAGE
_ONE, _MANY = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED

# message -> [(field, number, label, type, message type name)]; the .proto file says the same.
_MESSAGES: dict[str, list[tuple[str, int, int, int, str]]] = {
    "AllocatableResourcesRequest": [],
    "AllocatableResourcesResponse": [("devices", 1, _MANY, _MESSAGE, "ContainerDevices"),
                                     ("cpu_ids", 2, _MANY, _INT64, ""),
                                     ("memory", 3, _MANY, _MESSAGE, "ContainerMemory")],
    "ListPodResourcesRequest": [],
    "ListPodResourcesResponse": [("pod_resources", 1, _MANY, _MESSAGE, "PodResources")],
    "PodResources": [("name", 1, _ONE, _STRING, ""), ("namespace", 2, _ONE, _STRING, ""),
                     ("containers", 3, _MANY, _MESSAGE, "ContainerResources")],
    "ContainerResources": [("name", 1, _ONE, _STRING, ""), ("devices", 2, _MANY, _MESSAGE, "ContainerDevices"),
                           ("cpu_ids", 3, _MANY, _INT64, ""), ("memory", 4, _MANY, _MESSAGE, "ContainerMemory")],
    "ContainerMemory": [("memory_type", 1, _ONE, _STRING, ""), ("size", 2, _ONE, _UINT64, ""),
                        ("topology", 3, _ONE, _MESSAGE, "TopologyInfo")],
    "ContainerDevices": [("resource_name", 1, _ONE, _STRING, ""), ("device_ids", 2, _MANY, _STRING, ""),
                         ("topology", 3, _ONE, _MESSAGE, "TopologyInfo")],
    "TopologyInfo": [("nodes", 1, _MANY, _MESSAGE, "NUMANode")],
    "NUMANode": [("ID", 1, _ONE, _INT64, "")],
}


def _build() -> dict[str, Any]:
    file = descriptor_pb2.FileDescriptorProto(name="kaiwo_ray/podresources/v1/api.proto", package="v1",
                                              syntax="proto3")
    for message, fields in _MESSAGES.items():
        proto = file.message_type.add(name=message)
        for name, number, label, kind, type_name in fields:
            field = proto.field.add(name=name, number=number, label=label, type=kind)
            if type_name:
                field.type_name = f".v1.{type_name}"
            field.json_name = name  # as protoc would: snake_case stays
    service = file.service.add(name="PodResourcesLister")
    service.method.add(name="List", input_type=".v1.ListPodResourcesRequest",
                       output_type=".v1.ListPodResourcesResponse")
    service.method.add(name="GetAllocatableResources", input_type=".v1.AllocatableResourcesRequest",
                       output_type=".v1.AllocatableResourcesResponse")
    pool = descriptor_pool.DescriptorPool()  # private: never clashes with another copy of this API
    built = pool.Add(file)
    return {name: message_factory.GetMessageClass(built.message_types_by_name[name]) for name in _MESSAGES}


MESSAGES = _build()
ListPodResourcesRequest = MESSAGES["ListPodResourcesRequest"]
ListPodResourcesResponse = MESSAGES["ListPodResourcesResponse"]


@dataclass(frozen=True, slots=True)
class DeviceAllocation:
    """One device id of one extended resource, allocated to one container."""

    namespace: str
    pod: str
    container: str
    resource: str
    device_id: str


class PodResourcesError(RuntimeError):
    """The kubelet's PodResources API could not be asked (no socket, no permission, timeout)."""


def list_allocations(socket_path: str = KUBELET_SOCKET, *, timeout: float = 2.0,
                     resource_prefixes: tuple[str, ...] = ("nvidia.com/", "amd.com/")) -> list[DeviceAllocation]:
    """`List` on the kubelet socket: every device of the given resource prefixes and who holds it."""
    target = socket_path if socket_path.startswith("unix:") else f"unix://{socket_path}"
    try:
        with grpc.insecure_channel(target) as channel:
            call = channel.unary_unary(LIST_METHOD, request_serializer=ListPodResourcesRequest.SerializeToString,
                                       response_deserializer=ListPodResourcesResponse.FromString)
            response = call(ListPodResourcesRequest(), timeout=timeout)
    except grpc.RpcError as err:
        code = err.code() if hasattr(err, "code") else None
        details = err.details() if hasattr(err, "details") else str(err)
        raise PodResourcesError(f"PodResources List on {socket_path}: {code}: {details}") from err
    return allocations_of(response, resource_prefixes)


def allocations_of(response: Any, resource_prefixes: tuple[str, ...]) -> list[DeviceAllocation]:
    found: list[DeviceAllocation] = []
    for pod in response.pod_resources:
        for container in pod.containers:
            for devices in container.devices:
                if not devices.resource_name.startswith(resource_prefixes):
                    continue
                found.extend(DeviceAllocation(pod.namespace, pod.name, container.name, devices.resource_name, did)
                             for did in devices.device_ids)
    return found
