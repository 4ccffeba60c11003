"""Property tests: for every kind, wire -> model -> wire -> model is the identity and dumps are stable."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kaiwo_api_strategies import wire_documents

from kaiwo_ray.api.aim import AIMNamespaceConfig
from kaiwo_ray.api.config import KaiwoConfig
from kaiwo_ray.api.load import KINDS, parse_object
from kaiwo_ray.api.queueconfig import KaiwoQueueConfig
from kaiwo_ray.api.workloads import KaiwoJob, KaiwoService

MODELS = [KaiwoJob, KaiwoService, KaiwoQueueConfig, KaiwoConfig, AIMNamespaceConfig]


def test_every_kind_is_covered() -> None:
    assert {m.__name__ for m in MODELS} == set(KINDS)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
# per model: the test runs once for each model, so fewer examples each keeps the total bounded
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_wire_model_wire_is_identity(model: Any, data: st.DataObject) -> None:
    doc = data.draw(wire_documents(model))
    doc["apiVersion"], _ = KINDS[model.__name__]
    doc["kind"] = model.__name__
    parsed = parse_object(doc)
    wire = parsed.to_wire()
    again = parse_object(json.loads(json.dumps(wire)))
    assert again == parsed
    assert again.to_wire() == wire
    assert json.dumps(wire) == json.dumps(again.to_wire()), "key order of dumps must be stable"


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_default_object_round_trips(model: Any) -> None:
    wire = model().to_wire()
    assert model.model_validate(wire) == model()
