"""Golden files: every example's `kaiwo-ray render` output, committed and reviewed by hand.

A change in rendering shows up here as a diff of real manifests. After an intended change:
`KAIWO_UPDATE_GOLDENS=1 .venv/bin/pytest tests/golden`, then review `git diff tests/golden`
against the spec before committing (a golden is only worth what its review was).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from kaiwo_ray.cli.main import main

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
GOLDENS = Path(__file__).resolve().parent
UPDATE = os.environ.get("KAIWO_UPDATE_GOLDENS") == "1"

# Every file in examples/ is a manifest; docs/nodes.yaml (a node list) renders as the default
# KaiwoQueueConfig node discovery makes of it, then its Kueue objects. The phase table is in tests/.
EXPECTED = REPO / "tests" / "examples_expected.yaml"
RENDERED = {"nodes.yaml": "docs/nodes.yaml"}


def example_files() -> list[str]:
    return sorted(path.name for path in EXAMPLES.glob("*.yaml"))


def render_args(example: str) -> list[str]:
    return ["render", "-f", RENDERED.get(example, f"examples/{example}")]


@pytest.mark.parametrize("example", [*example_files(), *RENDERED])
def test_rendered_example_matches_golden(
    example: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    code = main(render_args(example))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.err == ""
    golden = GOLDENS / f"{Path(example).stem}.out.yaml"
    if UPDATE:
        golden.write_text(captured.out, encoding="utf-8")
    assert golden.exists(), f"no golden for {example}: run KAIWO_UPDATE_GOLDENS=1 pytest tests/golden"
    assert captured.out == golden.read_text(encoding="utf-8"), (
        f"{example} renders differently from {golden.name}; if intended, regenerate with "
        "KAIWO_UPDATE_GOLDENS=1 and review the diff"
    )


def test_every_golden_belongs_to_an_example() -> None:
    stems = {Path(example).stem for example in [*example_files(), *RENDERED]}
    orphans = sorted(
        path.name for path in GOLDENS.glob("*.out.yaml") if path.name[: -len(".out.yaml")] not in stems
    )
    assert orphans == []


def test_expected_lists_every_example_with_its_kind_and_name() -> None:
    expected = yaml.safe_load(EXPECTED.read_text(encoding="utf-8"))
    assert sorted(expected) == example_files()
    for example, facts in expected.items():
        documents = [
            doc for doc in yaml.safe_load_all((EXAMPLES / example).read_text(encoding="utf-8")) if doc
        ]
        (document,) = documents
        assert facts["kind"] == document["kind"], example
        assert facts["name"] == document["metadata"]["name"], example
        assert facts["namespace"] == document["metadata"].get("namespace"), example
        final = {"KaiwoJob": "COMPLETE", "KaiwoService": "RUNNING", "KaiwoQueueConfig": "READY"}
        assert facts["phase"] == final.get(document["kind"]), example


@pytest.mark.parametrize("example", example_files())
def test_examples_start_with_a_comment_saying_what_they_show(example: str) -> None:
    first_line = (EXAMPLES / example).read_text(encoding="utf-8").splitlines()[0]
    assert first_line.startswith("# ") and len(first_line) > 20
