"""The same-work peer of the operator benchmark: a kopf operator that does for each new KaiwoJob what
kaiwo-ray does on its way to PENDING, written as a kopf user would write it, with kopf's defaults.

Per new KaiwoJob, like kaiwo-ray:
- no finalizer (it has no `on.delete` handler, which would make kopf keep one: the children carry
  ownerReferences and the garbage collector removes them);
- the children rendered by `kaiwo_ray.render.render_all` (the same function kaiwo-ray uses), each
  server-side applied through the same thin `KubeClient`;
- status `PENDING` with the same conditions (`Schedulable`, `Admitted=False`) and
  `observedGeneration` as kaiwo-ray writes, through kopf's `patch.status`;
- the same two Events: `ResourceCreated` "Created batch/v1, Kind=Job: <name>" per child and
  `WorkloadPending` "Workload is pending admission", posted with `kopf.event` (Normal).
On top of that kopf writes its diff-base annotation (`last-handled-configuration`) after each handled
change: that is how it finds what changed on `on.update`, part of its design.

Not done: RUNNING and later phases (watching the child Jobs); the benchmark measures the way to
PENDING only. kaiwo-ray additionally watches and caches its Jobs, work this peer does not do.

Settings differ from kopf's defaults only where they are deployment choices unrelated to per-object
work (standalone peering, scanning disabled, one namespace, `watching.server_timeout`), and in
`posting.level = WARNING`: at kopf's default level (INFO) it posts each handler-progress log line
("Handler ... succeeded", "Creation is processed ...") as an extra Event, so the Events would not
match kaiwo-ray's. The two explicit Events are posted with `kopf.event`, which that level does not
filter (`kopf.info` would be filtered by it).

Standalone:  PYTHONPATH=benchmarks KUBECONFIG=... kopf run --standalone -n NAMESPACE benchmarks/peers/kopf_equivalent.py
"""

from __future__ import annotations

import asyncio
import logging
import threading
from datetime import UTC, datetime
from typing import Any

import kopf
from _runtime import deployed_loop
from peers.same_work import PENDING_EVENT, children_of, created_message, pending_status

from kaiwo_ray.api.config import KaiwoConfigSpec
from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.kube import resources as R
from kaiwo_ray.kube.client import KubeClient

KAIWOJOBS = ("kaiwo.silogen.ai", "v1alpha1", "kaiwojobs")


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    settings.posting.level = logging.WARNING  # see the module docstring
    settings.peering.standalone = True
    settings.scanning.disabled = True
    settings.watching.server_timeout = 300
    memo.client = await KubeClient.from_kubeconfig()
    nodes, _rv = await memo.client.list_all(R.NODES)
    memo.nodes = nodes
    memo.config = KaiwoConfigSpec()


@kopf.on.cleanup()
async def close(memo: kopf.Memo, **_: Any) -> None:
    await memo.client.close()


@kopf.on.login()
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    return kopf.login_via_client(**kwargs)


async def apply_children(body: kopf.Body, memo: kopf.Memo) -> list[JsonObj]:
    client: KubeClient = memo.client
    children = children_of(dict(body), memo.config, memo.nodes)
    for child in children:
        await client.apply(R.for_object(child), child, field_manager="kopf-peer")
    return children


@kopf.on.create(*KAIWOJOBS)
@kopf.on.resume(*KAIWOJOBS)
async def admit(body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo, reason: str, **_: Any) -> None:
    """Children, then status PENDING and its Events; on resume (operator restart) the children are
    re-applied (idempotent) and a status already written is left alone."""
    children = await apply_children(body, memo)
    if reason == kopf.Reason.CREATE:
        for child in children:
            kopf.event(body, type="Normal", reason="ResourceCreated", message=created_message(child))
    if not (body.get("status") or {}).get("status"):
        patch.status.update(pending_status(dict(body), memo.config, memo.nodes, datetime.now(UTC)))
        kopf.event(body, type="Normal", reason=PENDING_EVENT[0], message=PENDING_EVENT[1])


@kopf.on.update(*KAIWOJOBS, field="spec")
async def reapply(body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo, **_: Any) -> None:
    await apply_children(body, memo)
    patch.status["observedGeneration"] = body.get("metadata", {}).get("generation")


def run(namespace: str, stop_flag: threading.Event, ready_flag: threading.Event | None = None) -> None:
    """Run the operator on this thread until `stop_flag` is set (KUBECONFIG names the cluster)."""
    logging.getLogger("kopf").setLevel(logging.WARNING)
    kopf.configure(verbose=False, quiet=True)
    # on uvloop where installed, as `kopf run` deploys it (kopf.run() alone leaves the loop to us)
    with asyncio.Runner(loop_factory=deployed_loop) as runner:
        kopf.run(standalone=True, namespaces=[namespace], clusterwide=False, stop_flag=stop_flag,
                 ready_flag=ready_flag, loop=runner.get_loop())
