"""Storage children and download config (spec/workloads.md §6.5): every source kind and the fixed bugs."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from render_fixtures import CONFIG, children, container, job, main, service

from kaiwo_ray.api.config import KaiwoConfigSpec
from kaiwo_ray.render import RenderError, has_downloads


def storage(**fields: Any) -> dict[str, Any]:
    return {"image": "i", "storage": {"storageEnabled": True, **fields}}


def kinds(objs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(o["kind"], o["metadata"]["name"]) for o in objs]


def config_yaml(spec: dict[str, Any]) -> dict[str, Any]:
    objs = children(job(spec))
    (config_map,) = [o for o in objs if o["kind"] == "ConfigMap"]
    return yaml.safe_load(config_map["data"]["config.yaml"])  # type: ignore[no-any-return]


def test_disabled_storage_is_ignored_entirely() -> None:
    spec = {"image": "i", "storage": {"storageEnabled": False, "data": {"storageSize": "1Gi"}}}
    objs = children(job(spec))
    assert kinds(objs) == [("Job", "wl")]
    assert [v["name"] for v in objs[0]["spec"]["template"]["spec"]["volumes"]] == ["dshm"]


def test_data_volume_without_downloads_is_just_a_pvc_and_a_mount() -> None:
    objs = children(service(storage(data={"storageSize": "5Gi", "mountPath": "/data"})))
    assert kinds(objs) == [("PersistentVolumeClaim", "wl-data"), ("Deployment", "wl")]
    assert container(objs[1])["volumeMounts"][-1] == {"name": "data", "mountPath": "/data"}
    assert not has_downloads(service(storage(data={"storageSize": "5Gi"})))


def test_hf_pvc_is_created_whenever_its_size_is_set() -> None:
    # upstream created it only with preCacheRepos, yet pods always mounted it
    objs = children(job(storage(huggingFace={"storageSize": "20Gi"})))
    assert kinds(objs) == [("PersistentVolumeClaim", "wl-hf"), ("Job", "wl")]
    env = container(objs[1])["env"]
    assert {"name": "HF_HOME", "value": "/hf_cache"} in env


def test_storage_class_verbatim_then_kaiwoconfig_default_then_cluster_default() -> None:
    def pvc_spec(fields: dict[str, Any], config: KaiwoConfigSpec = CONFIG) -> dict[str, Any]:
        return children(job(storage(data={"storageSize": "1Gi"}, **fields)), config=config)[0]["spec"]  # type: ignore[no-any-return]

    assert pvc_spec({"storageClassName": "fast"})["storageClassName"] == "fast"
    assert pvc_spec({"storageClassName": ""})["storageClassName"] == ""
    assert "storageClassName" not in pvc_spec({})
    configured = KaiwoConfigSpec.model_validate({"storage": {"defaultStorageClass": "rwx-nfs"}})
    assert pvc_spec({}, configured)["storageClassName"] == "rwx-nfs"
    assert pvc_spec({"accessMode": "ReadWriteOnce"})["accessModes"] == ["ReadWriteOnce"]


def test_gcs_azure_and_git_sources_with_secret_file_paths() -> None:
    download = {
        "gcs": [
            {
                "applicationCredentials": {"secretName": "gcp", "secretKey": "sa.json"},
                "buckets": [{"name": "g", "files": [{"path": "a/b.bin", "targetPath": "b.bin"}]}],
            }
        ],
        "azureBlob": [
            {
                "connectionString": {"secretName": "az", "secretKey": "conn"},
                "containers": [{"name": "c", "folders": [{"path": "x/", "targetPath": "x", "glob": "*.pt"}]}],
            }
        ],
        "git": [
            {
                "repository": "https://github.com/o/r",
                "branch": "main",
                "path": "sub",
                "targetPath": "code",
                "username": {"secretName": "git", "secretKey": "user"},
                "token": {"secretName": "git", "secretKey": "tok"},
            }
        ],
    }
    document = config_yaml(storage(data={"storageSize": "1Gi", "download": download}))
    assert document == {
        "downloadRoot": "/workload",
        "hfHome": "",
        "gcs": [
            {
                "applicationCredentials": {
                    "file": "/app/secrets/gcp/sa.json",
                    "secretName": "gcp",
                    "secretKey": "sa.json",
                },
                "buckets": [
                    {"name": "g", "files": [{"path": "a/b.bin", "targetPath": "b.bin"}], "folders": []}
                ],
            }
        ],
        "azureBlob": [
            {
                "connectionString": {"file": "/app/secrets/az/conn", "secretName": "az", "secretKey": "conn"},
                "containers": [
                    {"name": "c", "files": [], "folders": [{"path": "x/", "targetPath": "x", "glob": "*.pt"}]}
                ],
            }
        ],
        "git": [
            {
                "repository": "https://github.com/o/r",
                "branch": "main",
                "username": {"file": "/app/secrets/git/user", "secretName": "git", "secretKey": "user"},
                "token": {"file": "/app/secrets/git/tok", "secretName": "git", "secretKey": "tok"},
                "path": "sub",
                "targetPath": "code",
            }
        ],
    }


def test_download_job_mounts_one_volume_per_secret_with_its_keys() -> None:
    download = {
        "s3": [
            {
                "endpointUrl": "e",
                "accessKeyId": {"secretName": "s", "secretKey": "id"},
                "secretKey": {"secretName": "s", "secretKey": "key"},
                "buckets": [],
            }
        ],
        "git": [{"repository": "r", "targetPath": "t", "token": {"secretName": "g", "secretKey": "tok"}}],
    }
    objs = children(job(storage(data={"storageSize": "1Gi", "download": download})))
    pod = objs[-2]["spec"]["template"]["spec"]
    secrets = [v for v in pod["volumes"] if "secret" in v]
    assert secrets == [
        {
            "name": "secret-s",
            "secret": {
                "secretName": "s",
                "items": [{"key": "id", "path": "id"}, {"key": "key", "path": "key"}],
            },
        },
        {"name": "secret-g", "secret": {"secretName": "g", "items": [{"key": "tok", "path": "tok"}]}},
    ]
    assert pod["containers"][0]["volumeMounts"][2:] == [
        {"name": "secret-s", "mountPath": "/app/secrets/s"},
        {"name": "secret-g", "mountPath": "/app/secrets/g"},
    ]


def test_anonymous_s3_and_user_given_file_paths_are_kept() -> None:
    download = {
        "s3": [
            {"endpointUrl": "public", "buckets": [{"name": "b"}]},
            {
                "endpointUrl": "e",
                "accessKeyId": {"file": "/mnt/id"},
                "secretKey": {"file": "/mnt/key"},
                "buckets": [],
            },
        ]
    }
    document = config_yaml(storage(data={"storageSize": "1Gi", "download": download}))
    assert document["s3"] == [
        {"endpointUrl": "public", "buckets": [{"name": "b", "files": [], "folders": []}]},
        {
            "endpointUrl": "e",
            "accessKeyId": {"file": "/mnt/id"},
            "secretKey": {"file": "/mnt/key"},
            "buckets": [],
        },
    ]


def test_hf_only_downloads_mount_no_data_volume() -> None:
    spec = storage(
        huggingFace={
            "storageSize": "9Gi",
            "mountPath": "/cache",
            "preCacheRepos": [{"repoId": "o/m", "files": ["config.json"]}],
        }
    )
    objs = children(job(spec))
    assert kinds(objs) == [
        ("PersistentVolumeClaim", "wl-hf"),
        ("ConfigMap", "wl-download"),
        ("Job", "wl-download"),
        ("Job", "wl"),
    ]
    assert yaml.safe_load(objs[1]["data"]["config.yaml"]) == {
        "downloadRoot": "",
        "hfHome": "/cache",
        "hf": [{"repoId": "o/m", "files": ["config.json"]}],
    }
    downloader = objs[2]["spec"]["template"]["spec"]
    assert [v["name"] for v in downloader["volumes"]] == ["config", "hf"]
    assert downloader["containers"][0]["env"] == [{"name": "HF_HOME", "value": "/cache"}]


def test_pre_cache_repos_without_hf_size_is_rejected() -> None:
    with pytest.raises(
        RenderError, match=r"^spec.storage.huggingFace.storageSize: required when preCacheRepos"
    ):
        main(job(storage(huggingFace={"preCacheRepos": [{"repoId": "o/m"}]})))


def test_downloads_without_data_size_are_ignored_like_upstream() -> None:
    # spec §1.3: object downloads are only honoured with a data volume; such manifests run upstream
    download = {"git": [{"repository": "r", "targetPath": "t"}]}
    assert [obj["kind"] for obj in children(job(storage(data={"download": download})))] == ["Job"]
    hf = {"storageSize": "1Gi", "preCacheRepos": [{"repoId": "o/m"}]}
    rendered = children(job(storage(data={"download": download}, huggingFace=hf)))
    config_map = next(obj for obj in rendered if obj["kind"] == "ConfigMap")
    assert "git" not in config_map["data"]["config.yaml"]


def test_secret_name_without_key_is_rejected_with_the_field_path() -> None:
    download = {"s3": [{"endpointUrl": "e", "accessKeyId": {"secretName": "s"}, "buckets": []}]}
    with pytest.raises(
        RenderError, match=r"^spec.storage.data.download.s3\[0\].accessKeyId.secretKey: required"
    ):
        children(job(storage(data={"storageSize": "1Gi", "download": download})))


def test_ray_pods_mount_storage_in_head_and_workers() -> None:
    obj = main(job({**storage(data={"storageSize": "1Gi"}), "ray": True}))
    for index in (0, 1):
        assert container(obj, index)["volumeMounts"][-1] == {"name": "data", "mountPath": "/workload"}


def test_unset_mount_paths_come_from_kaiwoconfig_storage_defaults() -> None:
    config = KaiwoConfigSpec.model_validate({"storage": {"defaultDataMountPath": "/data",
                                                         "defaultHfMountPath": "/models"}})
    spec = storage(data={"storageSize": "5Gi", "download": {"git": [{"repository": "https://example.com/r.git",
                                                                      "path": "src", "targetPath": "code"}]}},
                   huggingFace={"storageSize": "20Gi"})
    objs = children(job(spec), config=config)
    main_mounts = container(objs[-1])["volumeMounts"]
    assert {"name": "data", "mountPath": "/data"} in main_mounts
    assert {"name": "hf", "mountPath": "/models"} in main_mounts
    assert {"name": "HF_HOME", "value": "/models"} in container(objs[-1])["env"]
    (config_map,) = [o for o in objs if o["kind"] == "ConfigMap"]
    assert yaml.safe_load(config_map["data"]["config.yaml"])["downloadRoot"] == "/data"
    # A path the workload sets wins; without KaiwoConfig the defaults are upstream's CRD defaults.
    explicit = storage(data={"storageSize": "5Gi", "mountPath": "/mine"}, huggingFace={"storageSize": "1Gi"})
    assert {"name": "data", "mountPath": "/mine"} in container(children(job(explicit), config=config)[-1])[
        "volumeMounts"]
    plain = container(children(job(explicit))[-1])
    assert {"name": "hf", "mountPath": "/hf_cache"} in plain["volumeMounts"]


def test_gcs_and_azure_without_credentials_take_the_namespace_ones_or_say_which_field() -> None:
    from kaiwo_ray.api.aim import AIMNamespaceConfigSpec
    from kaiwo_ray.render.storage import borrowed_credentials, download_document
    from kaiwo_ray.render.workload import prepare

    workload = job(storage(data={"storageSize": "1Gi", "download": {
        "gcs": [{"buckets": [{"name": "b"}]}], "azureBlob": [{"containers": [{"name": "c"}]}]}}))
    namespace = AIMNamespaceConfigSpec.model_validate({"credentials": {
        "gcs": [{"applicationCredentials": {"secretName": "gcp", "secretKey": "sa.json"}}],
        "azureBlob": [{"connectionString": {"secretName": "az", "secretKey": "conn"}}]}})
    ctx = prepare(workload, CONFIG, [], namespace_config=namespace)
    document, mounts = download_document(ctx)
    assert document["gcs"][0]["applicationCredentials"]["file"] == "/app/secrets/gcp/sa.json"
    assert document["azureBlob"][0]["connectionString"]["secretName"] == "az"
    assert [(m.secret_name, m.keys) for m in mounts] == [("gcp", ("sa.json",)), ("az", ("conn",))]
    assert [(b.config_field, b.secret_name) for b in borrowed_credentials(ctx)] == [
        ("spec.credentials.gcs[0].applicationCredentials", "gcp"),
        ("spec.credentials.azureBlob[0].connectionString", "az")]
    with pytest.raises(RenderError, match=r"gcs\[0\]\.applicationCredentials: required"):
        download_document(prepare(workload, CONFIG, []))
