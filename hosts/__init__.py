"""The host layer's own code: what runs the kaiwo-ray library as a process.

- `hosts.cli`: the `kaiwo-ray` console script (`main`) and its hosting commands — `up` (the
  operator against a cluster), `dev` (sandbox + local Ray + operator), `sandbox` — with their
  telemetry flags. They start `actors/` and `serve/`.
- `hosts.runtime`: what `actors/`, `serve/` and the commands share about running a process: the
  controller host and in-process `Operator`, the health report and signal handling
  (`operator_runtime`), the garbage-collector settings (`gc_tuning`) and the CPU scheduling class
  (`cpu_policy`).

Arrows point down: hosts.cli -> actors, serve -> hosts.runtime -> kaiwo_ray (lint-imports checks it);
the library never imports a host.
"""
