"""The `kaiwo-ray` command line."""
