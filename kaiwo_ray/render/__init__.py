"""Pure translation of KaiwoJob/KaiwoService into the Kubernetes objects that run them.

Layering: `api` (models) <- `render` (this package, pure) <- `reconcile` (decides when to create what).
Public surface:

- `render_all` / `render_storage` / `render_main`: children as plain wire-format dicts, in creation order.
- `resource_config` (§3 numbers), `workload_gpu_check` / `gpu_schedulability` (Schedulable's GPU part).
- `has_downloads`, `main_kind`, `effective_queue`: facts the reconciler needs without rendering.
- `RenderError`: a manifest that cannot become valid children; `str()` names the field.
"""

from __future__ import annotations

from kaiwo_ray.render.context import effective_queue, resource_config, workload_gpu_check
from kaiwo_ray.render.errors import RenderError
from kaiwo_ray.render.gpus import (
    GpuCheck,
    GpuStats,
    ResourceConfig,
    compute_resource_config,
    gpu_resource_key,
    gpu_schedulability,
    gpu_stats,
)
from kaiwo_ray.render.names import name_with_postfix, sanitize_rfc1123
from kaiwo_ray.render.storage import has_downloads
from kaiwo_ray.render.workload import (
    main_kind,
    main_of,
    prepare,
    render_all,
    render_main,
    render_storage,
    storage_of,
)

__all__ = [
    "GpuCheck",
    "GpuStats",
    "RenderError",
    "ResourceConfig",
    "compute_resource_config",
    "effective_queue",
    "gpu_resource_key",
    "gpu_schedulability",
    "gpu_stats",
    "has_downloads",
    "main_kind",
    "main_of",
    "name_with_postfix",
    "prepare",
    "render_all",
    "render_main",
    "render_storage",
    "resource_config",
    "sanitize_rfc1123",
    "storage_of",
    "workload_gpu_check",
]
