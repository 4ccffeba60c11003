"""What `pip install kaiwo-ray` brings: the operator with its runtime dependencies, and the sandbox's
code without the sandbox's dependencies (those come with the `sandbox` extra, which `dev` includes).

The import check runs a fresh interpreter in which the sandbox-only distributions cannot be imported
(as after `pip install .` with no extras) and imports every operator module."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from importlib.metadata import requires
from pathlib import Path

from packaging.requirements import Requirement
from setuptools import find_packages

ROOT = Path(__file__).resolve().parents[1]
SANDBOX_ONLY = ("cryptography", "uvloop")

# Blocks the sandbox-only distributions in a child interpreter and records which of our modules asked
# for them (a library that tries one optionally, as uvicorn tries uvloop, is not ours to judge).
BLOCKER = """
import importlib.abc, json, sys
BLOCKED = set(json.loads(sys.argv[1]))
OURS = ("kaiwo_ray", "actors", "kaiwo_sandbox", "hosts")
asked = []
class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] not in BLOCKED:
            return None
        frame = sys._getframe(1)
        while frame is not None and (frame.f_code.co_filename.startswith("<frozen")
                                     or "importlib" in frame.f_code.co_filename):
            frame = frame.f_back
        importer = frame.f_globals.get("__name__", "") if frame is not None else ""
        if importer.partition(".")[0] in OURS:
            asked.append(f"{importer} imports {name}")
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Absent())
"""


def _requirements() -> list[Requirement]:
    return [Requirement(text) for text in requires("kaiwo-ray") or []]


def _names(extra: str | None) -> set[str]:
    env = {"extra": extra or ""}
    return {r.name.lower() for r in _requirements()
            if r.marker is None or (extra is not None and r.marker.evaluate(env))
            or (extra is None and r.marker.evaluate({"extra": ""}))}


def test_the_operator_does_not_require_the_sandbox_dependencies() -> None:
    base = _names(None)
    assert base, "no runtime requirements found: is kaiwo-ray installed (make install)?"
    assert not base & set(SANDBOX_ONLY), base
    assert "psutil" in base  # the operator samples its own process
    assert set(SANDBOX_ONLY) <= _names("sandbox")
    assert any(r.name == "kaiwo-ray" and "sandbox" in r.extras for r in _requirements()
               if r.marker is not None and r.marker.evaluate({"extra": "dev"}))


def test_the_distribution_ships_every_sandbox_package() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    found = set(find_packages(str(ROOT), include=config["tool"]["setuptools"]["packages"]["find"]["include"]))
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "kaiwo_sandbox").rglob("__init__.py")}
    assert len(on_disk) > 5
    assert on_disk <= found, sorted(on_disk - found)


def test_every_operator_module_imports_without_the_sandbox_dependencies() -> None:
    script = BLOCKER + """
import importlib, pkgutil
import kaiwo_ray, actors, hosts
names = []
for package in (kaiwo_ray, actors, hosts):
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        importlib.import_module(info.name)
        names.append(info.name)
print(json.dumps({"asked": asked, "imported": names}))
"""
    result = subprocess.run([sys.executable, "-c", script, json.dumps(SANDBOX_ONLY)], capture_output=True,
                            text=True, cwd=ROOT, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert "kaiwo_ray.controllers.manager" in report["imported"]
    assert "actors.controller" in report["imported"]
    assert report["asked"] == []


def test_the_sandbox_command_without_its_extra_says_how_to_get_it(tmp_path: Path) -> None:
    script = BLOCKER + """
from hosts.cli.main import main
raise SystemExit(main(["sandbox", "--kubeconfig", sys.argv[2]]))
"""
    result = subprocess.run([sys.executable, "-c", script, json.dumps(SANDBOX_ONLY), str(tmp_path / "kc")],
                            capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 2, result.stderr[-3000:]
    assert "pip install 'kaiwo-ray[sandbox]'" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
