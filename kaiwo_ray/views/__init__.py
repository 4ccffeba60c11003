"""Pure read models over plain Kubernetes objects, shared by the admin API (serve/) and the CLI.

Every function here takes dicts as the API server returns them and gives typed pydantic models:
no I/O, no caches, no clocks unless passed in. Layering: imports kaiwo_ray.api only.
"""
