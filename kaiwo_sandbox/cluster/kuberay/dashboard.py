"""KubeRay's Ray dashboard client (utils/dashboard_httpclient.go) for clusters whose head is a real
Ray node (`--local-image`): GET and PUT `/api/serve/applications/` and the head's Serve proxy
`/-/healthz`, with KubeRay's 2 s timeout. Calls run on a worker thread so the sandbox's event loop
never waits on Ray: a reconcile starts a call and reads the answer of the last one that finished.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

TIMEOUT_SECONDS = 2.0


@dataclass(frozen=True, slots=True)
class Answer:
    status: int  # 0: no answer (connection refused, timeout)
    body: str

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def json(self) -> object:
        try:
            return json.loads(self.body)
        except ValueError:
            return None


def _call(method: str, url: str, body: bytes | None) -> Answer:
    request = urllib.request.Request(url, data=body, method=method,
                                     headers={"Content-Type": "application/json"} if body is not None else {})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
            return Answer(response.status, response.read().decode(errors="replace"))
    except urllib.error.HTTPError as err:
        return Answer(err.code, err.read().decode(errors="replace"))
    except (OSError, ValueError) as err:
        return Answer(0, str(err))


class DashboardCalls:
    """One call in flight per key; `result(key)` is the last finished answer (None before any)."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="sandbox-kuberay-http")
        self._in_flight: dict[Hashable, Future[Answer]] = {}
        self._answers: dict[Hashable, Answer] = {}

    def start(self, key: Hashable, method: str, url: str, body: bytes | None = None) -> None:
        if key in self._in_flight and not self._in_flight[key].done():
            return
        self._in_flight[key] = self._pool.submit(_call, method, url, body)

    def result(self, key: Hashable) -> Answer | None:
        future = self._in_flight.get(key)
        if future is not None and future.done():
            self._answers[key] = future.result()
            del self._in_flight[key]
        return self._answers.get(key)

    def busy(self, key: Hashable) -> bool:
        future = self._in_flight.get(key)
        return future is not None and not future.done()

    def forget(self, key: Hashable) -> None:
        self._in_flight.pop(key, None)
        self._answers.pop(key, None)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
