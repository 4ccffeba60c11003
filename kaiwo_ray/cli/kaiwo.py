"""Entry point of the `kaiwo` console script: the user's commands only (the same as `kaiwo-ray COMMAND`).

Nothing heavy is imported here or in `kaiwo_ray.cli.main`: `kaiwo --help` and `kaiwo version`
never load the Kubernetes client, pydantic or Ray.
"""

from __future__ import annotations

import sys

from kaiwo_ray.cli.main import USER_COMMANDS
from kaiwo_ray.cli.main import main as _main


def main(argv: list[str] | None = None) -> int:
    return _main(argv, prog="kaiwo", commands=USER_COMMANDS)


if __name__ == "__main__":
    sys.exit(main())
