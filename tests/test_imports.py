"""Every module imports on its own, first, in a fresh interpreter.

An import loop can pass unnoticed while every real entry point happens to import the modules in
the one order that works; the module a user (or a test) imports first then fails with a circular
ImportError. The import contracts (`lint-imports`) forbid loops between siblings; this checks the
modules themselves, each imported first in a child forked from an interpreter that holds only the
third-party packages the project uses (tests/_import_zygote.py): no project module is loaded before
the one under test, and the third-party import time is paid once per zygote, not once per module.
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


# Prints the top-level third-party packages that importing every project module pulls in; a project
# module that fails here is left to the per-module check below to report.
_THIRD_PARTY = """
import importlib, sys
project = set(sys.argv[1].split(","))
for module in sys.argv[2:]:
    try:
        importlib.import_module(module)
    except BaseException:
        pass
print("\\n".join(sorted({name for name in sys.modules
                          if "." not in name and name not in project and not name.startswith("_")})))
"""


def _third_party(modules: list[str], into: Path) -> None:
    result = subprocess.run([sys.executable, "-c", _THIRD_PARTY, ",".join(PACKAGES), *modules], cwd=ROOT,
                            capture_output=True, text=True, timeout=300, check=True)
    into.write_text(result.stdout)


def _import_each(preload: Path, modules: list[str]) -> list[str]:
    result = subprocess.run([sys.executable, str(ROOT / "tests" / "_import_zygote.py"), str(preload), *modules],
                            cwd=ROOT, capture_output=True, text=True, timeout=600)
    lines = result.stdout.splitlines()
    assert result.returncode == 0 and len(lines) == len(modules), result.stderr[-2000:]
    return lines


@pytest.mark.slow
def test_every_module_imports_first_in_a_fresh_interpreter(tmp_path: Path) -> None:
    modules = {package: _modules(package) for package in PACKAGES}
    assert all(package in found and len(found) > 1 for package, found in modules.items()), modules
    every = [m for found in modules.values() for m in found]
    preload = tmp_path / "third_party.txt"
    _third_party(every, preload)
    assert "pydantic" in preload.read_text().split(), "the preload list holds the project's dependencies"
    # One zygote per core: each child's import is CPU work.
    workers = max(1, os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = [line for lines in pool.map(_import_each, [preload] * workers,
                                                [every[i::workers] for i in range(workers)]) for line in lines]
    assert sorted(line.split()[1] for line in results) == sorted(every)
    failed = [line for line in results if not line.startswith("ok ")]
    assert not failed, failed
