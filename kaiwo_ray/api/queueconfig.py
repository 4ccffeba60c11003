"""KaiwoQueueConfig (`kaiwo.silogen.ai/v1alpha1`, cluster singleton `kaiwo`): desired Kueue objects.

The embedded ClusterQueue spec mirrors Kueue's `ClusterQueueSpec` with Kueue's enums and defaults,
typed but permissive: both the v1beta1 name `cohort` (what upstream Kaiwo stores) and the v1beta2 name
`cohortName` are accepted; the model stores it as `cohort`. List limits follow cluster.md §4.1.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal, Self

from pydantic import Field, model_validator

from kaiwo_ray.api._base import DEFAULT_EMPTY_OBJECT, PreservedObject, Quantity, Time, WireModel
from kaiwo_ray.api.errors import NestedFieldError
from kaiwo_ray.api.meta import Condition, NameOnlyMeta, ObjectMeta
from kaiwo_ray.api.workloads import KAIWO_API_VERSION

INT32_MAX = 2**31 - 1
HOSTNAME_LABEL = "kubernetes.io/hostname"


# --- Kueue ClusterQueueSpec --------------------------------------------------------------------------


class ResourceQuota(WireModel):
    """Quota of one resource in one flavor."""

    name: str
    nominal_quota: Quantity
    borrowing_limit: Quantity | None = None
    lending_limit: Quantity | None = None


class FlavorQuotas(WireModel):
    """Quotas of a ResourceFlavor, one entry per covered resource."""

    name: str
    resources: Annotated[list[ResourceQuota], Field(min_length=1, max_length=16)]


class ResourceGroup(WireModel):
    """Resources that are assigned flavors together."""

    covered_resources: Annotated[list[str], Field(min_length=1, max_length=16)]
    flavors: Annotated[list[FlavorQuotas], Field(min_length=1, max_length=16)]

    @model_validator(mode="after")
    def _each_flavor_covers_every_resource(self) -> Self:
        # Kueue's CEL rule; a mismatch otherwise fails only when the ClusterQueue is created.
        for flavor in self.flavors:
            if len(flavor.resources) != len(self.covered_resources):
                raise ValueError(
                    f'flavor "{flavor.name}" has {len(flavor.resources)} resources but coveredResources '
                    f"lists {len(self.covered_resources)}; each flavor needs one quota per covered resource"
                )
        return self


class FlavorFungibility(WireModel):
    """How Kueue moves to the next flavor when borrowing or preemption would be needed."""

    when_can_borrow: Literal["Borrow", "TryNextFlavor", "MayStopSearch"] = "Borrow"
    when_can_preempt: Literal["Preempt", "TryNextFlavor", "MayStopSearch"] = "TryNextFlavor"


class BorrowWithinCohort(WireModel):
    policy: Literal["Never", "LowerPriority"] = "Never"
    max_priority_threshold: int | None = None


class ClusterQueuePreemption(WireModel):
    """Which workloads a pending workload may preempt."""

    reclaim_within_cohort: Literal["Never", "LowerPriority", "Any"] = "Never"
    borrow_within_cohort: BorrowWithinCohort | None = None
    within_cluster_queue: Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"] = "Never"

    @model_validator(mode="after")
    def _reclaim_allows_borrow(self) -> Self:
        borrow = self.borrow_within_cohort
        if self.reclaim_within_cohort == "Never" and borrow is not None and borrow.policy != "Never":
            raise ValueError(
                "reclaimWithinCohort=Never and borrowWithinCohort.policy!=Never cannot be combined"
            )
        return self


class AdmissionCheckStrategyRule(WireModel):
    name: str
    on_flavors: list[str] = Field(default_factory=list)


class AdmissionChecksStrategy(WireModel):
    admission_checks: list[AdmissionCheckStrategyRule] = Field(default_factory=list)


class FairSharing(WireModel):
    weight: Quantity = "1"


class ClusterQueueSpec(WireModel):
    """Kueue `ClusterQueueSpec` (v1beta1 field names, v1beta2 `cohortName` accepted)."""

    resource_groups: Annotated[list[ResourceGroup], Field(max_length=16)] = Field(default_factory=list)
    cohort: str | None = None
    cohort_name: str | None = None
    """v1beta2 spelling of `cohort`; folded into `cohort` on input."""
    queueing_strategy: Literal["StrictFIFO", "BestEffortFIFO"] = "BestEffortFIFO"
    namespace_selector: PreservedObject | None = None
    """LabelSelector of namespaces that may submit: absent means none, `{}` means all."""
    flavor_fungibility: FlavorFungibility = Field(
        default_factory=FlavorFungibility, json_schema_extra=DEFAULT_EMPTY_OBJECT
    )
    preemption: ClusterQueuePreemption = Field(
        default_factory=ClusterQueuePreemption, json_schema_extra=DEFAULT_EMPTY_OBJECT
    )
    admission_checks: list[str] | None = None
    admission_checks_strategy: AdmissionChecksStrategy | None = None
    stop_policy: Literal["None", "Hold", "HoldAndDrain"] = "None"
    fair_sharing: FairSharing | None = None

    @model_validator(mode="after")
    def _one_way_to_name_admission_checks(self) -> Self:
        # Kueue's CEL rule on ClusterQueueSpec.
        if self.admission_checks and self.admission_checks_strategy is not None:
            raise ValueError("either admissionChecks or admissionChecksStrategy can be set, but not both")
        return self

    @model_validator(mode="after")
    def _fold_cohort_name(self) -> Self:
        if self.cohort_name is not None:
            if self.cohort is not None and self.cohort != self.cohort_name:
                raise ValueError(
                    f'cohort "{self.cohort}" and cohortName "{self.cohort_name}" disagree; set one'
                )
            self.cohort, self.cohort_name = self.cohort_name, None
        return self


class ClusterQueueEntry(WireModel):
    """A ClusterQueue plus the namespaces that get a LocalQueue of the same name."""

    name: str
    namespaces: list[str] = Field(default_factory=list)
    spec: ClusterQueueSpec = Field(default_factory=ClusterQueueSpec)


# --- ResourceFlavors, priority classes, topologies ---------------------------------------------------


class Taint(WireModel):
    key: str
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
    time_added: Time | None = None


class Toleration(WireModel):
    key: str | None = None
    operator: Literal["Exists", "Equal"] | None = None
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = None


class ResourceFlavorEntry(WireModel):
    """A Kueue ResourceFlavor; taints and tolerations become its `nodeTaints` and `tolerations`."""

    name: str
    node_labels: Annotated[dict[str, str], Field(max_length=10)] = Field(default_factory=dict)
    taints: Annotated[list[Taint], Field(max_length=5)] = Field(default_factory=list)
    tolerations: Annotated[list[Toleration], Field(max_length=5)] = Field(default_factory=list)
    topology_name: str | None = None


class WorkloadPriorityClassEntry(WireModel):
    """A Kueue WorkloadPriorityClass object (name under `metadata`, like the Kueue kind)."""

    api_version: str | None = None
    kind: str | None = None
    metadata: NameOnlyMeta = Field(default_factory=NameOnlyMeta)
    value: Annotated[int, Field(ge=-(2**31), le=INT32_MAX)]
    description: str | None = None

    @model_validator(mode="after")
    def _named(self) -> Self:
        if not self.metadata.name:
            raise NestedFieldError(("metadata", "name"), "required")
        return self


class TopologyLevel(WireModel):
    node_label: Annotated[str, Field(min_length=1, max_length=316)]


class TopologySpec(WireModel):
    levels: Annotated[list[TopologyLevel], Field(min_length=1, max_length=8)]

    @model_validator(mode="after")
    def _levels_are_unique_and_hostname_last(self) -> Self:
        labels = [level.node_label for level in self.levels]
        if len(set(labels)) != len(labels):
            raise ValueError("levels must have unique nodeLabels")
        if HOSTNAME_LABEL in labels[:-1]:
            raise ValueError(f"{HOSTNAME_LABEL} may only be the last level")
        return self


class TopologyEntry(WireModel):
    """A Kueue Topology object. Entries with an empty name are dropped by the controller."""

    api_version: str | None = None
    kind: str | None = None
    metadata: NameOnlyMeta = Field(default_factory=NameOnlyMeta)
    spec: TopologySpec


# --- the kind -----------------------------------------------------------------------------------------


class QueueConfigPhase(StrEnum):
    """`status.status` of the KaiwoQueueConfig: empty before the first sync, then READY or FAILED."""

    NEW = ""
    READY = "READY"
    FAILED = "FAILED"
    PENDING = "PENDING"
    """Legacy: written only by older upstream versions; accepted so their objects still parse."""


class KaiwoQueueConfigSpec(WireModel):
    """Desired Kueue objects; anything of these kinds not listed here is deleted by the controller."""

    cluster_queues: Annotated[list[ClusterQueueEntry], Field(max_length=1000)] = Field(default_factory=list)
    resource_flavors: Annotated[list[ResourceFlavorEntry], Field(max_length=20)] = Field(default_factory=list)
    workload_priority_classes: Annotated[list[WorkloadPriorityClassEntry], Field(max_length=20)] = Field(
        default_factory=list
    )
    topologies: Annotated[list[TopologyEntry], Field(max_length=10)] = Field(default_factory=list)


class KaiwoQueueConfigStatus(WireModel):
    status: QueueConfigPhase = Field(default=QueueConfigPhase.NEW, strict=False)
    conditions: list[Condition] = Field(default_factory=list)


class KaiwoQueueConfig(WireModel):
    """Cluster-scoped queue configuration; only the object named `kaiwo` is honoured."""

    api_version: Literal["kaiwo.silogen.ai/v1alpha1"] = KAIWO_API_VERSION
    kind: Literal["KaiwoQueueConfig"] = "KaiwoQueueConfig"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: KaiwoQueueConfigSpec = Field(default_factory=KaiwoQueueConfigSpec)
    status: KaiwoQueueConfigStatus | None = None
