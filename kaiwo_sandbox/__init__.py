"""A Kubernetes API sandbox: an in-process server that the official clients and kubectl use unchanged.

Layers (arrows point one way; docs/sandbox.md has the full map):
    types      -- shared contracts: GVR, ApiError, WatchEvent, the Store protocol, Clock
    pure modules (selectors, patching, apply, schema, metadata, builtin_*, tables, strategies, scale)
    registry   -- what is served: built-in kinds and CRDs
    store, gc  -- the object store with a real apiserver's semantics, garbage collection; no HTTP
    server     -- HTTPS/JSON front end over the store (aiohttp): auth, audit, faults, watches
    instance   -- one running sandbox (store + server + cluster + persistence); testing, cli
    cluster/   -- simulated cluster controllers (scheduler, kubelet, Job, Kueue, KubeRay, ...)
"""
