"""`kaiwo-ray doctor`: checks of a cluster for kaiwo-ray (checks.py pure, gather.py reads)."""
