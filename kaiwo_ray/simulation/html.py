"""`kaiwo-ray simulate --html`: the report (or two, with `--compare`) as one self-contained HTML page
(pure: reports and the chart library's source in, the page out).

The page carries everything it needs: the chart library (Chart.js, vendored by `make vendor`) inline,
the figures as JSON inline, styles inline. It loads nothing, so it can be mailed or archived and
opened years later without network. Charts per run: the wait distribution per queue (share of the
queue's workloads started within a given wait), GPUs allocated and used over time, and workloads
pending per queue over time; with two runs, the same charts side by side on the same scales.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from kaiwo_ray.simulation.report import COMPARED, HOUR, _format_seconds

# A license banner of the library (`/*! ... */`) keeps its notice; only its links lose their scheme,
# so that the page holds no address a browser could follow.
_BANNER = re.compile(r"/\*![\s\S]*?\*/")
_SCHEME = re.compile(r"https?://")


def _time_unit(seconds: float) -> tuple[float, str]:
    """The unit a time axis reads best in, for spans up to `seconds`."""
    if seconds > 2 * HOUR:
        return HOUR, "hours"
    if seconds > 120:
        return 60.0, "minutes"
    return 1.0, "seconds"


def _scaled(series: Sequence[Sequence[float]], unit: float) -> list[list[float]]:
    return [[round(time / unit, 4), value] for time, value in series]


def wait_distribution(report: Mapping[str, Any], unit: float, until: float = 0.0) -> dict[str, list[list[float]]]:
    """Per queue, the points of its wait's cumulative distribution: `[wait, share of the queue's
    workloads started within that wait]`, carried on to `until` (so that a queue whose waits were
    all 0 still shows a line). Workloads that never started keep a queue's line below 1."""
    waits: dict[str, list[float]] = {name: [] for name in report["queues"]}
    for row in report["workloads"]:
        if row["wait"] is not None:
            waits.setdefault(row["queue"], []).append(row["wait"])
    result: dict[str, list[list[float]]] = {}
    for name in sorted(waits):
        total = report["queues"].get(name, {}).get("workloads") or len(waits[name]) or 1
        points: list[list[float]] = [[0.0, 0.0]]
        for count, wait in enumerate(sorted(waits[name]), start=1):
            x = round(wait / unit, 4)
            share = round(count / total, 4)
            if points[-1][0] == x:
                points[-1][1] = share
            else:
                points.append([x, share])
        if points[-1][0] < until:
            points.append([until, points[-1][1]])
        result[name] = points
    return result


def page_data(runs: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """What the page's script draws: per run its charts' points, and scales shared by all runs."""
    longest = max((report["simulated_seconds"] or 0.0 for _, report in runs), default=0.0)
    time_unit, time_label = _time_unit(longest)
    longest_wait = max((row["wait"] or 0.0 for _, report in runs for row in report["workloads"]), default=0.0)
    wait_unit, wait_label = _time_unit(longest_wait)
    charts = []
    for label, report in runs:
        series = report["series"]
        charts.append({
            "label": label,
            "waits": wait_distribution(report, wait_unit, round(longest_wait / wait_unit, 4)),
            "gpus": {"allocated": _scaled(series["gpus_allocated"], time_unit),
                     "used": _scaled(series["gpus_used"], time_unit)},
            "pending": {name: _scaled(points, time_unit) for name, points in series["pending"].items()},
        })
    return {
        "runs": charts,
        "time": {"label": time_label, "max": round(longest / time_unit, 4)},
        "wait": {"label": wait_label, "max": round(longest_wait / wait_unit, 4)},
        "gpus_max": max(report["overall"]["allocation"]["gpus_in_cluster"] for _, report in runs),
        "pending_max": max((value for _, report in runs for points in report["series"]["pending"].values()
                            for _, value in points), default=0.0),
    }


def _summary_table(report: Mapping[str, Any]) -> str:
    head = ("", "Workloads", "Never started", "Wait p50", "Wait p95", "Wait max", "GPU-h allocated", "GPU-h used",
            "Preempted")
    rows = [(f"queue {name}", s) for name, s in report["queues"].items()]
    rows += [(f"user {name}", s) for name, s in report["users"].items()]
    rows.append(("overall", report["overall"]))
    body = []
    for label, summary in rows:
        wait, hours = summary["wait_seconds"], summary["gpu_hours"]
        preempted = ", ".join(f"{cause} {n}" for cause, n in summary["preemptions"].items()) or "-"
        cells = (label, summary["workloads"], summary["never_started"], _format_seconds(wait["p50"]),
                 _format_seconds(wait["p95"]), _format_seconds(wait["max"]), f"{hours['allocated']:.1f}",
                 f"{hours['used']:.1f}", preempted)
        body.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
    return ("<table><thead><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead><tbody>"
            + "".join(body) + "</tbody></table>")


def _facts(report: Mapping[str, Any]) -> str:
    overall = report["overall"]
    hours, allocation = overall["gpu_hours"], overall["allocation"]
    text = (f"Simulated {_format_seconds(report['simulated_seconds'])} on {allocation['gpus_in_cluster']} GPUs: "
            f"{allocation['mean_gpus']:.1f} allocated on average, {allocation['peak_gpus']} at peak. "
            f"GPU-hours: {hours['capacity']:.1f} capacity, {hours['allocated']:.1f} allocated, "
            f"{hours['used']:.1f} used, {hours['idle']:.1f} idle.")
    if report.get("interrupted"):
        text += " Interrupted: the figures so far; workloads not started by then count as never started."
    elif report["never_started"]:
        text += f" Never started: {len(report['never_started'])}."
    return f"<p>{html.escape(text)}</p>"


def _comparison_table(a: str, b: str, comparison: Mapping[str, Any]) -> str:
    head = ["", *(".".join(path) for path in COMPARED)]
    body = []
    for group in comparison["groups"]:
        cells = [html.escape(group["group"])]
        for figure in group["figures"].values():
            changed = figure["a"] != figure["b"]
            cell = html.escape(f"{figure['a']} -> {figure['b']}")
            cells.append(f"<b>{cell}</b>" if changed else cell)
        body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return (f"<h2>A: {html.escape(a)} &nbsp; B: {html.escape(b)}</h2>"
            "<table><thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr></thead><tbody>"
            + "".join(body) + "</tbody></table><p>Changed figures in bold.</p>")


_STYLE = """
body { font: 14px system-ui, sans-serif; margin: 1.5em; color: #222; }
.runs { display: grid; grid-template-columns: repeat(var(--runs), minmax(0, 1fr)); gap: 2em; }
.chart { position: relative; height: 280px; margin-bottom: 1.5em; }
table { border-collapse: collapse; margin-bottom: 1em; }
td, th { border-bottom: 1px solid #ddd; padding: 2px 8px; text-align: right; }
td:first-child, th:first-child { text-align: left; }
"""

# Draws every chart from the inline JSON; sets body[data-ready] once all exist (tests wait on it).
_SCRIPT = """
(function () {
  const data = JSON.parse(document.getElementById('simulation-data').textContent);
  const colours = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf'];
  const xy = (points) => points.map((p) => ({x: p[0], y: p[1]}));
  function chart(id, datasets, xTitle, xMax, yTitle, yMax) {
    new Chart(document.getElementById(id), {
      type: 'line',
      data: {datasets: datasets.map((d, i) => Object.assign({
        stepped: true, pointRadius: 0, borderWidth: 2, fill: false,
        borderColor: colours[i % colours.length], backgroundColor: colours[i % colours.length]}, d))},
      options: {
        animation: false, parsing: false, normalized: true, maintainAspectRatio: false,
        plugins: {decimation: {enabled: true, algorithm: 'min-max'}},
        scales: {x: {type: 'linear', min: 0, max: xMax, title: {display: true, text: xTitle}},
                 y: {beginAtZero: true, suggestedMax: yMax, title: {display: true, text: yTitle}}},
      },
    });
  }
  data.runs.forEach((run, i) => {
    chart('wait-' + i, Object.entries(run.waits).map(([q, p]) => ({label: q, data: xy(p)})),
          'wait (' + data.wait.label + ')', data.wait.max, 'share started', 1);
    chart('gpus-' + i, [{label: 'allocated', data: xy(run.gpus.allocated)},
                        {label: 'used', data: xy(run.gpus.used)}],
          'simulated time (' + data.time.label + ')', data.time.max, 'GPUs', data.gpus_max);
    chart('pending-' + i, Object.entries(run.pending).map(([q, p]) => ({label: q, data: xy(p)})),
          'simulated time (' + data.time.label + ')', data.time.max, 'workloads pending', data.pending_max);
  });
  document.body.dataset.ready = '1';
})();
"""


def _inline_script(source: str) -> str:
    """`source` safe inside a <script> element, its banners' links made plain text."""
    source = _BANNER.sub(lambda banner: _SCHEME.sub("", banner.group(0)), source)
    return source.replace("</script", "<\\/script").replace("</SCRIPT", "<\\/SCRIPT")


def render_html(runs: Sequence[tuple[str, Mapping[str, Any]]], chart_js: str,
                comparison: Mapping[str, Any] | None = None) -> str:
    """The page for one run, or two side by side (`runs`: label, report) with `compare_reports`'
    comparison; `chart_js` is the source of Chart.js's UMD build."""
    data = json.dumps(page_data(runs), sort_keys=True, separators=(",", ":")).replace("<", "\\u003c")
    sections = []
    for index, (label, report) in enumerate(runs):
        sections.append(
            f"<section><h2>{html.escape(label)}</h2>{_facts(report)}"
            f"<h3>Wait until first admission, per queue</h3><div class=chart><canvas id=wait-{index}></canvas></div>"
            f"<h3>GPUs allocated and used</h3><div class=chart><canvas id=gpus-{index}></canvas></div>"
            f"<h3>Workloads pending, per queue</h3><div class=chart><canvas id=pending-{index}></canvas></div>"
            f"{_summary_table(report)}</section>")
    compared = (_comparison_table(runs[0][0], runs[1][0], comparison)
                if comparison is not None and len(runs) == 2 else "")
    return (
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
        "<title>kaiwo-ray simulate</title>"
        f"<style>{_STYLE}</style></head>\n<body>"
        f"<h1>kaiwo-ray simulate</h1>{compared}"
        f"<div class=runs style=\"--runs: {len(runs)}\">{''.join(sections)}</div>\n"
        f"<script type=\"application/json\" id=simulation-data>{data}</script>\n"
        f"<script>{_inline_script(chart_js)}</script>\n"
        f"<script>{_SCRIPT}</script>\n</body></html>\n"
    )
