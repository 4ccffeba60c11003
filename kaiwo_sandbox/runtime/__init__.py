"""Real processes for the pods of local images (`kaiwo-ray sandbox --local-image NAME`) and, with
`--local-commands`, for pods whose commands can run on this machine (`podspec.LOCAL_PROGRAMS`): the pod
network (`network`), what a container sees (`podspec`), starting and stopping processes
(`processes`) and probing them (`probes`). The kubelet (`cluster/nodes/realpods.py`) drives it; the
API server's log, exec, attach and port-forward streams read it. docs/sandbox.md says what runs and how.
"""
