"""The progress bar of `kaiwo-ray simulate`, as a pure function of where the run stands: one line
that fits the terminal, redrawn in place by the command (hosts/cli/simulate.py).

    a.yaml ██████▒▒▒░░░░░░░  412/1,000 done  20.8h sim  1,399 sim s/s  ETA ~0:42  12 running  600 sent

The bar: `█` the workloads done (finished, or ended for good by the operator), `▒` those submitted
and not done yet, `░` those not submitted. `sim s/s` is simulated seconds per wall second. The ETA
assumes the rest of the trace goes as fast per workload as what is done so far (`--` until one is
done); it is a guess, and says so with `~`.
"""

from __future__ import annotations

from dataclasses import dataclass

DONE, SUBMITTED, WAITING = "█", "▒", "░"
MIN_BAR = 10


@dataclass(frozen=True, slots=True)
class Progress:
    total: int  # workloads in the trace
    submitted: int
    done: int  # finished, or ended for good (terminated)
    running: int
    simulated: float  # simulated seconds since the trace's time 0
    wall: float  # wall seconds since the run started


def bar(progress: Progress, width: int) -> str:
    """`width` cells: done, then submitted-but-not-done, then not yet submitted (rounded down, so a
    full bar means everything is done)."""
    if width <= 0:
        return ""
    total = max(progress.total, 1)
    done = min(width, progress.done * width // total)
    submitted = min(width, max(progress.submitted, progress.done) * width // total)
    return DONE * done + SUBMITTED * (submitted - done) + WAITING * (width - submitted)


def simulated_text(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"


def duration_text(seconds: float) -> str:
    """A wall duration as h:mm:ss or m:ss."""
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def eta(progress: Progress) -> float | None:
    """Wall seconds left at the pace so far (per workload done); None before the first is done."""
    if progress.done <= 0 or progress.wall <= 0:
        return None
    return progress.wall * (progress.total - progress.done) / progress.done


def render(progress: Progress, width: int, label: str = "") -> str:
    """One line, at most `width - 1` characters (the last column is left free so that no terminal
    wraps it). Past the bar's minimum width, the figures are dropped from the end to fit."""
    rate = progress.simulated / progress.wall if progress.wall > 0 else 0.0
    left = eta(progress)
    figures = [  # most wanted first: a narrow terminal drops them from the end
        f"{progress.done:,}/{progress.total:,} done",
        f"{simulated_text(progress.simulated)} sim",
        f"{rate:,.0f} sim s/s",
        f"ETA ~{duration_text(left)}" if left is not None else "ETA --",
        f"{progress.running:,} running",
        f"{progress.submitted:,} sent",
    ]
    room = width - 1
    prefix = f"{label} " if label else ""
    while figures:
        text = "  ".join(figures)
        bar_width = room - len(prefix) - len(text) - 2
        if bar_width >= MIN_BAR:
            return f"{prefix}{bar(progress, min(bar_width, 40))}  {text}"
        figures.pop()
    return (prefix + bar(progress, max(room - len(prefix), 0)))[:max(room, 0)]
