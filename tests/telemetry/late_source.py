"""A readings source for operator_sandbox tests whose real source needs the sandbox's address."""

from __future__ import annotations

from typing import Any


class LateSource:
    """Built before the sandbox is up and handed to the operator; `inner` (the real source, built
    once the sandbox's address is known) answers from then on, no readings before."""

    def __init__(self) -> None:
        self.inner: Any = None
        self.name = "late"

    async def readings(self, pods: Any) -> Any:
        return {} if self.inner is None else await self.inner.readings(pods)
