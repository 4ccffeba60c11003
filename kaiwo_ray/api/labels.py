"""The labels and annotations kaiwo-ray writes or reads on objects: one declaration of each name, for the
renderers, the reconcilers, the admission webhooks, telemetry, the views, the admin API and the CLI."""

from __future__ import annotations

# Kaiwo's own, on a workload and on everything rendered for it.
LABEL_USER = "kaiwo.silogen.ai/user"
LABEL_NAME = "kaiwo.silogen.ai/name"
LABEL_TYPE = "kaiwo.silogen.ai/type"
LABEL_RUN_ID = "kaiwo.silogen.ai/run-id"  # the workload's uid
LABEL_MANAGED = "kaiwo.silogen.ai/managed"  # "true": a plain Job or Deployment that Kaiwo queues
SUBMITTED_BY = "kaiwo.silogen.ai/submitted-by"  # annotation: who created the workload (the admission webhook)

# Kueue's.
LABEL_QUEUE = "kueue.x-k8s.io/queue-name"
LABEL_PRIORITY = "kueue.x-k8s.io/priority-class"
ANNOTATION_REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
ANNOTATION_PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
