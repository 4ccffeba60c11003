"""KaiwoQueueConfig -> Kueue objects (cluster.md §4.4, Examples B, C, D)."""

from __future__ import annotations

import pytest

from kaiwo_ray.api.config import KaiwoConfigSpec
from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.api.queueconfig import ClusterQueueEntry, KaiwoQueueConfig
from kaiwo_ray.render.nodepools import default_queue_config
from kaiwo_ray.render.queue import (
    cluster_queue_spec,
    render_local_queue,
    render_queue_config,
)

KQC_OWNER = {
    "apiVersion": "kaiwo.silogen.ai/v1alpha1",
    "kind": "KaiwoQueueConfig",
    "name": "kaiwo",
    "uid": "kqc-uid",
    "controller": True,
    "blockOwnerDeletion": True,
}


def queue_config(spec: JsonObj, uid: str | None = "kqc-uid") -> KaiwoQueueConfig:
    metadata: JsonObj = {"name": "kaiwo"}
    if uid is not None:
        metadata["uid"] = uid
    return KaiwoQueueConfig.model_validate(
        {
            "apiVersion": "kaiwo.silogen.ai/v1alpha1",
            "kind": "KaiwoQueueConfig",
            "metadata": metadata,
            "spec": spec,
        }
    )


def by_kind(objects: list[JsonObj], kind: str) -> list[JsonObj]:
    return [obj for obj in objects if obj["kind"] == kind]


EXAMPLE_B = {
    "resourceFlavors": [{"name": "foo", "nodeLabels": {"kaiwo/nodepool": "foo"}}],
    "clusterQueues": [
        {
            "name": "fizz",
            "namespaces": ["namespace1", "namespace2"],
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [
                            {
                                "name": "foo",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": "4"},
                                    {"name": "memory", "nominalQuota": "8Gi"},
                                ],
                            }
                        ],
                    }
                ],
            },
        }
    ],
}

EXAMPLE_C = {
    "resourceFlavors": [{"name": "default"}],
    "workloadPriorityClasses": [
        {"metadata": {"name": "high-priority"}, "value": 1000, "description": "High priority class"},
        {"metadata": {"name": "low-priority"}, "value": 10},
    ],
    "clusterQueues": [
        {
            "name": "workload-priority-class-test-queue",
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [
                            {
                                "name": "default",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": "500m"},
                                    {"name": "memory", "nominalQuota": "2Gi"},
                                ],
                            }
                        ],
                    }
                ],
            },
        }
    ],
}

LEVELS = [
    {"nodeLabel": "kaiwo/topology-block"},
    {"nodeLabel": "kaiwo/topology-rack"},
    {"nodeLabel": "kubernetes.io/hostname"},
]
EXAMPLE_D = {
    "topologies": [{"metadata": {"name": "test-topo"}, "spec": {"levels": LEVELS}}],
    "resourceFlavors": [
        {"name": "no-topo-flavor", "nodeLabels": {"kaiwo/nodepool": "no-topo"}},
        {"name": "topo-flavor", "nodeLabels": {"kaiwo/nodepool": "topo"}, "topologyName": "test-topo"},
    ],
}


class TestExampleB:
    def test_objects_in_creation_order(self) -> None:
        objects = render_queue_config(queue_config(EXAMPLE_B))
        assert [
            (obj["kind"], obj["metadata"].get("namespace"), obj["metadata"]["name"]) for obj in objects
        ] == [
            ("ResourceFlavor", None, "foo"),
            ("ClusterQueue", None, "fizz"),
            ("LocalQueue", "namespace1", "fizz"),
            ("LocalQueue", "namespace2", "fizz"),
        ]

    def test_resource_flavor_gets_worker_label_and_kqc_owner(self) -> None:
        (flavor,) = by_kind(render_queue_config(queue_config(EXAMPLE_B)), "ResourceFlavor")
        assert flavor == {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": "foo", "ownerReferences": [KQC_OWNER]},
            "spec": {"nodeLabels": {"kaiwo/nodepool": "foo", "kaiwo/worker": "true"}},
        }

    def test_cluster_queue_v1beta2_with_kueue_defaults(self) -> None:
        (queue,) = by_kind(render_queue_config(queue_config(EXAMPLE_B)), "ClusterQueue")
        assert queue["metadata"] == {"name": "fizz", "ownerReferences": [KQC_OWNER]}
        assert queue["spec"] == {
            "resourceGroups": EXAMPLE_B["clusterQueues"][0]["spec"]["resourceGroups"],  # type: ignore[index]
            "queueingStrategy": "BestEffortFIFO",
            "namespaceSelector": {},
            "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
            "preemption": {"reclaimWithinCohort": "Never", "withinClusterQueue": "Never"},
            "stopPolicy": "None",
        }

    def test_local_queues_owned_by_their_cluster_queue(self) -> None:
        local_queues = by_kind(render_queue_config(queue_config(EXAMPLE_B)), "LocalQueue")
        assert local_queues[0] == {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {
                "name": "fizz",
                "namespace": "namespace1",
                "ownerReferences": [
                    {
                        "apiVersion": "kueue.x-k8s.io/v1beta2",
                        "kind": "ClusterQueue",
                        "name": "fizz",
                        "uid": "",
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": {"clusterQueue": "fizz"},
        }

    def test_dropping_a_namespace_drops_its_local_queue(self) -> None:
        spec = {
            **EXAMPLE_B,
            "clusterQueues": [{**EXAMPLE_B["clusterQueues"][0], "namespaces": ["namespace1"]}],
        }  # type: ignore[index,dict-item]
        local_queues = by_kind(render_queue_config(queue_config(spec)), "LocalQueue")
        assert [lq["metadata"]["namespace"] for lq in local_queues] == ["namespace1"]

    def test_empty_cluster_queue_list_renders_no_queues(self) -> None:
        objects = render_queue_config(queue_config({**EXAMPLE_B, "clusterQueues": []}))
        assert [obj["kind"] for obj in objects] == ["ResourceFlavor"]


class TestExampleC:
    def test_label_less_flavor_gets_only_the_worker_label(self) -> None:
        (flavor,) = by_kind(render_queue_config(queue_config(EXAMPLE_C)), "ResourceFlavor")
        assert flavor["spec"] == {"nodeLabels": {"kaiwo/worker": "true"}}

    def test_priority_classes(self) -> None:
        objects = render_queue_config(queue_config(EXAMPLE_C))
        assert [obj["kind"] for obj in objects] == [
            "ResourceFlavor",
            "ClusterQueue",
            *["WorkloadPriorityClass"] * 2,
        ]
        high, low = by_kind(objects, "WorkloadPriorityClass")
        assert high == {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "high-priority", "ownerReferences": [KQC_OWNER]},
            "value": 1000,
            "description": "High priority class",
        }
        assert low["value"] == 10
        assert "description" not in low

    def test_queue_without_namespaces_gets_no_local_queue(self) -> None:
        assert by_kind(render_queue_config(queue_config(EXAMPLE_C)), "LocalQueue") == []


class TestExampleD:
    def test_topology_first_then_flavors(self) -> None:
        objects = render_queue_config(queue_config(EXAMPLE_D))
        assert [obj["kind"] for obj in objects] == ["Topology", "ResourceFlavor", "ResourceFlavor"]
        assert objects[0] == {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "Topology",
            "metadata": {"name": "test-topo", "ownerReferences": [KQC_OWNER]},
            "spec": {"levels": LEVELS},
        }

    def test_topology_flavor_keeps_its_labels_untouched(self) -> None:
        no_topo, topo = by_kind(render_queue_config(queue_config(EXAMPLE_D)), "ResourceFlavor")
        assert no_topo["spec"] == {"nodeLabels": {"kaiwo/nodepool": "no-topo", "kaiwo/worker": "true"}}
        assert topo["spec"] == {"nodeLabels": {"kaiwo/nodepool": "topo"}, "topologyName": "test-topo"}

    def test_removing_topology_name_adds_worker_label(self) -> None:
        flavors = [
            EXAMPLE_D["resourceFlavors"][0],
            {"name": "topo-flavor", "nodeLabels": {"kaiwo/nodepool": "topo"}},
        ]
        _, topo = by_kind(
            render_queue_config(queue_config({**EXAMPLE_D, "resourceFlavors": flavors})), "ResourceFlavor"
        )
        assert topo["spec"] == {"nodeLabels": {"kaiwo/nodepool": "topo", "kaiwo/worker": "true"}}

    def test_without_topology_api_topologies_are_skipped_and_stripped(self) -> None:
        objects = render_queue_config(queue_config(EXAMPLE_D), topology_api_available=False)
        assert [obj["kind"] for obj in objects] == ["ResourceFlavor", "ResourceFlavor"]
        assert objects[1]["spec"] == {"nodeLabels": {"kaiwo/nodepool": "topo", "kaiwo/worker": "true"}}

    def test_topologies_with_empty_names_are_skipped(self) -> None:
        spec = {"topologies": [{"metadata": {"name": ""}, "spec": {"levels": LEVELS}}]}
        assert render_queue_config(queue_config(spec)) == []


class TestClusterQueueSpec:
    def entry(self, spec: JsonObj) -> ClusterQueueEntry:
        return ClusterQueueEntry.model_validate({"name": "q", "spec": spec})

    def test_resources_reordered_to_covered_order_and_uncovered_dropped(self) -> None:
        entry = self.entry(
            {
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [
                            {
                                "name": "f",
                                "resources": [
                                    {"name": "memory", "nominalQuota": "1Gi"},
                                    {"name": "cpu", "nominalQuota": 2},
                                ],
                            }
                        ],
                    }
                ]
            }
        )
        (flavor,) = cluster_queue_spec(entry)["resourceGroups"][0]["flavors"]
        assert flavor["resources"] == [
            {"name": "cpu", "nominalQuota": "2"},
            {"name": "memory", "nominalQuota": "1Gi"},
        ]

    def test_v1beta1_keeps_upstream_names(self) -> None:
        entry = self.entry({"cohortName": "team", "flavorFungibility": {"whenCanBorrow": "Borrow"}})
        spec = cluster_queue_spec(entry, kueue_version="v1beta1")
        assert spec["cohort"] == "team"
        assert "cohortName" not in spec
        assert spec["flavorFungibility"] == {"whenCanBorrow": "Borrow", "whenCanPreempt": "TryNextFlavor"}

    def test_v1beta2_renames(self) -> None:
        entry = self.entry(
            {
                "cohort": "team",
                "flavorFungibility": {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"},
                "admissionChecks": ["prov", "other"],
            }
        )
        spec = cluster_queue_spec(entry)
        assert spec["cohortName"] == "team"
        assert "cohort" not in spec
        assert "admissionChecks" not in spec
        assert spec["flavorFungibility"] == {
            "whenCanBorrow": "MayStopSearch",
            "whenCanPreempt": "MayStopSearch",
        }
        assert spec["admissionChecksStrategy"] == {
            "admissionChecks": [{"name": "prov", "onFlavors": []}, {"name": "other", "onFlavors": []}]
        }

    def test_v1beta2_keeps_a_strategy_as_given(self) -> None:
        strategy = {"admissionChecks": [{"name": "other", "onFlavors": ["f"]}]}
        spec = cluster_queue_spec(self.entry({"admissionChecksStrategy": strategy}))
        assert spec["admissionChecksStrategy"] == strategy

    def test_namespace_selector_absent_means_none(self) -> None:
        assert "namespaceSelector" not in cluster_queue_spec(self.entry({}))


class TestOwnership:
    def test_missing_uid_renders_empty(self) -> None:
        (flavor,) = render_queue_config(queue_config({"resourceFlavors": [{"name": "f"}]}, uid=None))
        assert flavor["metadata"]["ownerReferences"][0]["uid"] == ""

    def test_taints_and_tolerations_become_kueues_node_taints_and_tolerations(self) -> None:
        spec = {
            "resourceFlavors": [
                {
                    "name": "f",
                    "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}],
                    "tolerations": [{"key": "k", "operator": "Exists"}],
                }
            ]
        }
        (flavor,) = render_queue_config(queue_config(spec))
        assert flavor["spec"] == {"nodeLabels": {"kaiwo/worker": "true"},
                                  "nodeTaints": [{"key": "k", "value": "v", "effect": "NoSchedule"}],
                                  "tolerations": [{"key": "k", "operator": "Exists"}]}

    def test_lazy_local_queue_is_not_a_controller_reference(self) -> None:
        local_queue = render_local_queue("kaiwo", "team-a", cluster_queue_uid="cq-uid", controller=False)
        assert local_queue["metadata"]["ownerReferences"] == [
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "name": "kaiwo", "uid": "cq-uid"}
        ]

    def test_duplicate_namespaces_render_one_local_queue(self) -> None:
        spec = {"clusterQueues": [{"name": "q", "namespaces": ["a", "b", "a"]}]}
        local_queues = by_kind(render_queue_config(queue_config(spec)), "LocalQueue")
        assert [lq["metadata"]["namespace"] for lq in local_queues] == ["a", "b"]


@pytest.mark.parametrize("kueue_version", ["v1beta2", "v1beta1"])
def test_default_queue_config_renders_deterministically(kueue_version: str) -> None:
    from kaiwo_ray.nodes import default_nodes

    config = KaiwoConfigSpec()
    spec = default_queue_config(default_nodes(), config)
    first = render_queue_config(KaiwoQueueConfig(spec=spec), kueue_version=kueue_version)  # type: ignore[arg-type]
    second = render_queue_config(KaiwoQueueConfig(spec=spec), kueue_version=kueue_version)  # type: ignore[arg-type]
    assert first == second
    assert [obj["kind"] for obj in first] == ["Topology", *["ResourceFlavor"] * 3, "ClusterQueue"]
    assert all(obj["apiVersion"].endswith(kueue_version) for obj in first[1:])


def test_names_in_spec_lists_what_the_reconciler_keeps() -> None:
    from kaiwo_ray.render.queue import names_in_spec

    objects = render_queue_config(
        queue_config({**EXAMPLE_B, **{"workloadPriorityClasses": EXAMPLE_C["workloadPriorityClasses"]}})
    )
    assert names_in_spec(objects, "ResourceFlavor") == ["foo"]
    assert names_in_spec(objects, "WorkloadPriorityClass") == ["high-priority", "low-priority"]
    assert names_in_spec(objects, "Topology") == []
