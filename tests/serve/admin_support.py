"""Helpers shared by the admin API tests."""

from __future__ import annotations

from typing import Any

import httpx


def kaiwojob(name: str, namespace: str, *, user: str = "ann@example.com", labels: dict[str, str] | None = None,
             **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "kaiwo.silogen.ai/v1alpha1", "kind": "KaiwoJob",
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
            "spec": {"user": user, "image": "busybox", "entrypoint": "sleep 100000", **spec}}


def submit(http: httpx.Client, obj: dict[str, Any]) -> httpx.Response:
    return http.post("/api/v1/workloads", json=obj)
