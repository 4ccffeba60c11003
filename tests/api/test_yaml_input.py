"""Bounded YAML decoding (kaiwo_ray/api/yaml_input.py): what ordinary manifests need passes, hostile
documents are a YAMLError naming the problem, fast."""

from __future__ import annotations

import pytest
import yaml

from kaiwo_ray.api.yaml_input import MAX_DEPTH, safe_load_all


def test_ordinary_documents_and_modest_aliases_load_as_safe_load_all_does() -> None:
    text = "a: 1\n---\nenv: &env [{name: A, value: '1'}]\nother: *env\n---\n"
    assert list(safe_load_all(text)) == list(yaml.safe_load_all(text))


def test_nesting_is_bounded() -> None:
    assert list(safe_load_all("[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)))
    with pytest.raises(yaml.YAMLError, match=f"nesting deeper than {MAX_DEPTH} levels"):
        list(safe_load_all("[" * 200_000))


def test_alias_expansion_is_bounded() -> None:
    laughs = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
        f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True))
    with pytest.raises(yaml.YAMLError, match="expands to more than 1,000,000 values") as error:
        list(safe_load_all(laughs))
    assert error.value.problem_mark is not None  # type: ignore[attr-defined]


def test_a_recursive_document_is_refused_not_expanded_forever() -> None:
    for text in ("a: &x [*x]\n", "a: &x {k: [1, *x]}\n"):
        with pytest.raises(yaml.YAMLError, match="an alias refers to a node that contains it"):
            list(safe_load_all(text))
    shared = "a: &a [1]\nb: [*a, [*a, *a]]\n"  # shared, not recursive
    assert list(safe_load_all(shared)) == list(yaml.safe_load_all(shared))
