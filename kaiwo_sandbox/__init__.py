"""A Kubernetes API sandbox: an in-process server that the official clients and kubectl use unchanged.

Layers, lowest first (`make lint` checks that imports point down only; docs/sandbox.md has the map):
    contracts   -- GVR, ResourceInfo, ApiError, WatchEvent, the Store protocol, Clock
    semantics/  -- pure apiserver semantics, no I/O: selectors, patching, apply, schema, metadata,
                   strategies, builtin/ (the built-in kinds), quantity and time parsing
    registry    -- what is served: the built-in table and CRDs -> ResourceInfo
    storage/    -- ObjectStore (verbs, write pipeline) over tables (objects, indexes), fanout (history,
                   watchers), admission; subresources, snapshot and persistence, garbage collection,
                   Event expiry; no HTTP
    runtime/    -- real pods on this machine (`--local-image`, `--local-commands`): network namespaces,
                   processes, probes
    apiserver/  -- the HTTPS/JSON front end over the store: fastpath, routes, auth/, streams/, audit,
                   faults | cluster/ -- simulated controllers (scheduler, kubelet, Job, Kueue, KubeRay, ...)
    instance    -- one running sandbox (store + server + cluster + persistence)
    testing     -- start_sandbox() / RunningSandbox for tests (pytest_plugin: the fixtures)
"""
