from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kaiwo_ray.api.crd import all_crds
from kaiwo_ray.cli.crds import HEADER, rendered_files, stale_files
from kaiwo_ray.cli.main import main

REPO = Path(__file__).resolve().parents[2]
EXPECTED_FILES = {
    "kaiwo.silogen.ai_kaiwojobs.yaml",
    "kaiwo.silogen.ai_kaiwoservices.yaml",
    "kaiwo.silogen.ai_kaiwoqueueconfigs.yaml",
    "config.kaiwo.silogen.ai_kaiwoconfigs.yaml",
    "config.kaiwo.silogen.ai_aimnamespaceconfigs.yaml",
    "kaiwo.silogen.ai_gpuworkloads.yaml",
}


def test_committed_crds_match_the_generator() -> None:
    assert stale_files(REPO / "crds") == [], "run `kaiwo-ray crds` and commit crds/"


def test_committed_directory_holds_exactly_the_generated_files() -> None:
    assert {p.name for p in (REPO / "crds").glob("*.yaml")} == EXPECTED_FILES


def test_files_are_the_crds_as_yaml() -> None:
    loaded = [yaml.safe_load(text) for text in rendered_files().values()]
    assert sorted(loaded, key=lambda c: c["metadata"]["name"]) == sorted(
        all_crds(), key=lambda c: c["metadata"]["name"]
    )


def test_writes_then_checks_clean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "generated"
    assert main(["crds", "--out", str(out)]) == 0
    assert {p.name for p in out.iterdir()} == EXPECTED_FILES
    assert main(["crds", "--out", str(out), "--check"]) == 0
    assert "up to date" in capsys.readouterr().out


def test_check_lists_changed_and_missing_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crds", "--out", str(tmp_path)]) == 0
    edited = tmp_path / "kaiwo.silogen.ai_kaiwojobs.yaml"
    edited.write_text(edited.read_text() + "# hand edit\n")
    (tmp_path / "config.kaiwo.silogen.ai_kaiwoconfigs.yaml").unlink()
    capsys.readouterr()
    assert main(["crds", "--out", str(tmp_path), "--check"]) == 1
    err = capsys.readouterr().err
    assert "out of date" in err
    assert str(edited) in err
    assert "config.kaiwo.silogen.ai_kaiwoconfigs.yaml" in err
    assert "kaiwoservices" not in err


def test_check_flags_leftovers_of_removed_kinds_but_not_foreign_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["crds", "--out", str(tmp_path)]) == 0
    (tmp_path / "kaiwo.silogen.ai_retiredkinds.yaml").write_text(HEADER + "kind: CustomResourceDefinition\n")
    (tmp_path / "hand-written.yaml").write_text("kind: ConfigMap\n")
    capsys.readouterr()
    assert main(["crds", "--out", str(tmp_path), "--check"]) == 1
    err = capsys.readouterr().err
    assert "retiredkinds.yaml (no longer generated: delete it)" in err
    assert "hand-written" not in err


def test_unwritable_destination_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["crds", "--out", str(blocker / "sub")]) == 1
    assert "cannot write to" in capsys.readouterr().err
