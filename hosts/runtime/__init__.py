"""Running the operator in a process: the controller host, health and signals, GC and CPU policy.
Imported by `actors/`, `serve/` and `hosts.cli`; imports nothing of theirs."""
