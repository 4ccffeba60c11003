"""The AIMNamespaceConfig controller: writes each config's status (reconcile/aimnamespace.py decides it)
and the facts the workload controllers read of it (`namespace_facts`).

It is the only controller that reads Secrets, and it keeps of them only their key names (the cache's
transform drops every value): that is all `status.missingSecrets` needs, and a workload learns which
credential it lacks from that status instead of holding Secrets of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from kaiwo_ray import clock
from kaiwo_ray.api.aim import AIMNamespaceConfigSpec
from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.controllers.base import Controller, Key, Watch, own_key
from kaiwo_ray.kube import resources as R
from kaiwo_ray.kube.client import KubeClient
from kaiwo_ray.kube.errors import Conflict, NotFound
from kaiwo_ray.kube.events import EventRecorder
from kaiwo_ray.reconcile.aimnamespace import NamespaceConfigWorld, counted_config, decide

log = logging.getLogger(__name__)



def secret_key_names(obj: JsonObj) -> JsonObj:
    """A Secret reduced to its identity and key names (values blanked): what the cache keeps."""
    meta = obj.get("metadata") or {}
    keys = list((obj.get("data") or {}).keys()) + list((obj.get("stringData") or {}).keys())
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion") if k in meta},
            "data": dict.fromkeys(keys, "")}


def _parse_spec(obj: JsonObj) -> AIMNamespaceConfigSpec | None:
    try:
        return AIMNamespaceConfigSpec.model_validate(obj.get("spec") or {})
    except ValueError as err:
        log.warning("AIMNamespaceConfig %s/%s is invalid, ignoring it: %s",
                    (obj.get("metadata") or {}).get("namespace"), (obj.get("metadata") or {}).get("name"), err)
        return None


def namespace_facts(configs: Iterable[JsonObj], namespace: str
                    ) -> tuple[str, AIMNamespaceConfigSpec | None, dict[tuple[str, str], str]]:
    """(name, spec, {(secretName, secretKey): reason} missing) of the config that counts in `namespace`;
    ("", None, {}) without one (or when it is invalid)."""
    counted = counted_config([c for c in configs if (c.get("metadata") or {}).get("namespace") == namespace])
    if counted is None:
        return "", None, {}
    spec = _parse_spec(counted)
    if spec is None:
        return "", None, {}
    missing = {(str(m.get("secretName") or ""), str(m.get("secretKey") or "")): str(m.get("reason") or "")
               for m in (counted.get("status") or {}).get("missingSecrets") or []}
    return str(counted["metadata"].get("name") or ""), spec, missing


class AIMNamespaceConfigController(Controller):
    name = "aimnamespaceconfig-controller"

    def __init__(self, client: KubeClient, **kwargs: Any) -> None:
        super().__init__(client, **kwargs)
        self.recorder = EventRecorder(client, self.name)

    def watches(self) -> list[Watch]:
        return [
            Watch(R.AIMNAMESPACECONFIGS, self._config_keys),
            Watch(R.SECRETS, self._namespace_keys, transform=secret_key_names),
            Watch(R.GATEWAYS, self._gateway_keys),
        ]

    def _configs_in(self, namespace: str) -> list[JsonObj]:
        return [c for c in self.caches[R.AIMNAMESPACECONFIGS]
                if (c.get("metadata") or {}).get("namespace") == namespace]

    def _namespace_keys(self, event_type: str, obj: JsonObj, old: JsonObj | None) -> list[Key]:
        """Every config of the object's namespace: a config coming or going changes which one counts,
        a Secret changes what they find."""
        if R.AIMNAMESPACECONFIGS not in self.caches:
            return []
        namespace = (obj.get("metadata") or {}).get("namespace") or ""
        return [own_key("SYNC", c, None)[0] for c in self._configs_in(namespace)]

    def _config_keys(self, event_type: str, obj: JsonObj, old: JsonObj | None) -> list[Key]:
        keys = self._namespace_keys(event_type, obj, old)
        return keys + [k for k in own_key(event_type, obj, old) if k not in keys]

    def _gateway_keys(self, event_type: str, obj: JsonObj, old: JsonObj | None) -> list[Key]:
        if event_type == "MODIFIED" or R.AIMNAMESPACECONFIGS not in self.caches:
            return []
        meta = obj.get("metadata") or {}
        where = (meta.get("namespace") or "", meta.get("name") or "")
        keys: list[Key] = []
        for config in self.caches[R.AIMNAMESPACECONFIGS]:
            cmeta = config.get("metadata") or {}
            gateway = (config.get("spec") or {}).get("gateway") or {}
            if (gateway.get("namespace") or cmeta.get("namespace"), gateway.get("name")) == where:
                keys.append(own_key("SYNC", config, None)[0])
        return keys

    async def reconcile(self, key: Key) -> float | None:
        namespace, name = key
        obj = self.caches[R.AIMNAMESPACECONFIGS].get(namespace, name)
        if obj is None or (obj.get("metadata") or {}).get("deletionTimestamp"):
            return None
        spec = _parse_spec(obj)
        if spec is None:
            return None
        secrets = self.caches[R.SECRETS]

        def secret_keys(secret: str) -> frozenset[str] | None:
            found = secrets.get(namespace, secret)
            return None if found is None else frozenset((found.get("data") or {}).keys())

        gateways = self.caches[R.GATEWAYS] if R.GATEWAYS in self.informers else None
        world = NamespaceConfigWorld(
            obj=obj, configs=self._configs_in(namespace), secret_keys=secret_keys,
            gateway_exists=(lambda ns, gw: gateways.get(ns, gw) is not None) if gateways is not None else None,
            now=clock.now())
        plan = decide(world, spec)
        if plan.status is not None:
            patch = {"metadata": {"resourceVersion": obj["metadata"].get("resourceVersion")}, "status": plan.status}
            try:
                result = await self.client.patch(R.AIMNAMESPACECONFIGS, name, patch, namespace, subresource="status")
            except NotFound:
                return None
            except Conflict:
                return 0.05  # a newer version is on its way through the watch: decide again on it
            result.setdefault("kind", "AIMNamespaceConfig")
            result.setdefault("apiVersion", R.AIMNAMESPACECONFIGS.api_version)
            self.caches[R.AIMNAMESPACECONFIGS].upsert_if_newer(result)
            obj = result
        for event_type, reason, message in plan.events:
            self.recorder.emit(obj, event_type, reason, message)
        return None

    async def drain(self) -> None:
        await self.recorder.flush()
