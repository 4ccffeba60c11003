"""Benchmark: the Kubernetes API sandbox measured with the real `kubernetes` client.

Server and client run in separate processes. Prints each figure with its unit and target
(targets are for a 2-core machine); never fails on a missed target — figures go in the notes.

    .venv/bin/python benchmarks/sandbox.py [--creates N] [--gets N] [--watch-seconds S]
"""

from __future__ import annotations

import argparse
import sys
import time

from _sandbox_floor import sandbox_floor


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--creates", type=int, default=1000)
    parser.add_argument("--gets", type=int, default=1000)
    parser.add_argument("--watch-seconds", type=float, default=5.0)
    args = parser.parse_args()
    started = time.monotonic()
    figures = sandbox_floor(creates=args.creates, gets=args.gets, watch_seconds=args.watch_seconds)
    for line in figures.lines():
        print(line)
    print(f"benchmark wall time: {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
