"""`spec.entrypoint`: one shell text that becomes a container command or a RayJob entrypoint."""

from __future__ import annotations

import re
from typing import Any

from kaiwo_ray.render.errors import RenderError

# A trailing backslash continues the line: `\` + optional whitespace + newline folds into one space.
_LINE_CONTINUATION = re.compile(r"\\\s*\n")
DEFAULT_SHELL = "/bin/sh"


def fold_entrypoint(entrypoint: str) -> str:
    """Trimmed text with line continuations folded; other newlines are kept (the script stays multi-line)."""
    return _LINE_CONTINUATION.sub(" ", entrypoint.strip())


def ray_entrypoint(entrypoint: str) -> str:
    """The RayJob `spec.entrypoint` string (a shebang line, if any, is left as is: Ray runs it via a shell)."""
    return fold_entrypoint(entrypoint)


def shell_command(entrypoint: str) -> list[str]:
    """Container `command` running the entrypoint as a script: `[shell..., "-c", script]`.

    A first line `#!<interpreter> [args]` picks the shell and is dropped from the script. Unlike
    upstream, the shebang is split into argv words, so `#!/usr/bin/env bash` runs `/usr/bin/env bash -c`
    instead of looking for an executable literally named `/usr/bin/env bash`.
    """
    script = fold_entrypoint(entrypoint)
    if script.startswith("#!"):
        first_line, _, rest = script.partition("\n")
        shell = first_line[2:].split() or [DEFAULT_SHELL]
        return [*shell, "-c", rest]
    return [DEFAULT_SHELL, "-c", script]


def apply_entrypoint(pod_spec: dict[str, Any], entrypoint: str | None, field: str) -> None:
    """Set the first container's `command` (its `args` stay, and become `$0...` of the script).

    Only an empty entrypoint changes nothing; like upstream, the emptiness check is on the raw text, so
    an all-whitespace one becomes `sh -c ""`. `field` names the template in errors.
    """
    if not entrypoint:
        return
    containers = pod_spec.get("containers")
    if not isinstance(containers, list) or not containers or not isinstance(containers[0], dict):
        raise RenderError(f"{field}.containers", "must list at least one container to run spec.entrypoint")
    containers[0]["command"] = shell_command(entrypoint)
