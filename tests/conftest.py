"""Root of the test suite: the sandbox's pytest plugin (fixtures `sandbox`, `sandbox_factory`,
`eventually`), the world every sandbox starts with here (Kaiwo's CRDs and default nodes, which the
sandbox does not know by itself), and the hypothesis profiles.

Hypothesis: `dev` (the default) keeps property tests quick on a loaded two-core machine; `ci` (chosen
when the CI environment variable is set) runs more examples. A test that needs a different count
says so with its own `@settings`, only where the reason is specific to it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from kaiwo_ray.api.crd import all_crds
from kaiwo_ray.nodes import default_nodes
from kaiwo_sandbox.testing import use_world

pytest_plugins = ["kaiwo_sandbox.pytest_plugin"]

settings.register_profile("dev", max_examples=100, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", max_examples=200, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI") else "dev")

use_world(crds=all_crds(), nodes=default_nodes())


@pytest.fixture(autouse=True)
def _default_cpu_class() -> Iterator[None]:
    """Each test starts in the default CPU scheduling class. A controller host asks for SCHED_BATCH on
    the thread it runs on (hosts.runtime.cpu_policy), and `kaiwo-ray up --no-ray` run in this process
    hosts them on pytest's own thread; the class is per thread and inherited by every thread started
    later, so without this one test would change the timing of all the tests after it."""
    yield
    if hasattr(os, "sched_getscheduler") and os.sched_getscheduler(0) != os.SCHED_OTHER:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
