"""Who hears of a committed change: every change is recorded in `History`, then handed to the
watchers of its storage (HTTP watches), to every subscriber (the simulated cluster's controllers),
and to the write listeners (persistence: "something changed"), in that order.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kaiwo_sandbox.contracts import ApiError, StorageKey, WatchEvent
from kaiwo_sandbox.storage.history import History

log = logging.getLogger(__name__)

EventList = list[WatchEvent]
Listener = Callable[[WatchEvent], None]


def require_reached(rv: int, current: int) -> None:
    """504 for a version this server has not reached (the watch cache's TooLargeResourceVersion)."""
    if rv > current:
        raise ApiError(504, "Timeout", f"Too large resource version: {rv}, current: {current}",
                       {"causes": [{"reason": "ResourceVersionTooLarge",
                                    "message": "Too large resource version"}], "retryAfterSeconds": 1})


class Fanout:
    def __init__(self, history_limit: int) -> None:
        self.history = History(history_limit)
        self.write_listeners: list[Callable[[], None]] = []
        self._subscribers: list[Listener] = []
        self._watchers: dict[StorageKey, list[Listener]] = {}

    def subscribe(self, callback: Listener) -> Callable[[], None]:
        """Every change of every storage; returns the unsubscribe."""
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

        return unsubscribe

    def add_watcher(self, storage: StorageKey, callback: Listener) -> Callable[[], None]:
        """Like `subscribe`, but only for one storage (what HTTP watches use)."""
        callbacks = self._watchers.setdefault(storage, [])
        callbacks.append(callback)

        def remove() -> None:
            if callback in callbacks:
                callbacks.remove(callback)

        return remove

    def publish(self, storage: StorageKey, event: WatchEvent) -> None:
        self.history.record(event)
        for callback in list(self._watchers.get(storage, ())):
            callback(event)
        for subscriber in list(self._subscribers):
            try:
                subscriber(event)
            except Exception:
                log.exception("sandbox: subscriber failed on %s %s", event.type, event.gvr)
        for listener in self.write_listeners:
            listener()

    def since(self, storage: StorageKey, rv: int, current: int) -> EventList:
        """Committed events of `storage` newer than `rv`; 410 when history no longer has them, 504 for
        a version past `current`."""
        require_reached(rv, current)
        return self.history.since(storage, rv)

    def expire(self, current: int) -> None:
        """Forget all history (fault injection: the next resume or continue gets 410)."""
        self.history.forget(current)
