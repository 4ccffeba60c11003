"""What-if simulation: the workload trace format, synthetic traces, and the report of a replay (pure)."""
