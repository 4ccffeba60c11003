"""Imports each named module first, in a forked child of an interpreter that has loaded only
third-party code (run as a script by tests/test_imports.py).

argv: a file of third-party module names to preload, then the project modules to try. For each
project module it prints one line: `ok <module>` or `fail <module> <last line of the error>`.
Forking keeps every child free of project modules (the zygote imports none), so a circular import
among them fails in the child exactly as it would in a fresh interpreter; the ~0.3 s of importing
pydantic, aiohttp, ray and the rest is paid once instead of once per module.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback


def _preload(names: list[str]) -> None:
    for name in names:
        try:
            importlib.import_module(name)
        except BaseException:  # a third-party module that will not load alone is not preloaded
            continue


def _try(module: str) -> str:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: import, report, and leave without running any exit handlers
        os.close(read_end)
        try:
            importlib.import_module(module)
            line = f"ok {module}"
        except BaseException as error:  # every failure is the finding
            last = traceback.format_exception_only(type(error), error)[-1].strip().replace("\n", " ")
            line = f"fail {module} {last}"
        os.write(write_end, line.encode())
        os._exit(0)
    os.close(write_end)
    chunks = []
    while chunk := os.read(read_end, 65536):
        chunks.append(chunk)
    os.close(read_end)
    _, status = os.waitpid(pid, 0)
    text = b"".join(chunks).decode()
    return text if text else f"fail {module} the child died (wait status {status})"


def main() -> None:
    with open(sys.argv[1]) as preload:
        _preload([name for name in preload.read().split() if name])
    for module in sys.argv[2:]:
        print(_try(module), flush=True)


if __name__ == "__main__":
    main()
