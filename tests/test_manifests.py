"""Reading and writing multi-document manifests."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from kaiwo_ray.manifests import (
    ManifestReadError,
    dump_json_list,
    dump_yaml,
    dump_yaml_documents,
    parse_documents,
    parse_located,
    read_source,
)


class TestReading:
    def test_multiple_documents_skip_empty_ones(self) -> None:
        text = "---\n# only a comment\n---\nkind: A\n---\n---\nkind: B\n---\n"
        assert parse_documents(text) == [{"kind": "A"}, {"kind": "B"}]

    def test_lists_are_flattened_with_locations(self) -> None:
        text = "kind: A\n---\nkind: List\napiVersion: v1\nitems:\n- kind: B\n- kind: C\n"
        located = parse_located(text)
        assert [(entry.where, entry.obj["kind"]) for entry in located] == [
            ("document 1", "A"),
            ("document 2: items[0]", "B"),
            ("document 2: items[1]", "C"),
        ]

    def test_hostile_yaml_is_a_located_error(self) -> None:
        with pytest.raises(ManifestReadError, match=r"^line \d+, column \d+: invalid YAML: nesting deeper than 100"):
            parse_documents("[" * 200_000)
        with pytest.raises(ManifestReadError, match=r"invalid YAML: an alias refers to a node that contains it"):
            parse_documents("kind: A\nitems: &x [*x]\n")

    def test_plain_yaml_list(self) -> None:
        assert parse_documents("- {kind: A}\n- {kind: B}\n") == [{"kind": "A"}, {"kind": "B"}]

    def test_single_object_has_no_location(self) -> None:
        assert [entry.where for entry in parse_located("kind: A\n")] == [""]

    def test_json_with_tabs(self) -> None:
        assert parse_documents('{\n\t"kind": "A",\n\t"spec": {"gpus": 8}\n}') == [
            {"kind": "A", "spec": {"gpus": 8}}
        ]

    def test_json_array(self) -> None:
        assert parse_documents('[{"kind": "A"}, {"kind": "B"}]') == [{"kind": "A"}, {"kind": "B"}]

    def test_yaml_flow_mapping_is_not_mistaken_for_json(self) -> None:
        assert parse_documents("{kind: A, spec: {gpus: 8}}") == [{"kind": "A", "spec": {"gpus": 8}}]

    def test_broken_json_reports_line_and_column(self) -> None:
        with pytest.raises(
            ManifestReadError, match=r"^line 1, column 14: invalid JSON: Expecting ',' delimiter$"
        ):
            parse_documents('{"kind": "A" "spec": 1}')

    def test_json_looking_text_that_is_valid_yaml_is_accepted(self) -> None:
        assert parse_documents('{"kind": "A",\n "spec": }') == [{"kind": "A", "spec": None}]

    def test_broken_yaml_reports_line_and_column(self) -> None:
        with pytest.raises(
            ManifestReadError, match=r"^line 2, column 11: invalid YAML: mapping values are not"
        ):
            parse_documents("kind: A\n  metadata: x\n")

    def test_timestamps_stay_strings(self) -> None:
        (obj,) = parse_documents("metadata:\n  creationTimestamp: 2026-01-01T00:00:00Z\n  date: 2026-01-01\n")
        assert obj["metadata"] == {"creationTimestamp": "2026-01-01T00:00:00Z", "date": "2026-01-01"}

    @pytest.mark.parametrize(
        ("text", "message"),
        [
            ("42\n", "expected an object (a mapping), got a number"),
            ("kind: A\n---\n- 1\n", "document 2: items[0]: expected an object (a mapping), got a number"),
            ("kind: List\nitems: {a: 1}\n", "items: expected a list of objects"),
            ("1: one\n", "keys must be strings, got 1"),
        ],
    )
    def test_shape_errors(self, text: str, message: str) -> None:
        with pytest.raises(ManifestReadError) as raised:
            parse_documents(text)
        assert str(raised.value) == message

    def test_read_source_errors(self, tmp_path: Path) -> None:
        with pytest.raises(ManifestReadError, match=r"^no such file$"):
            read_source(str(tmp_path / "missing.yaml"))
        with pytest.raises(ManifestReadError, match=r"^is a directory, expected a file$"):
            read_source(str(tmp_path))
        binary = tmp_path / "binary.yaml"
        binary.write_bytes(b"kind: \xff\xfe\n")
        with pytest.raises(ManifestReadError, match=r"^not UTF-8 text \(byte 6\)$"):
            read_source(str(binary))


class TestWriting:
    def test_block_style_in_insertion_order(self) -> None:
        text = dump_yaml({"zeta": 1, "alpha": {"list": [1, 2]}, "empty": {}})
        assert text == "zeta: 1\nalpha:\n  list:\n  - 1\n  - 2\nempty: {}\n"

    def test_multiline_strings_are_literal_blocks(self) -> None:
        text = dump_yaml({"script": "echo a\nsleep 5\n", "trimmed": "a\nb"})
        assert text == "script: |\n  echo a\n  sleep 5\ntrimmed: |-\n  a\n  b\n"

    def test_strings_that_look_like_other_types_are_double_quoted(self) -> None:
        text = dump_yaml({"count": "8", "flag": "true", "empty": "", "version": "1.0", "plain": "8Gi"})
        assert text == 'count: "8"\nflag: "true"\nempty: ""\nversion: "1.0"\nplain: 8Gi\n'

    def test_long_lines_are_not_folded(self) -> None:
        long = "python train.py " + " ".join(f"--flag-{index}=value" for index in range(40))
        assert dump_yaml({"command": long}) == f"command: {long}\n"

    def test_documents_and_json_list(self) -> None:
        assert dump_yaml_documents([{"a": 1}, {"b": 2}]) == "a: 1\n---\nb: 2\n"
        assert dump_json_list([{"a": 1}]).startswith('{\n  "apiVersion": "v1",\n  "kind": "List",')


json_scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@given(st.dictionaries(st.text(max_size=8), json_values, max_size=5))
def test_dump_then_read_round_trips(obj: dict[str, Any]) -> None:
    """Whatever a renderer produces, what we print reads back as the same data."""
    (read_back,) = parse_documents(dump_yaml(obj))
    assert _normalized(read_back) == _normalized(obj)
    assert yaml.safe_load(dump_yaml(obj)) is not None


def _normalized(value: Any) -> Any:
    if isinstance(value, float) and math.isfinite(value) and value == int(value) and abs(value) < 2**53:
        return float(value)
    if isinstance(value, dict):
        return {key: _normalized(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_normalized(item) for item in value]
    return value
