"""I/O with the Kubernetes API: a typed resource table, a raw-JSON async client over the official
`kubernetes` package, list+watch informers with caches, and rate-limited work queues."""
