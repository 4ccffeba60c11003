"""GPU telemetry measured at the source: device backends (NVML, AMD SMI, sandbox, none), pod
attribution (kubelet PodResources, cgroups), the aggregator's bounded history and its metrics.

Layering: this package depends only on `kaiwo_ray.api`-level models and the standard library (plus
the optional vendor modules, imported lazily); the Ray actors that run it live in `actors/telemetry.py`.
"""
