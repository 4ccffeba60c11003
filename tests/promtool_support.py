"""`promtool check metrics`, the Prometheus project's own parser (Debian's `prometheus` package,
installed by `make promtool`): what a real Prometheus rejects, it rejects."""

from __future__ import annotations

import shutil
import subprocess

import pytest

PROMTOOL = shutil.which("promtool")

needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (make promtool)")


def promtool_check(text: str) -> tuple[int, str]:
    """Exit status and output of `promtool check metrics` on `text`: 0 clean, 3 parsed with lint
    findings (naming advice), 1 rejected (`error while linting: text format parsing error ...`)."""
    assert PROMTOOL is not None
    done = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60,
                          check=False)
    return done.returncode, done.stdout + done.stderr


def assert_scrapeable(text: str) -> None:
    status, output = promtool_check(text)
    assert "error while linting" not in output and "parsing error" not in output, output
    assert status in (0, 3), output
