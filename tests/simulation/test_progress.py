"""The progress bar of `kaiwo-ray simulate`: the renderer as a pure function, and once as a user sees
it, in a real terminal (tmux): the bar while it runs, then the report."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hosts.cli.simulate import ProgressBar
from kaiwo_ray.simulation.progress import Progress, bar, duration_text, eta, render, simulated_text

DATA = Path(__file__).parent / "data"


def test_the_bar_shows_done_then_submitted_then_waiting() -> None:
    assert bar(Progress(10, 6, 3, 2, 0.0, 1.0), 10) == "███▒▒▒░░░░"
    assert bar(Progress(10, 10, 10, 0, 0.0, 1.0), 10) == "█" * 10
    assert bar(Progress(3, 0, 0, 0, 0.0, 1.0), 6) == "░" * 6
    assert bar(Progress(0, 0, 0, 0, 0.0, 1.0), 4) == "░" * 4  # an empty trace: nothing to show yet


def test_figures_rate_and_eta() -> None:
    progress = Progress(1000, 600, 400, 12, 74_880.0, 30.0)  # 20.8 simulated hours in 30 s
    assert eta(progress) == 45.0  # 400 done in 30 s: 600 more take 45 s at that pace
    assert eta(Progress(10, 3, 0, 3, 50.0, 2.0)) is None
    line = render(progress, 200, "a.yaml")  # wide: the bar at its most, 40 cells
    assert line == ("a.yaml " + bar(progress, 40) + "  400/1,000 done  20.8h sim  2,496 sim s/s  ETA ~0:45  "
                    "12 running  600 sent")
    assert [simulated_text(s) for s in (42, 90, 7200)] == ["42s", "1.5m", "2.0h"]
    assert [duration_text(s) for s in (5, 125, 3725)] == ["0:05", "2:05", "1:02:05"]


def test_a_narrow_terminal_drops_figures_from_the_end_and_never_wraps() -> None:
    progress = Progress(1000, 600, 400, 12, 74_880.0, 30.0)
    for width in (20, 40, 60, 80, 100, 200):
        line = render(progress, width)
        assert len(line) <= width - 1, (width, line)
        assert "█" in line
    assert render(progress, 60).endswith("400/1,000 done  20.8h sim  2,496 sim s/s")


def test_the_shell_redraws_in_place_and_ends_with_a_newline() -> None:
    class Recorder:  # what the bar reads of hosts.runtime.simulator.Recorder
        by_name: dict[str, object] = {}
        finished, terminated, running = 1, 1, 0
        done = finished + terminated

        def now(self) -> float:
            return 60.0

    stream = io.StringIO()
    progress = ProgressBar(2, stream=stream, interval=3600.0)
    progress(Recorder())
    progress(Recorder())  # within the interval: not drawn again
    progress.close()
    text = stream.getvalue()
    assert text.count("\r") == 2 and text.endswith("\x1b[K\n")
    assert "2/2 done" in text


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed (make tools)")
def test_a_terminal_shows_the_bar_then_the_report(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(f'{{"submit": {i * 30}, "user": "u{i % 3}", "queue": "team-{"ab"[i % 2]}", '
                             f'"gpus": {1 + i % 8}, "duration": {120 + 37 * i}}}\n' for i in range(20)))
    session = f"kaiwo-simulate-{os.getpid()}"
    kaiwo_ray = Path(sys.executable).parent / "kaiwo-ray"
    command = (f"{kaiwo_ray} simulate --trace {trace} --queue-config {DATA / 'cohort.yaml'}; "
               "echo EXITED=$?; sleep 60")
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "150", "-y", "50", command], check=True)

    def screen() -> str:
        return subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True,
                              check=True).stdout

    try:
        deadline = time.monotonic() + 120
        while "EXITED=" not in screen():
            assert time.monotonic() < deadline, screen()
            time.sleep(0.2)
        shown = screen()
        assert "EXITED=0" in shown, shown
        bar_line = next(line for line in shown.splitlines() if "done" in line and "sim s/s" in line)
        assert "█" * 10 in bar_line and "20/20 done" in bar_line and "0 running  20 sent" in bar_line, shown
        assert shown.index(bar_line) < shown.index("team-a")  # the report follows the bar, on its own lines
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False)
