"""`kaiwo-ray simulate --html`: the pure renderer, and the page a `--compare` run writes, opened from
disk in a real headless Chromium (Debian's chromium + chromium-driver, `make browser`; Chart.js vendored
by `make vendor`): every chart draws the report's series, nothing is fetched, the console stays clean.
A screenshot lands in test-artifacts/simulate/ (gitignored)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from headless_chromium import start_chromium

from hosts.cli.main import main
from kaiwo_ray.simulation.html import page_data, render_html
from kaiwo_ray.simulation.report import Interval, Recording, WorkloadRecord, build_report, compare_reports
from kaiwo_ray.simulation.trace import parse_trace
from kaiwo_sandbox.testing import eventually

DATA = Path(__file__).parent / "data"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "simulate"
URL = re.compile(r"https?://|//[a-z0-9.-]+\.[a-z]{2,}/", re.IGNORECASE)

FAKE_LIBRARY = "/*!\n * a chart library\n * https://example.org\n */\nwindow.Chart = function () {}; // '</script>'\n"


def _report(evicted_at: float) -> dict[str, Any]:
    """A hand-made recording: `x` (2 GPUs at 50 % for 60 s, then idle) runs from 0, is evicted at
    `evicted_at` and readmitted at 100 until 150; `y` waits from 10 and never starts."""
    trace = parse_trace([
        '{"name": "x", "submit": 0, "user": "u", "queue": "q</script>", "gpus": 2, "duration": 500,'
        ' "utilization": [{"percent": 50, "seconds": 60}]}',
        '{"name": "y", "submit": 10, "user": "v", "queue": "r", "gpus": 8, "duration": 10}',
    ])
    recording = Recording([
        WorkloadRecord(1, "x", 0.0, [Interval(0.0, evicted_at, "InClusterQueue"), Interval(100.0, 150.0)], 150.0),
        WorkloadRecord(2, "y", 10.0),
    ], ended=200.0)
    return build_report(trace, recording, 8)


def test_the_series_are_step_functions_of_the_recording() -> None:
    series = _report(80.0)["series"]
    # 2 GPUs admitted 0..80 and 100..150; busy at 50 % for the first 60 s of each admission
    assert series["gpus_allocated"] == [[0.0, 2.0], [80.0, 0.0], [100.0, 2.0], [150.0, 0.0], [200.0, 0.0]]
    assert series["gpus_used"] == [[0.0, 1.0], [60.0, 0.0], [100.0, 1.0], [150.0, 0.0], [200.0, 0.0]]
    # x waits again between its eviction and readmission; y waits from 10 to the end
    assert series["pending"] == {"q</script>": [[0.0, 0.0], [80.0, 1.0], [100.0, 0.0], [200.0, 0.0]],
                                 "r": [[0.0, 0.0], [10.0, 1.0], [200.0, 0.0]]}


def test_the_page_is_self_contained_and_carries_the_figures() -> None:
    a, b = _report(80.0), _report(90.0)
    page = render_html([("a.yaml", a), ("b.yaml", b)], FAKE_LIBRARY, compare_reports(a, b))
    assert not URL.search(page), URL.search(page)
    assert not re.search(r"\s(src|href)=|url\(|@import", page)
    # the library is inline (its notice kept, its link plain text), and no text closes a script early
    assert "a chart library\n * example.org" in page
    assert page.count("</script>") == 3 and page.count("<script") == 3
    embedded = re.search(r'<script type="application/json" id=simulation-data>(.*?)</script>', page, re.S)
    assert embedded is not None
    data = json.loads(embedded.group(1))
    assert data == json.loads(json.dumps(page_data([("a.yaml", a), ("b.yaml", b)])))
    assert [run["label"] for run in data["runs"]] == ["a.yaml", "b.yaml"]
    # y never starts: queue r's wait distribution stays at 0; q's reaches 1 at x's wait (0)
    assert data["runs"][0]["waits"] == {"q</script>": [[0.0, 1.0]], "r": [[0.0, 0.0]]}
    assert data["time"] == {"label": "minutes", "max": 3.3333}
    assert data["gpus_max"] == 8 and data["pending_max"] == 1.0
    for index in (0, 1):
        assert all(f"<canvas id={chart}-{index}>" in page for chart in ("wait", "gpus", "pending"))
    assert "<b>0.072 -&gt; 0.078</b>" in page and "q&lt;/script&gt;" in page  # changed figures in bold


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    driver = start_chromium("1400,1800")
    yield driver
    driver.quit()


# Per canvas: its chart's datasets as [label, [[x, y], ...]], and whether any pixel is drawn.
_CHARTS = """
return Array.from(document.querySelectorAll('canvas')).map((canvas) => {
  const chart = Chart.getChart(canvas);
  const pixels = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  let drawn = false;
  for (let i = 3; i < pixels.length; i += 4) { if (pixels[i] !== 0) { drawn = true; break; } }
  return {id: canvas.id, drawn: drawn,
          datasets: chart ? chart.data.datasets.map((d) => [d.label, d.data.map((p) => [p.x, p.y])]) : null};
});
"""


def test_compare_writes_a_page_whose_charts_draw_offline(browser: Any, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "report.html"
    a, b = DATA / "two-teams.yaml", DATA / "team-b-16.yaml"
    assert main(["simulate", "--trace", str(DATA / "contention.jsonl"), "--compare", str(a), str(b), "-o", "json",
                 "--html", str(page)]) == 0
    result = json.loads(capsys.readouterr().out)
    expected = page_data([(str(a), result["a"]["report"]), (str(b), result["b"]["report"])])

    browser.get_log("browser")
    browser.get(page.as_uri())
    eventually(lambda: browser.execute_script("return document.body.dataset.ready === '1'"), 20, "page rendered")
    charts = eventually(lambda: (c := browser.execute_script(_CHARTS)) and all(x["drawn"] for x in c) and c,
                        20, "every canvas drawn")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / "compare.png"))

    assert [chart["id"] for chart in charts] == [f"{kind}-{i}" for i in (0, 1) for kind in ("wait", "gpus", "pending")]
    by_id = {chart["id"]: chart["datasets"] for chart in charts}
    for index, run in enumerate(expected["runs"]):
        assert by_id[f"gpus-{index}"] == [["allocated", run["gpus"]["allocated"]], ["used", run["gpus"]["used"]]]
        assert by_id[f"pending-{index}"] == [[queue, points] for queue, points in run["pending"].items()]
        assert by_id[f"wait-{index}"] == [[queue, points] for queue, points in run["waits"].items()]
    # B gives team-b 16 GPUs: b3 no longer waits, so team-b's pending line stays at 0 there
    assert max(y for _, y in dict(by_id["pending-0"])["team-b"]) == 1
    assert max(y for _, y in dict(by_id["pending-1"])["team-b"]) == 0
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
    console = [e["message"] for e in browser.get_log("browser") if e.get("level") == "SEVERE"]
    assert console == []


def test_html_without_the_vendored_library_is_refused_before_running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "chart.umd.min.js"
    monkeypatch.setattr("serve.dashboard.CHART_JS", missing)
    page = tmp_path / "report.html"
    assert main(["simulate", "--trace", str(DATA / "contention.jsonl"), "--queue-config", str(DATA / "two-teams.yaml"),
                 "--html", str(page)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and not page.exists()
    assert captured.err == f"kaiwo-ray simulate: --html needs Chart.js, vendored by `make vendor` at {missing}\n"
