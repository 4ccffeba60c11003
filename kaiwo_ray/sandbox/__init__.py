"""A Kubernetes API sandbox: an in-process server that the official clients and kubectl use unchanged.

Layers (arrows point one way):
    types      -- shared contracts: GVR, ApiError, WatchEvent, the Store protocol, Clock
    pure modules (selectors, patching, apply, schema, builtin_defaults, tables)
    store      -- the object store: semantics of a real apiserver, no HTTP
    server     -- HTTP/JSON front end over the store (aiohttp), auth, audit, faults
    cluster/   -- simulated cluster controllers (scheduler, kubelet, Job, Kueue, KubeRay, ...)
"""
