"""Properties of KaiwoQueueConfig -> Kueue rendering over generated queue configs (hypothesis)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.queueconfig import ClusterQueueEntry, ClusterQueueSpec, KaiwoQueueConfig
from kaiwo_ray.render.queue import KueueVersion, cluster_queue_spec, render_queue_config

NAMES = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=10)
RESOURCES = ["cpu", "memory", "amd.com/gpu", "nvidia.com/gpu", "example.com/fpga"]
QUANTITIES = st.sampled_from(["1", "500m", "16Gi", "30923764531", "0", "2.5"]) | st.integers(0, 1000)
KIND_ORDER = ["Topology", "ResourceFlavor", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass"]
VERSIONS: list[KueueVersion] = ["v1beta2", "v1beta1"]


@st.composite
def resource_groups(draw: st.DrawFn, flavor_names: list[str]) -> list[JsonObj]:
    if not flavor_names:
        return []
    groups = []
    for _ in range(draw(st.integers(0, 2))):
        covered = draw(st.lists(st.sampled_from(RESOURCES), min_size=1, max_size=4, unique=True))
        flavors = []
        for name in draw(st.lists(st.sampled_from(flavor_names), min_size=1, max_size=3, unique=True)):
            resources = [{"name": resource, "nominalQuota": draw(QUANTITIES)} for resource in covered]
            if draw(st.booleans()):
                resources[0]["borrowingLimit"] = draw(QUANTITIES)
            flavors.append({"name": name, "resources": draw(st.permutations(resources))})
        groups.append({"coveredResources": covered, "flavors": flavors})
    return groups


@st.composite
def queue_configs(draw: st.DrawFn) -> JsonObj:
    topology_names = draw(st.lists(NAMES, max_size=3, unique=True))
    topologies = [
        {"metadata": {"name": name}, "spec": {"levels": [{"nodeLabel": "kaiwo/topology-block"}]}}
        for name in [*topology_names, *([""] if draw(st.booleans()) else [])]
    ]
    flavor_names = draw(st.lists(NAMES, max_size=4, unique=True))
    flavors = []
    for name in flavor_names:
        flavor: JsonObj = {"name": name}
        labels = draw(
            st.dictionaries(st.sampled_from(["kaiwo/nodepool", "team", "kaiwo/worker"]), NAMES, max_size=2)
        )
        if labels:
            flavor["nodeLabels"] = labels
        if topology_names and draw(st.booleans()):
            flavor["topologyName"] = draw(st.sampled_from(topology_names))
        flavors.append(flavor)
    queues = []
    for name in draw(st.lists(NAMES, max_size=3, unique=True)):
        spec: JsonObj = {"resourceGroups": draw(resource_groups(flavor_names))}
        if draw(st.booleans()):
            spec["cohort" if draw(st.booleans()) else "cohortName"] = draw(NAMES)
        if draw(st.booleans()):
            spec["namespaceSelector"] = {}
        if draw(st.booleans()):
            spec["flavorFungibility"] = {
                "whenCanBorrow": draw(st.sampled_from(["Borrow", "TryNextFlavor", "MayStopSearch"])),
                "whenCanPreempt": draw(st.sampled_from(["Preempt", "TryNextFlavor", "MayStopSearch"])),
            }
        if draw(st.booleans()):
            spec["admissionChecks"] = draw(st.lists(NAMES, max_size=2, unique=True))
        queues.append({"name": name, "namespaces": draw(st.lists(NAMES, max_size=3)), "spec": spec})
    priorities = [
        {"metadata": {"name": name}, "value": draw(st.integers(-(2**31), 2**31 - 1))}
        for name in draw(st.lists(NAMES, max_size=2, unique=True))
    ]
    return {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoQueueConfig",
        "metadata": {
            "name": "kaiwo",
            "uid": draw(st.sampled_from(["", "0d1e2f3a-4b5c-4d6e-8f90-a1b2c3d4e5f6"])),
        },
        "spec": {
            "topologies": topologies,
            "resourceFlavors": flavors,
            "clusterQueues": queues,
            "workloadPriorityClasses": priorities,
        },
    }


@given(queue_configs(), st.sampled_from(VERSIONS), st.booleans())
def test_rendered_objects_follow_the_sync_rules(
    document: JsonObj, version: KueueVersion, topology_api: bool
) -> None:
    queue_config = KaiwoQueueConfig.model_validate(document)
    objects = render_queue_config(queue_config, kueue_version=version, topology_api_available=topology_api)
    assert objects == render_queue_config(
        queue_config, kueue_version=version, topology_api_available=topology_api
    )

    order = [KIND_ORDER.index(obj["kind"]) for obj in objects]
    assert order == sorted(order), "creation order: Topologies, RFs, CQs, LQs, WPCs"
    spec = document["spec"]
    for obj in objects:
        assert obj["metadata"]["ownerReferences"], obj
        if obj["kind"] == "Topology":
            assert topology_api and obj["metadata"]["name"]
        elif obj["kind"] == "ResourceFlavor":
            rf_spec = obj["spec"]
            (source,) = [
                flavor for flavor in spec["resourceFlavors"] if flavor["name"] == obj["metadata"]["name"]
            ]
            if "topologyName" in rf_spec:  # topology flavors keep their labels exactly
                assert topology_api and rf_spec["topologyName"] == source["topologyName"]
                assert rf_spec.get("nodeLabels", {}) == source.get("nodeLabels", {})
            else:  # every other flavor selects Kaiwo's workers
                assert rf_spec["nodeLabels"] == {**source.get("nodeLabels", {}), "kaiwo/worker": "true"}
        elif obj["kind"] == "ClusterQueue":
            check_cluster_queue(obj["spec"], version)
        elif obj["kind"] == "LocalQueue":
            assert obj["metadata"]["name"] == obj["spec"]["clusterQueue"]
        else:
            assert obj["apiVersion"] == f"kueue.x-k8s.io/{version}"

    expected_local_queues = sum(len(set(queue["namespaces"])) for queue in spec["clusterQueues"])
    assert sum(obj["kind"] == "LocalQueue" for obj in objects) == expected_local_queues
    assert sum(obj["kind"] == "ResourceFlavor" for obj in objects) == len(spec["resourceFlavors"])
    expected_topologies = (
        sum(1 for topology in spec["topologies"] if topology["metadata"]["name"]) if topology_api else 0
    )
    assert sum(obj["kind"] == "Topology" for obj in objects) == expected_topologies


def check_cluster_queue(spec: JsonObj, version: KueueVersion) -> None:
    for group in spec["resourceGroups"]:
        for flavor in group["flavors"]:
            assert [resource["name"] for resource in flavor["resources"]] == group["coveredResources"]
    if version == "v1beta2":
        assert "cohort" not in spec and "admissionChecks" not in spec
        assert set(spec["flavorFungibility"].values()) <= {"MayStopSearch", "TryNextFlavor"}
    else:
        assert "cohortName" not in spec


@given(queue_configs(), st.sampled_from(VERSIONS))
def test_rendered_cluster_queue_spec_is_a_fixed_point(document: JsonObj, version: KueueVersion) -> None:
    """Parsing what we render and rendering again changes nothing, so a reconciler comparing the
    desired spec with the live one (which the server stores as we sent it) sees no drift."""
    queue_config = KaiwoQueueConfig.model_validate(document)
    for entry in queue_config.spec.cluster_queues:
        rendered = cluster_queue_spec(entry, kueue_version=version)
        reparsed = ClusterQueueEntry(name=entry.name, spec=ClusterQueueSpec.model_validate(rendered))
        assert cluster_queue_spec(reparsed, kueue_version=version) == rendered
