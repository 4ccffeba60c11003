"""Every module imports on its own, first, in a fresh interpreter.

An import loop can pass unnoticed while every real entry point happens to import the modules in
the one order that works; the module a user (or a test) imports first then fails with a circular
ImportError. The import contracts (`lint-imports`) forbid loops between siblings; this checks the
modules themselves, one interpreter each, several at a time.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("kaiwo_ray", "kaiwo_sandbox", "actors", "serve", "hosts")


def _modules(package: str) -> list[str]:
    """The package's modules, found on disk: this process imports none of them."""
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        # only modules inside packages: every folder on the way has an __init__.py
        if not all((ROOT.joinpath(*parts[:depth]) / "__init__.py").is_file() for depth in range(1, len(parts))):
            continue
        if parts[-1] == "__main__":
            continue  # running it is the point of a __main__ module
        found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


def _import_alone(module: str) -> tuple[str, int, str]:
    result = subprocess.run([sys.executable, "-c", f"import {module}"], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    return module, result.returncode, result.stderr


@pytest.mark.slow
def test_every_module_imports_first_in_a_fresh_interpreter() -> None:
    modules = {package: _modules(package) for package in PACKAGES}
    assert all(package in found and len(found) > 1 for package, found in modules.items()), modules
    # The children spend their time importing (CPU): a couple per core keeps the cores busy.
    with ThreadPoolExecutor(max_workers=2 * (os.cpu_count() or 1)) as pool:
        results = list(pool.map(_import_alone, [m for found in modules.values() for m in found]))
    failed = {module: stderr.strip().splitlines()[-1:] for module, code, stderr in results if code != 0}
    assert not failed, failed
