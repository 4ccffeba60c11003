"""Controller shells: informers + caches + work queue around the pure decisions in `reconcile/`."""
