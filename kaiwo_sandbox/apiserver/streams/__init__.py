"""Pod streams: `pods/log`, `pods/exec` and `pods/portforward` over the websocket channel protocols
(and SPDY inside a websocket, for kubectl's port-forward), answered by a tiny pure shell that stands in
for the simulated containers (the sandbox runs no processes)."""
