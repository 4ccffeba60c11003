"""`kaiwo-ray render`, driven through the real entry point (`hosts.cli.main.main`)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hosts.cli.main import main
from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.cli import render as render_cli

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"

CPU_JOB = """\
apiVersion: kaiwo.silogen.ai/v1alpha1
kind: KaiwoJob
metadata: {name: hello, namespace: team-a}
spec: {image: busybox:1.36, entrypoint: sleep 5}
"""
GPU_JOB = """\
apiVersion: kaiwo.silogen.ai/v1alpha1
kind: KaiwoJob
metadata: {name: trainer, namespace: default}
spec: {image: busybox:1.36, replicas: 3, gpusPerReplica: 4, entrypoint: sleep 5}
"""


def run_render(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["render", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def assert_one_line_error(err: str, *fragments: str) -> None:
    assert err.count("\n") == 1, err
    assert err.startswith("kaiwo-ray: ")
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, err


def env_of(container: JsonObj) -> dict[str, str]:
    return {item["name"]: item.get("value", "") for item in container.get("env", [])}


class TestSuccess:
    def test_workload_renders_yaml_documents(
        self, capsys: pytest.CaptureFixture[str], tmp_path: Path
    ) -> None:
        code, out, err = run_render(capsys, "-f", write(tmp_path, "job.yaml", CPU_JOB))
        assert (code, err) == (0, "")
        (job,) = list(yaml.safe_load_all(out))
        assert (job["kind"], job["metadata"]["name"]) == ("Job", "hello")
        assert job["spec"]["template"]["spec"]["containers"][0]["command"] == ["/bin/sh", "-c", "sleep 5"]

    def test_several_documents_render_in_order(
        self, capsys: pytest.CaptureFixture[str], tmp_path: Path
    ) -> None:
        text = CPU_JOB + "---\n" + (EXAMPLES / "queue-config.yaml").read_text(encoding="utf-8")
        code, out, _ = run_render(capsys, "-f", write(tmp_path, "all.yaml", text))
        assert code == 0
        kinds = [doc["kind"] for doc in yaml.safe_load_all(out)]
        assert kinds[0] == "Job"
        assert (
            kinds[1:]
            == ["ResourceFlavor", "ResourceFlavor", "ClusterQueue", "ClusterQueue", "LocalQueue"]
            + ["WorkloadPriorityClass"] * 2
        )

    def test_stdin(self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(CPU_JOB))
        code, out, _ = run_render(capsys, "-f", "-")
        assert code == 0
        assert yaml.safe_load(out)["kind"] == "Job"

    def test_json_output_is_a_v1_list(self, capsys: pytest.CaptureFixture[str]) -> None:
        code, out, _ = run_render(capsys, "-f", str(EXAMPLES / "gpu-job.yaml"), "-o", "json")
        assert code == 0
        document = json.loads(out)
        assert (document["apiVersion"], document["kind"]) == ("v1", "List")
        assert [item["kind"] for item in document["items"]] == [
            "PersistentVolumeClaim",
            "PersistentVolumeClaim",
            "ConfigMap",
            "Job",
            "Job",
        ]

    def test_json_input(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        manifest = yaml.safe_load(CPU_JOB)
        code, out, _ = run_render(
            capsys, "-f", write(tmp_path, "job.json", json.dumps(manifest, indent="\t"))
        )
        assert code == 0
        assert yaml.safe_load(out)["metadata"]["name"] == "hello"

    def test_multiline_strings_are_literal_blocks(self, capsys: pytest.CaptureFixture[str]) -> None:
        code, out, _ = run_render(capsys, "-f", str(EXAMPLES / "ray-service.yaml"))
        assert code == 0
        assert "serveConfigV2: |" in out
        assert "proxy_location: EveryNode\n" in out

    def test_kueue_version_v1beta1(self, capsys: pytest.CaptureFixture[str]) -> None:
        code, out, _ = run_render(
            capsys, "-f", str(EXAMPLES / "queue-config.yaml"), "--kueue-version", "v1beta1"
        )
        assert code == 0
        queues = [doc for doc in yaml.safe_load_all(out) if doc["kind"] == "ClusterQueue"]
        assert queues[0]["apiVersion"] == "kueue.x-k8s.io/v1beta1"
        assert queues[0]["spec"]["cohort"] == "kaiwo"

    def test_nodes_file_changes_gpu_arithmetic(
        self, capsys: pytest.CaptureFixture[str], tmp_path: Path
    ) -> None:
        source = write(tmp_path, "job.yaml", GPU_JOB)
        _, default_out, _ = run_render(capsys, "-f", source)
        _, small_out, _ = run_render(capsys, "-f", source, "--nodes", str(REPO / "docs" / "nodes.yaml"))
        default_env = env_of(yaml.safe_load(default_out)["spec"]["template"]["spec"]["containers"][0])
        small_env = env_of(yaml.safe_load(small_out)["spec"]["template"]["spec"]["containers"][0])
        # 3 x 4 AMD GPUs fit the default nodes (16 GPUs) as asked; the example file has one 8-GPU
        # node, so Kaiwo re-plans by node size: ceil(12 / 8) = 2 replicas of 6.
        assert [default_env[key] for key in ("NUM_GPUS", "NUM_REPLICAS", "NUM_GPUS_PER_REPLICA")] == [
            "12",
            "3",
            "4",
        ]
        assert [small_env[key] for key in ("NUM_GPUS", "NUM_REPLICAS", "NUM_GPUS_PER_REPLICA")] == [
            "12",
            "2",
            "6",
        ]

    def test_config_file_is_used(self, capsys: pytest.CaptureFixture[str]) -> None:
        code, out, _ = run_render(
            capsys, "-f", str(EXAMPLES / "ray-job.yaml"), "--config", str(EXAMPLES / "kaiwoconfig.yaml")
        )
        assert code == 0
        head = yaml.safe_load(out)["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
        assert head["containers"][0]["resources"]["limits"]["memory"] == "8Gi"

    def test_kaiwoconfig_is_printed_with_defaults(
        self, capsys: pytest.CaptureFixture[str], tmp_path: Path
    ) -> None:
        source = write(
            tmp_path,
            "config.yaml",
            "apiVersion: config.kaiwo.silogen.ai/v1alpha1\nkind: KaiwoConfig\nmetadata: {name: kaiwo}\n",
        )
        code, out, _ = run_render(capsys, "-f", source)
        assert code == 0
        config = yaml.safe_load(out)
        assert config["metadata"] == {"name": "kaiwo"}
        assert config["spec"]["ray"]["headPodMemory"] == "16Gi"
        assert config["spec"]["defaultTopologyName"] == "default-topology"

    def test_default_queue_config(self, capsys: pytest.CaptureFixture[str]) -> None:
        code, out, _ = run_render(capsys, "--default-queue-config", "--nodes", str(REPO / "docs" / "nodes.yaml"))
        assert code == 0
        documents = list(yaml.safe_load_all(out))
        assert documents[0]["kind"] == "KaiwoQueueConfig"
        assert [doc["kind"] for doc in documents[1:]] == ["Topology", *["ResourceFlavor"] * 3, "ClusterQueue"]

    def test_a_node_list_renders_as_its_default_queue_config(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        nodes = str(REPO / "docs" / "nodes.yaml")
        code, out, err = run_render(capsys, "-f", nodes)
        assert (code, err) == (0, "")
        assert out == run_render(capsys, "--default-queue-config", "--nodes", nodes)[1]


class TestBadInput:
    def test_missing_file(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        missing = str(tmp_path / "missing.yaml")
        code, out, err = run_render(capsys, "-f", missing)
        assert (code, out) == (2, "")
        assert_one_line_error(err, f"kaiwo-ray: {missing}: no such file")

    def test_invalid_yaml_names_line_and_column(
        self, capsys: pytest.CaptureFixture[str], tmp_path: Path
    ) -> None:
        source = write(tmp_path, "bad.yaml", "apiVersion: v1\nkind: KaiwoJob\n  metadata: x\n")
        code, out, err = run_render(capsys, "-f", source)
        assert (code, out) == (2, "")
        assert_one_line_error(err, f"{source}: line 3, column", "invalid YAML")

    def test_unknown_kind(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        source = write(tmp_path, "foo.yaml", "apiVersion: example.com/v1\nkind: Foo\nmetadata: {name: x}\n")
        code, _, err = run_render(capsys, "-f", source)
        assert code == 2
        assert_one_line_error(err, f'kaiwo-ray: {source}: kind: unknown kind "Foo"', "KaiwoJob")

    def test_invalid_field(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        source = write(tmp_path, "bad.yaml", CPU_JOB.replace("entrypoint: sleep 5", "gpus: -1"))
        code, _, err = run_render(capsys, "-f", source)
        assert code == 2
        assert_one_line_error(err, f"kaiwo-ray: {source}: spec.gpus: must be >= 0")

    def test_document_index_when_several(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        bad = CPU_JOB.replace("entrypoint: sleep 5", "gpus: -1")
        source = write(tmp_path, "two.yaml", CPU_JOB + "---\n" + bad)
        code, out, err = run_render(capsys, "-f", source)
        assert (code, out) == (2, "")  # nothing half-printed
        assert_one_line_error(err, f"kaiwo-ray: {source}: document 2: spec.gpus: must be >= 0")

    def test_unknown_field_suggests_the_right_one(
        self, capsys: pytest.CaptureFixture[str], tmp_path: Path
    ) -> None:
        source = write(tmp_path, "typo.yaml", CPU_JOB.replace("entrypoint: sleep 5", "gpuPerReplica: 2"))
        code, _, err = run_render(capsys, "-f", source)
        assert code == 2
        assert_one_line_error(err, "spec.gpuPerReplica: unknown field", "gpusPerReplica")

    def test_render_error(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        source = write(tmp_path, "noname.yaml", CPU_JOB.replace("{name: hello, namespace: team-a}", "{}"))
        code, _, err = run_render(capsys, "-f", source)
        assert code == 2
        assert_one_line_error(err, f"kaiwo-ray: {source}: metadata.name: required")

    def test_not_an_object(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        source = write(tmp_path, "scalar.yaml", "just a string\n")
        code, _, err = run_render(capsys, "-f", source)
        assert code == 2
        assert_one_line_error(err, f"{source}: expected an object (a mapping), got a string")

    def test_empty_file(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        source = write(tmp_path, "empty.yaml", "# nothing here\n---\n")
        code, _, err = run_render(capsys, "-f", source)
        assert code == 2
        assert_one_line_error(err, f"{source}: no objects found")

    def test_bad_nodes_file(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        nodes = write(tmp_path, "nodes.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")
        code, _, err = run_render(capsys, "-f", str(EXAMPLES / "cpu-job.yaml"), "--nodes", nodes)
        assert code == 2
        assert_one_line_error(err, f'kaiwo-ray: {nodes}: kind: expected Node, got "Pod"')

    def test_nodes_with_bad_capacity(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        nodes = write(
            tmp_path,
            "nodes.yaml",
            "kind: NodeList\napiVersion: v1\nitems:\n- kind: Node\n  metadata: {name: n1}\n"
            "  status: {capacity: {cpu: '8', memory: lots}}\n",
        )
        code, _, err = run_render(capsys, "-f", str(EXAMPLES / "cpu-job.yaml"), "--nodes", nodes)
        assert code == 2
        assert_one_line_error(err, f'{nodes}: node "n1": status.capacity.memory: invalid quantity "lots"')

    def test_a_node_list_with_nodes_is_ambiguous(self, capsys: pytest.CaptureFixture[str]) -> None:
        nodes = str(REPO / "docs" / "nodes.yaml")
        code, out, err = run_render(capsys, "-f", nodes, "--nodes", nodes)
        assert (code, out) == (2, "")
        assert_one_line_error(err, f"kaiwo-ray: {nodes}: holds Nodes")

    def test_config_of_the_wrong_kind(self, capsys: pytest.CaptureFixture[str]) -> None:
        config = str(EXAMPLES / "cpu-job.yaml")
        code, _, err = run_render(capsys, "-f", str(EXAMPLES / "cpu-job.yaml"), "--config", config)
        assert code == 2
        assert_one_line_error(err, f'kaiwo-ray: {config}: kind: expected KaiwoConfig, got "KaiwoJob"')

    def test_invalid_config_field(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        config = write(
            tmp_path,
            "config.yaml",
            "apiVersion: config.kaiwo.silogen.ai/v1alpha1\nkind: KaiwoConfig\nmetadata: {name: kaiwo}\n"
            "spec: {ray: {headPodMemory: lots}}\n",
        )
        code, _, err = run_render(capsys, "-f", str(EXAMPLES / "cpu-job.yaml"), "--config", config)
        assert code == 2
        assert_one_line_error(err, f"kaiwo-ray: {config}: spec.ray.headPodMemory:")

    def test_unexpected_exception_is_one_line_and_exit_1(
        self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        def broken(*args: object, **kwargs: object) -> list[JsonObj]:
            raise RuntimeError("boom")

        monkeypatch.setattr(render_cli, "render_object", broken)
        code, out, err = run_render(capsys, "-f", str(EXAMPLES / "cpu-job.yaml"))
        assert (code, out) == (1, "")
        assert_one_line_error(err, "internal error", "RuntimeError: boom")

    @pytest.mark.parametrize("example", ["queue-config.yaml", "kaiwoconfig.yaml"])
    def test_singletons_must_be_named_kaiwo(
        self, capsys: pytest.CaptureFixture[str], tmp_path: Path, example: str
    ) -> None:
        text = (EXAMPLES / example).read_text(encoding="utf-8").replace("name: kaiwo\n", "name: team-a\n", 1)
        source = write(tmp_path, example, text)
        code, out, err = run_render(capsys, "-f", source)
        assert (code, out) == (2, "")
        assert_one_line_error(err, f'kaiwo-ray: {source}: metadata.name: must be "kaiwo" (got "team-a")')

    def test_stdin_feeds_only_one_input(self, capsys: pytest.CaptureFixture[str]) -> None:
        code, _, err = run_render(capsys, "-f", "-", "--nodes", "-")
        assert code == 2
        assert_one_line_error(
            err, "kaiwo-ray: standard input (-) can feed only one of -f, --nodes and --config"
        )

    def test_debug_env_shows_the_traceback(
        self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        def broken(*args: object, **kwargs: object) -> list[JsonObj]:
            raise RuntimeError("boom")

        monkeypatch.setattr(render_cli, "render_object", broken)
        monkeypatch.setenv("KAIWO_RAY_DEBUG", "1")
        with pytest.raises(RuntimeError, match="boom"):
            main(["render", "-f", str(EXAMPLES / "cpu-job.yaml")])

    def test_file_and_default_queue_config_are_exclusive(self, capsys: pytest.CaptureFixture[str]) -> None:
        with pytest.raises(SystemExit) as exited:
            main(["render", "-f", "x.yaml", "--default-queue-config"])
        assert exited.value.code == 2
        assert "not allowed with argument" in capsys.readouterr().err


def test_real_subprocess() -> None:
    """The installed console script, as a user runs it: output on stdout, errors as one line."""
    script = Path(sys.executable).parent / "kaiwo-ray"

    # Both start at once: interpreter start-up dominates, and CI has two cores.
    def start(source: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [str(script), "render", "-f", source],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    bad_manifest = (
        "apiVersion: kaiwo.silogen.ai/v1alpha1\nkind: KaiwoJob\nmetadata: {name: x}\nspec: {gpus: -1}\n"
    )
    with start("examples/cpu-job.yaml") as ok, start("-") as bad:
        bad_out, bad_err = bad.communicate(bad_manifest, timeout=120)
        ok_out, ok_err = ok.communicate(timeout=120)
    assert ok.returncode == 0, ok_err
    assert yaml.safe_load(ok_out)["kind"] == "Job"
    assert bad.returncode == 2
    assert bad_out == ""
    assert bad_err == "kaiwo-ray: <stdin>: spec.gpus: must be >= 0 (got -1)\n"


def test_rendering_stays_light() -> None:
    """The render path never imports the operator's runtime (Ray, HTTP clients, the sandbox)."""
    code = (
        "import sys; from kaiwo_ray.cli.render import render_file, render_default_queue_config; "
        "render_file('examples/gpu-job.yaml'); render_file('examples/ray-service.yaml'); "
        "render_file('examples/queue-config.yaml'); render_default_queue_config(); "
        "heavy = ('ray', 'kubernetes', 'aiohttp', 'kaiwo_sandbox', 'hosts.runtime.operator_runtime'); "
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.strip() == "[]"


def test_closed_pipe_is_not_an_error() -> None:
    """`kaiwo-ray render ... | head`: no BrokenPipeError traceback when the reader stops early.
    `true` exits before reading anything, so the write always hits a pipe without a reader."""
    script = Path(sys.executable).parent / "kaiwo-ray"
    shell = f"{script} render -f examples/gpu-job.yaml | true"
    result = subprocess.run(
        ["/bin/sh", "-c", shell], cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0
    assert result.stderr == ""
