from __future__ import annotations

from typing import Any

import pytest
from kaiwo_api_examples import ALL_EXAMPLES, E1_MINIMAL_JOB

from kaiwo_ray.api.aim import AIMNamespaceConfig
from kaiwo_ray.api.config import KaiwoConfig
from kaiwo_ray.api.errors import FieldError, ManifestError
from kaiwo_ray.api.load import KINDS, parse_as, parse_object, parse_yaml
from kaiwo_ray.api.queueconfig import KaiwoQueueConfig
from kaiwo_ray.api.workloads import KaiwoJob, KaiwoService


def error_of(doc: Any) -> str:
    with pytest.raises(ManifestError) as info:
        parse_object(doc)
    return str(info.value)


def test_dispatches_on_kind() -> None:
    assert {kind: model for kind, (_, model) in KINDS.items()} == {
        "KaiwoJob": KaiwoJob,
        "KaiwoService": KaiwoService,
        "KaiwoQueueConfig": KaiwoQueueConfig,
        "KaiwoConfig": KaiwoConfig,
        "AIMNamespaceConfig": AIMNamespaceConfig,
    }


@pytest.mark.parametrize("name", sorted(ALL_EXAMPLES))
def test_every_example_parses_to_its_kind(name: str) -> None:
    doc = ALL_EXAMPLES[name]
    assert type(parse_object(doc)).__name__ == doc["kind"]


def test_manifest_error_is_a_value_error() -> None:
    assert issubclass(ManifestError, ValueError)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (
            {"apiVersion": "v1", "kind": "Foo"},
            'kind: unknown kind "Foo" (expected one of KaiwoJob, KaiwoService, KaiwoQueueConfig, KaiwoConfig, AIMNamespaceConfig)',
        ),
        ({"apiVersion": "kaiwo.silogen.ai/v1alpha1"}, "kind: required"),
        ({"kind": "KaiwoJob"}, "apiVersion: required (expected kaiwo.silogen.ai/v1alpha1)"),
        (
            {"apiVersion": "kaiwo.silogen.ai/v1", "kind": "KaiwoJob"},
            'apiVersion: "kaiwo.silogen.ai/v1" does not serve KaiwoJob (expected kaiwo.silogen.ai/v1alpha1)',
        ),
        (
            {"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": "KaiwoConfig"},
            'apiVersion: "kaiwo.silogen.ai/v1alpha1" does not serve KaiwoConfig (expected config.kaiwo.silogen.ai/v1alpha1)',
        ),
        (
            {"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": ["KaiwoJob"]},
            "kind: unknown kind \"['KaiwoJob']\" (expected one of KaiwoJob, KaiwoService, KaiwoQueueConfig, KaiwoConfig, AIMNamespaceConfig)",
        ),
        ([1, 2], "a manifest must be a mapping with apiVersion and kind, got a list"),
        (None, "a manifest must be a mapping with apiVersion and kind, got null"),
        ({**E1_MINIMAL_JOB, "spec": []}, "spec: must be an object (got a list)"),
        ({**E1_MINIMAL_JOB, "extra": 1}, "extra: unknown field"),
        ({**E1_MINIMAL_JOB, "metadata": "hello"}, 'metadata: must be an object (got "hello")'),
    ],
)
def test_dispatch_errors(doc: Any, message: str) -> None:
    assert error_of(doc) == message


def test_parse_as_validates_a_specific_model() -> None:
    assert parse_as(KaiwoJob, E1_MINIMAL_JOB).metadata.name == "hello"
    with pytest.raises(ManifestError, match=r"^spec\.gpus: must be >= 0"):
        parse_as(KaiwoJob, {"spec": {"gpus": -3}})


def test_parse_yaml_reads_every_document() -> None:
    text = """
apiVersion: kaiwo.silogen.ai/v1alpha1
kind: KaiwoJob
metadata: {name: a}
spec: {image: busybox, gpus: 1}
---
---
apiVersion: config.kaiwo.silogen.ai/v1alpha1
kind: KaiwoConfig
metadata: {name: kaiwo}
"""
    job, config = parse_yaml(text)
    assert isinstance(job, KaiwoJob) and job.spec.gpus == 1
    assert isinstance(config, KaiwoConfig)


def test_parse_yaml_names_the_document_of_each_error() -> None:
    text = "kind: KaiwoJob\napiVersion: kaiwo.silogen.ai/v1alpha1\nspec: {gpus: -1}\n---\nkind: Nope\n"
    with pytest.raises(ManifestError) as info:
        parse_yaml(text)
    assert [str(e) for e in info.value.errors] == [
        "document 1: spec.gpus: must be >= 0 (got -1)",
        'document 2: kind: unknown kind "Nope" (expected one of KaiwoJob, KaiwoService, KaiwoQueueConfig, KaiwoConfig, AIMNamespaceConfig)',
    ]


def test_parse_yaml_single_document_has_no_prefix() -> None:
    with pytest.raises(ManifestError, match=r"^spec\.gpus: must be >= 0"):
        parse_yaml("kind: KaiwoJob\napiVersion: kaiwo.silogen.ai/v1alpha1\nspec: {gpus: -1}\n")


def test_parse_yaml_reports_syntax_errors_with_position() -> None:
    with pytest.raises(
        ManifestError, match=r"^invalid YAML at line 2, column 11: mapping values are not allowed"
    ):
        parse_yaml("kind: KaiwoJob\nspec: gpus: 1\n")


def test_manifest_error_needs_errors() -> None:
    with pytest.raises(ValueError, match="at least one"):
        ManifestError([])
    assert str(ManifestError([FieldError("", "whole document is wrong")])) == "whole document is wrong"
