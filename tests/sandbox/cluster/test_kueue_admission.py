"""Kueue's quota arithmetic and job integrations as pure functions: quantities, pod requests, flavor
assignment and its pending messages, cohorts, preemption victims, webhook defaults, pod sets."""

from __future__ import annotations

import copy
import hashlib

import pytest

from kaiwo_sandbox.cluster.kuberay.appwrapper_webhook import parse_path
from kaiwo_sandbox.cluster.kueue.admission import (
    FIT,
    NO_FIT,
    PREEMPT,
    Candidate,
    FlavorInfo,
    PodSetRequest,
    QuotaBook,
    assign_flavors,
    parse_cluster_queue,
    preemption_targets,
)
from kaiwo_sandbox.cluster.kueue.jobs import (
    ADMISSION_GATE,
    FRAMEWORKS,
    MANAGED_LABEL,
    PodSetInfo,
    suspend_on_create,
    validate_rayjob,
    workload_name,
)
from kaiwo_sandbox.cluster.resources import spec_requests_milli
from kaiwo_sandbox.contracts import APPWRAPPERS, JOBS, PODS, RAYJOBS, JsonObj
from kaiwo_sandbox.semantics.quantity import QuantityError, format_milli, parse_milli

GPU = "amd.com/gpu"


def cq(name: str, gpus: int | str, *, cohort: str | None = None, flavors: tuple[str, ...] = ("mi300x",),
       borrowing: int | None = None, lending: int | None = None, **spec: object) -> JsonObj:
    quotas = []
    for flavor in flavors:
        resource: JsonObj = {"name": GPU, "nominalQuota": gpus}
        if borrowing is not None:
            resource["borrowingLimit"] = borrowing
        if lending is not None:
            resource["lendingLimit"] = lending
        quotas.append({"name": flavor, "resources": [resource, {"name": "cpu", "nominalQuota": 64}]})
    body: JsonObj = {"resourceGroups": [{"coveredResources": [GPU, "cpu"], "flavors": quotas}], **spec}
    if cohort:
        body["cohortName"] = cohort
    return {"metadata": {"name": name}, "spec": body}


def book_of(*queues: JsonObj) -> QuotaBook:
    book = QuotaBook()
    book.set_specs(parse_cluster_queue(q) for q in queues)
    return book


def podset(gpus: int, count: int = 1, **kwargs: object) -> PodSetRequest:
    return PodSetRequest("main", count, {GPU: gpus * 1000, "cpu": 1000}, **kwargs)  # type: ignore[arg-type]


FLAVORS = {"mi300x": FlavorInfo("mi300x", {"pool": "mi300x"}), "h100": FlavorInfo("h100", {"pool": "h100"})}


class TestQuantities:
    @pytest.mark.parametrize(("text", "milli"), [("500m", 500), ("2", 2000), (8, 8000), ("1Ki", 1_024_000),
                                                 ("1.5", 1500), ("1e3", 1_000_000), ("1G", 10**12)])
    def test_parse(self, text: object, milli: int) -> None:
        assert parse_milli(text) == milli

    @pytest.mark.parametrize("bad", ["", "abc", "1Qi", True, None])
    def test_bad_quantities_raise_a_clear_error(self, bad: object) -> None:
        with pytest.raises(QuantityError):
            parse_milli(bad)

    def test_format_keeps_units_readable(self) -> None:
        assert format_milli("cpu", 500) == "500m"
        assert format_milli("nvidia.com/gpu", 8000) == "8"
        assert format_milli("memory", 2 * 1024**3 * 1000) == "2Gi"

    def test_pod_requests_sum_containers_cover_init_and_default_to_limits(self) -> None:
        spec = {"containers": [{"resources": {"requests": {"cpu": "1"}, "limits": {GPU: "2"}}},
                               {"resources": {"requests": {"cpu": "500m"}}}],
                "initContainers": [{"resources": {"requests": {"cpu": "4"}}}],
                "overhead": {"cpu": "100m"}}
        assert spec_requests_milli(spec) == {"cpu": 4100, GPU: 2000}

    def test_native_sidecars_run_alongside_the_main_containers(self) -> None:
        spec = {"containers": [{"resources": {"requests": {"cpu": "1"}}}],
                "initContainers": [{"restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}}]}
        assert spec_requests_milli(spec) == {"cpu": 2000}


class TestFlavorAssignment:
    def test_fits_in_the_first_flavor(self) -> None:
        book = book_of(cq("cq", 16))
        result = assign_flavors("cq", [podset(8)], book, FLAVORS)
        assert result.mode == FIT
        assert result.to_api() == [{"name": "main", "flavors": {GPU: "mi300x", "cpu": "mi300x"},
                                    "resourceUsage": {GPU: "8", "cpu": "1"}, "count": 1}]

    def test_pending_message_says_how_much_more_is_needed(self) -> None:
        book = book_of(cq("cq", 16))
        book.add_usage("cq", {("mi300x", GPU): 16000})
        result = assign_flavors("cq", [podset(8)], book, FLAVORS)
        assert result.mode == NO_FIT
        assert result.message == ("couldn't assign flavors to pod set main: insufficient unused quota for "
                                  "amd.com/gpu in flavor mi300x, 8 more needed")

    def test_request_larger_than_the_queue_can_ever_hold(self) -> None:
        result = assign_flavors("cq", [podset(8, count=3)], book_of(cq("cq", 16)), FLAVORS)
        assert result.mode == NO_FIT
        assert "current podset request (24) > maximum capacity (16)" in result.message

    def test_uncovered_resource_is_unavailable(self) -> None:
        request = PodSetRequest("main", 1, {"nvidia.com/gpu": 1000})
        result = assign_flavors("cq", [request], book_of(cq("cq", 16)), FLAVORS)
        assert result.message == "couldn't assign flavors to pod set main: resource nvidia.com/gpu unavailable in ClusterQueue"

    def test_next_flavor_is_tried_when_the_first_is_full(self) -> None:
        book = book_of(cq("cq", 8, flavors=("mi300x", "h100")))
        book.add_usage("cq", {("mi300x", GPU): 8000})
        result = assign_flavors("cq", [podset(8)], book, FLAVORS)
        assert result.mode == FIT
        assert result.podsets[0].flavors[GPU] == "h100"

    def test_node_selector_excludes_flavors_with_other_labels(self) -> None:
        book = book_of(cq("cq", 8, flavors=("mi300x", "h100")))
        result = assign_flavors("cq", [podset(1, node_selector={"pool": "h100"})], book, FLAVORS)
        assert result.podsets[0].flavors[GPU] == "h100"

    def test_untolerated_flavor_taint_is_reported(self) -> None:
        tainted = {"mi300x": FlavorInfo("mi300x", {}, ({"key": "gpu", "value": "amd", "effect": "NoSchedule"},))}
        result = assign_flavors("cq", [podset(1)], book_of(cq("cq", 8)), tainted)
        assert result.mode == NO_FIT
        assert "untolerated taint {gpu amd NoSchedule <nil>} in flavor mi300x" in result.message
        tolerating = podset(1, tolerations=({"key": "gpu", "operator": "Exists"},))
        assert assign_flavors("cq", [tolerating], book_of(cq("cq", 8)), tainted).mode == FIT

    def test_missing_resource_flavor(self) -> None:
        result = assign_flavors("cq", [podset(1)], book_of(cq("cq", 8)), {})
        assert "flavor mi300x not found" in result.message

    def test_later_pod_sets_see_what_earlier_ones_took(self) -> None:
        head = PodSetRequest("head", 1, {GPU: 8000})
        workers = PodSetRequest("workers", 2, {GPU: 8000})
        result = assign_flavors("cq", [head, workers], book_of(cq("cq", 16)), FLAVORS)
        assert result.mode == NO_FIT
        assert "pod set workers" in result.message
        assert "previously considered podsets requests (8) + current podset request (16)" in result.message


class TestCohorts:
    def test_borrows_unused_quota_of_the_cohort(self) -> None:
        book = book_of(cq("a", 8, cohort="team"), cq("b", 8, cohort="team"))
        result = assign_flavors("a", [podset(12)], book, FLAVORS)
        assert result.mode == FIT
        assert result.borrows
        book.add_usage("a", result.usage)
        assert book.borrowed("a", ("mi300x", GPU)) == 4000
        assert book.available("b", ("mi300x", GPU)) == 4000

    def test_borrowing_limit_caps_what_a_queue_takes(self) -> None:
        book = book_of(cq("a", 8, cohort="team", borrowing=2), cq("b", 8, cohort="team"))
        assert book.available("a", ("mi300x", GPU)) == 10000
        assert assign_flavors("a", [podset(12)], book, FLAVORS).mode == NO_FIT

    def test_lending_limit_keeps_part_of_the_quota_home(self) -> None:
        book = book_of(cq("a", 8, cohort="team"), cq("b", 8, cohort="team", lending=2))
        assert book.available("a", ("mi300x", GPU)) == 10000
        assert book.available("b", ("mi300x", GPU)) == 16000

    def test_without_a_cohort_nothing_is_borrowed(self) -> None:
        book = book_of(cq("a", 8), cq("b", 8))
        assert assign_flavors("a", [podset(12)], book, FLAVORS).mode == NO_FIT


class TestPreemption:
    def book(self) -> QuotaBook:
        book = book_of(cq("cq", 16, preemption={"withinClusterQueue": "LowerPriority"}))
        book.add_usage("cq", {("mi300x", GPU): 16000})
        return book

    def candidates(self) -> list[Candidate]:
        usage = {("mi300x", GPU): 8000}
        return [Candidate(("ns", "old-low"), 0, 1.0, 1.0, usage), Candidate(("ns", "new-low"), 0, 2.0, 2.0, usage),
                Candidate(("ns", "high"), 100, 3.0, 3.0, usage)]

    def test_full_queue_with_preemption_allowed_reports_preempt_mode(self) -> None:
        assert assign_flavors("cq", [podset(8)], self.book(), FLAVORS).mode == PREEMPT

    def test_takes_the_lowest_priority_most_recently_admitted(self) -> None:
        targets = preemption_targets("cq", {("mi300x", GPU): 8000}, 50, 9.0, self.candidates(), self.book())
        assert [t.key for t in targets or []] == [("ns", "new-low")]

    def test_takes_only_as_many_as_needed(self) -> None:
        targets = preemption_targets("cq", {("mi300x", GPU): 16000}, 50, 9.0, self.candidates(), self.book())
        assert sorted(t.key[1] for t in targets or []) == ["new-low", "old-low"]

    def test_never_preempts_equal_or_higher_priority(self) -> None:
        assert preemption_targets("cq", {("mi300x", GPU): 8000}, 0, 9.0, self.candidates(), self.book()) is None


class TestJobIntegrations:
    def test_workload_name_is_kind_name_and_a_sha1_prefix(self) -> None:
        digest = hashlib.sha1(b"Job\nbatch\ntrain\nuid-1").hexdigest()[:5]
        assert workload_name("Job", "train", "uid-1", "batch") == f"job-train-{digest}"

    def test_queued_jobs_are_suspended_at_creation(self) -> None:
        job: JsonObj = {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "q"}}, "spec": {"suspend": False}}
        suspend_on_create(JOBS, job)
        assert job["spec"]["suspend"] is True

    def test_unqueued_and_child_jobs_are_left_alone(self) -> None:
        plain: JsonObj = {"metadata": {}, "spec": {}}
        suspend_on_create(JOBS, plain)
        assert "suspend" not in plain["spec"]
        child: JsonObj = {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "q"},
                                       "ownerReferences": [{"kind": "RayJob", "name": "x", "controller": True}]},
                          "spec": {}}
        suspend_on_create(JOBS, child)
        assert "suspend" not in child["spec"]

    def test_queued_pods_are_gated_and_marked_managed(self) -> None:
        pod: JsonObj = {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "q"}}, "spec": {}}
        suspend_on_create(PODS, pod)
        assert pod["spec"]["schedulingGates"] == [{"name": ADMISSION_GATE}]
        assert pod["metadata"]["labels"][MANAGED_LABEL] == "true"

    def test_rayjob_rules_for_queued_jobs(self) -> None:
        rayjob: JsonObj = {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "q"}},
                           "spec": {"clusterSelector": {"a": "b"}}}
        fields = [f for f, _, _ in validate_rayjob(rayjob)]
        assert fields == ["spec.clusterSelector", "spec.shutdownAfterJobFinishes"]

    def test_rayjob_pod_sets_are_head_groups_and_submitter(self) -> None:
        rayjob: JsonObj = {"metadata": {"name": "rj"}, "spec": {"rayClusterSpec": {
            "headGroupSpec": {"template": {"spec": {"containers": [{"image": "ray:2"}]}}},
            "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "numOfHosts": 2, "template": {}}]}}}
        sets = FRAMEWORKS[RAYJOBS.resource].podsets(rayjob)
        assert [(s.name, s.count) for s in sets] == [("head", 1), ("gpu", 4), ("submitter", 1)]
        assert sets[2].template["spec"]["containers"][0]["image"] == "ray:2"

    def test_appwrapper_pod_sets_follow_declared_paths(self) -> None:
        aw: JsonObj = {"metadata": {"name": "aw"}, "spec": {"components": [{
            "template": {"spec": {"rayClusterConfig": {"workerGroupSpecs": [{"template": {"spec": {"x": 1}}}]}}},
            "podSets": [{"replicas": 3, "path": "template.spec.rayClusterConfig.workerGroupSpecs[0].template"}]}]}}
        sets = FRAMEWORKS[APPWRAPPERS.resource].podsets(aw)
        assert [(s.name, s.count, s.template) for s in sets] == [("aw-0", 3, {"spec": {"x": 1}})]
        assert parse_path("a.b[2].c") == ("a", "b", 2, "c")

    def test_start_injects_flavor_labels_and_stop_restores_the_template(self) -> None:
        fw = FRAMEWORKS[JOBS.resource]
        job: JsonObj = {"spec": {"suspend": True, "template": {"spec": {"nodeSelector": {"zone": "a"}}}}}
        original = copy.deepcopy(fw.podsets(job))  # as recorded in the Workload
        fw.start(job, [PodSetInfo("main", {"pool": "mi300x"}, [])])
        assert job["spec"] == {"suspend": False,
                               "template": {"spec": {"nodeSelector": {"zone": "a", "pool": "mi300x"}}}}
        fw.stop(job, original)
        assert job["spec"] == {"suspend": True, "template": {"spec": {"nodeSelector": {"zone": "a"}}}}
