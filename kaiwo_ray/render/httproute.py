"""KaiwoService -> Gateway API `gateway.networking.k8s.io/v1` HTTPRoute, where its namespace's
AIMNamespaceConfig names a `gateway` (seed 004: the gateway "to use for exposure and routing").

The route is the service's child (controller ownerReference), named like it, attached to that Gateway
(cross-namespace parentRefs need no ReferenceGrant; the Gateway's listeners must admit the namespace),
matching every path and sending it to the Ray Serve Service KubeRay creates for the RayService
(`<name>-serve-svc`, port 8000). A Deployment KaiwoService has no Service to route to (neither kaiwo-ray
nor upstream creates one), so it gets no route (docs/compatibility.md). The Gateway API's CRD defaults
(parentRef group/kind, backendRef group/kind/weight, the PathPrefix `/` match) are written out, so the
object as stored equals the object as rendered.
"""

from __future__ import annotations

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.workloads import KaiwoService
from kaiwo_ray.render.context import RenderContext, object_meta

GATEWAY_API_VERSION = "gateway.networking.k8s.io/v1"
SERVE_PORT = 8000


def serve_service_name(name: str) -> str:
    """KubeRay's Serve Service of RayService `name` (utils.GenerateServeServiceName)."""
    return f"{name}-serve-svc"


def render_httproute(ctx: RenderContext) -> JsonObj | None:
    """The route, or None: not a Ray KaiwoService, or no gateway configured for the namespace."""
    workload = ctx.workload
    ns = ctx.namespace_config
    gateway = ns.gateway if ns is not None else None
    if not isinstance(workload, KaiwoService) or not workload.spec.effective_uses_ray:
        return None
    if gateway is None or not gateway.name:
        return None
    parent: JsonObj = {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": gateway.name}
    if gateway.namespace or ctx.namespace:
        parent["namespace"] = gateway.namespace or ctx.namespace
    return {
        "apiVersion": GATEWAY_API_VERSION,
        "kind": "HTTPRoute",
        "metadata": object_meta(ctx, ctx.name, ctx.system_labels),
        "spec": {
            "parentRefs": [parent],
            "rules": [{
                "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                "backendRefs": [{"group": "", "kind": "Service", "name": serve_service_name(ctx.name),
                                 "port": SERVE_PORT, "weight": 1}],
            }],
        },
    }
