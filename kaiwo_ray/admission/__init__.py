"""Admission (pure): AdmissionReview requests in, verdicts out. Validation of Kaiwo's own kinds
(`kaiwo.py`) and the labels and defaults that bring plain Jobs, Deployments, RayJobs and RayServices
under Kaiwo (`workloads.py`). Nothing here reads or writes the cluster: admission has no side
effects, so a dry run or a retried request changes nothing (upstream's webhooks create objects)."""
