"""The image definition: its Ray and Python versions are the locked ones (and deploy/'s), and the wheel it
installs, put alone in a clean directory, imports every module of kaiwo_ray, actors and serve without any
development dependency (and without the source tree)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
CONTAINERFILE = (REPO / "Containerfile").read_text()
# Stage `wheel` copies exactly these; the wheel is built from them alone.
SOURCES = ("pyproject.toml", "README.md", "kaiwo_ray", "kaiwo_sandbox", "actors", "serve", "hosts")


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;(]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def dev_only_modules(ours: list[str]) -> set[str]:
    """Top-level modules of the dev extra's distributions that the runtime requirements do not pull in
    (jsonschema is in the dev extra, but Ray needs it: it stays importable)."""
    import importlib.metadata as md

    def closure(names: set[str]) -> set[str]:
        seen: set[str] = set()
        todo = list(names)
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            try:
                requires = md.requires(name) or []
            except md.PackageNotFoundError:
                continue
            todo += [_name(r) for r in requires if "extra ==" not in r or "extra == \"serve\"" in r]
        return seen

    runtime = closure({_name(r) for r in ours if "extra ==" not in r})
    dev = {_name(r) for r in ours if 'extra == "dev"' in r}
    if "kaiwo-ray" in dev:  # [dev] names our own [sandbox] extra: block what that extra brings, not us
        dev = (dev - {"kaiwo-ray"}) | {_name(r) for r in ours if 'extra == "sandbox"' in r}
    blocked = closure(dev) - runtime
    modules = {m for m, dists in md.packages_distributions().items()
               if any(d.lower().replace("_", "-") in blocked for d in dists)}
    return modules | {"_pytest"}


def _arg(name: str) -> str:
    match = re.search(rf"^ARG {name}=(\S+)$", CONTAINERFILE, re.MULTILINE)
    assert match, f"Containerfile declares no ARG {name}"
    return match.group(1)


def test_ray_and_python_versions_are_the_locked_ones() -> None:
    lock = (REPO / "requirements.lock").read_text()
    ray = re.search(r"^ray==(\S+)$", lock, re.MULTILINE)
    python = re.search(r"--python-version (\d+\.\d+)", lock)
    assert ray and python
    assert _arg("RAY_VERSION") == ray.group(1)
    assert _arg("PYTHON_VERSION") == python.group(1)
    py_tag = "py" + python.group(1).replace(".", "")
    assert CONTAINERFILE.count(f"rayproject/ray:${{RAY_VERSION}}-{py_tag}") == 2  # both variants
    service = yaml.safe_load((REPO / "deploy" / "base" / "rayservice.yaml").read_text())
    assert service["spec"]["rayClusterConfig"]["rayVersion"] == ray.group(1)
    for source in SOURCES:
        assert re.search(rf"^COPY {re.escape(source)}\b", CONTAINERFILE, re.MULTILINE) or \
            source in ("pyproject.toml", "README.md"), source
    assert '"$(ls /tmp/wheels/kaiwo_ray-*.whl)[amd]"' in CONTAINERFILE
    assert '"$(ls /tmp/wheels/kaiwo_ray-*.whl)[nvidia]"' in CONTAINERFILE


IMPORT_ALL = """
import importlib, importlib.abc, pkgutil, sys
target, site_packages = sys.argv[1], sys.argv[2]
sys.path[:] = [target, site_packages, *[p for p in sys.path if "lib/python" in p and "site-packages" not in p]]
DEV_ONLY = set(sys.argv[3].split(","))

class NoDevDependencies(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in DEV_ONLY:
            raise ModuleNotFoundError(f"{name} is a development dependency", name=name)  # as if absent
        return None

sys.meta_path.insert(0, NoDevDependencies())
imported = 0
for top in ("kaiwo_ray", "actors", "serve", "hosts"):
    package = importlib.import_module(top)
    assert package.__file__.startswith(target), (top, package.__file__)
    for info in pkgutil.walk_packages(package.__path__, top + "."):
        importlib.import_module(info.name)
        imported += 1
from hosts.cli.main import main
print("imported", imported)
"""


def test_the_wheel_alone_imports_every_module_without_dev_dependencies(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    for name in SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy(path, source / name)
    wheels = tmp_path / "wheels"
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                            str(wheels), str(source)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    (wheel,) = wheels.glob("kaiwo_ray-*.whl")
    target = tmp_path / "target"
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target),
                                str(wheel)], capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr
    assert (target / "kaiwo_ray" / "py.typed").is_file()
    assert (target / "bin" / "kaiwo-ray").is_file()
    result = subprocess.run([sys.executable, "-S", "-c", IMPORT_ALL, str(target), sysconfig.get_paths()["purelib"],
                             ",".join(sorted(dev_only_modules(_requires_dist(target))))], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert int(result.stdout.split()[-1]) > 100


def _requires_dist(target: Path) -> list[str]:
    """The Requires-Dist lines of the installed wheel's METADATA."""
    (metadata,) = target.glob("kaiwo_ray-*.dist-info/METADATA")
    return [line.split(":", 1)[1].strip() for line in metadata.read_text().splitlines()
            if line.startswith("Requires-Dist:")]


def test_the_dev_only_set_is_what_it_says() -> None:
    import importlib.metadata as md

    blocked = dev_only_modules(md.requires("kaiwo-ray") or [])
    assert {"pytest", "hypothesis", "mypy", "kopf"} <= blocked
    assert not {"ray", "jsonschema", "kubernetes", "pydantic", "yaml"} & blocked


def test_the_image_vendors_the_dashboards_chart_library(tmp_path: Path) -> None:
    """The wheel stage copies the chart library, fetched at the Makefile's version as `make vendor` does,
    to where the dashboard loads it from, before the wheel is built; the wheel then carries it (package
    data), so the image's dashboard draws its charts."""
    from serve.dashboard import CHART_JS, STATIC

    makefile = (REPO / "Makefile").read_text()
    version = re.search(r"^CHARTJS_VERSION := (\S+)$", makefile, re.MULTILINE)
    assert version and _arg("CHARTJS_VERSION") == version.group(1)
    stages = {m.group(2): m.start() for m in re.finditer(r"^FROM (\S+) AS (\w+)$", CONTAINERFILE, re.MULTILINE)}
    vendor = CONTAINERFILE[stages["vendor"]:stages["wheel"]]
    assert 'npm pack --silent "chart.js@${CHARTJS_VERSION}"' in vendor
    assert f"mv package/dist/{CHART_JS.name} {CHART_JS.name}" in vendor
    wheel_stage = CONTAINERFILE[stages["wheel"]:stages["amd"]]
    target = CHART_JS.parent.relative_to(STATIC.parent.parent)
    copy = wheel_stage.index(f"COPY --from=vendor /vendor/ ./{target}/")
    assert copy < wheel_stage.index("pip wheel"), "the chart library must be in place before the wheel is built"
    # what the COPY puts there is package data of the wheel
    source = tmp_path / "src"
    source.mkdir()
    for name in SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "vendor"))
        else:
            shutil.copy(path, source / name)
    (source / target).mkdir(parents=True)
    (source / target / CHART_JS.name).write_text("/* chart.js */\n")
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                            str(tmp_path / "wheels"), str(source)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "wheels").glob("kaiwo_ray-*.whl")
    assert f"{target}/{CHART_JS.name}" in zipfile.ZipFile(wheel).namelist()
