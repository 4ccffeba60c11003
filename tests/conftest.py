"""Root of the test suite: the sandbox's pytest plugin (fixtures `sandbox`, `sandbox_factory`,
`eventually`), the world every sandbox starts with here (Kaiwo's CRDs and default nodes, which the
sandbox does not know by itself), and the hypothesis profiles.

Hypothesis: `dev` (the default) keeps property tests quick on a loaded two-core machine; `ci` (chosen
when the CI environment variable is set) runs more examples. A test that needs a different count
says so with its own `@settings`, only where the reason is specific to it.
"""

from __future__ import annotations

import os

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
