"""The `kaiwo-ray` console script (`main`): the library's commands (kaiwo_ray.cli) plus the hosting
commands `sandbox`, `dev` and `up`, which start the sandbox, Ray actors and the admin API."""
