"""The `kaiwo manage` screen on textual: a live table of workloads and actions on the selected one
(logs, pods, explain, GPUs, run a command in its pod, port-forward to it, delete with confirmation),
upstream's manage actions. Cluster calls run in worker threads; the backend is the only part that
talks to the cluster. Port-forwards run in the background while the screen stays up and end with it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import ClassVar

from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Header, Input, Label, RichLog

from kaiwo_ray.api.jsonobj import JsonObj
from kaiwo_ray.cli.api import Api, ApiStatusError, path_of
from kaiwo_ray.cli.errors import CliError, ClusterError
from kaiwo_ray.cli.portforward import Forwarder, parse_ports
from kaiwo_ray.cli.table import age, render_table
from kaiwo_ray.cli.workloads import TYPES, container_rows, default_container, phase, pods_of, type_of
from kaiwo_ray.kube.resources import PODS

REFRESH_SECONDS = 2.0


@dataclass
class ClusterBackend:
    api: Api
    namespace: str | None = None
    user: str | None = None
    only: str | None = None

    def workloads(self) -> list[JsonObj]:
        items: list[JsonObj] = []
        for wtype in TYPES:
            if self.only and wtype.short != self.only:
                continue
            for item in self.api.list(wtype.path(self.namespace)).get("items") or []:
                item.setdefault("kind", wtype.kind)
                if self.user is None or (item.get("spec") or {}).get("user") == self.user:
                    items.append(item)
        return sorted(items, key=lambda i: (i["metadata"].get("namespace", ""), i["metadata"]["name"]))

    def logs(self, workload: JsonObj, tail: int = 200) -> str:
        pods = [p for p in pods_of(self.api, workload) if (p.get("status") or {}).get("phase") != "Pending"]
        if not pods:
            return "no started pods yet"
        pod = pods[0]
        response = self.api.raw("GET", path_of(PODS, pod["metadata"]["namespace"],
                                                     pod["metadata"]["name"], "log"),
                                query={"container": default_container(pod), "tailLines": tail}, accept="*/*")
        return f"== {pod['metadata']['name']} ==\n" + response.data.decode(errors="replace")

    def pods(self, workload: JsonObj) -> str:
        rows = container_rows(pods_of(self.api, workload))
        return render_table(["POD", "PHASE", "CONTAINER", "STATE"], rows) if rows else "no pods yet"

    def explain(self, workload: JsonObj) -> str:
        import argparse
        import contextlib
        import io

        from kaiwo_ray.cli import explain

        out = io.StringIO()
        args = argparse.Namespace(workload=f"{type_of(workload).short}/{workload['metadata']['name']}",
                                  namespace=workload["metadata"].get("namespace"), output="text")
        with contextlib.redirect_stdout(out):
            explain.explain_with(self.api, args)
        return out.getvalue()

    def monitor(self, workload: JsonObj) -> str:
        import io

        from kaiwo_ray.cli.monitor import gpu_report

        out = io.BytesIO()
        if not gpu_report(self.api, str(workload["metadata"].get("namespace")), pods_of(self.api, workload), out):
            return "no running pod with GPUs"
        return out.getvalue().decode(errors="replace")

    def delete(self, workload: JsonObj) -> None:
        meta = workload["metadata"]
        self.api.delete(type_of(workload).path(meta.get("namespace"), meta["name"]))

    def _running_pod(self, workload: JsonObj) -> JsonObj:
        running = [p for p in pods_of(self.api, workload) if (p.get("status") or {}).get("phase") == "Running"]
        if not running:
            raise ClusterError(f"{type_of(workload).short}/{workload['metadata']['name']} has no running pod")
        return running[0]

    def run_command(self, workload: JsonObj, command: str) -> str:
        """`sh -c COMMAND` in the workload's first running pod (its main container): output and exit code."""
        import io

        from kaiwo_ray.cli.exec_cmd import execute

        pod = self._running_pod(workload)
        meta = pod["metadata"]
        out, err = io.BytesIO(), io.BytesIO()
        code = execute(self.api, path_of(PODS, meta["namespace"], meta["name"], "exec"),
                       default_container(pod), ["/bin/sh", "-c", command], stdin=False, tty=False,
                       stdout=out, stderr=err)
        text = (out.getvalue() + err.getvalue()).decode(errors="replace")
        return f"$ {command}   (pod {meta['name']})\n{text}(exit code {code})"

    def port_forward(self, workload: JsonObj, ports: str) -> tuple[Forwarder, str]:
        """Forward `ports` (`LOCAL:REMOTE`, `:REMOTE` for any free local port, or `PORT`) to the
        workload's first running pod, in the background; the forwarder and a line saying where."""
        pairs = parse_ports(ports.split())
        pod = self._running_pod(workload)
        meta = pod["metadata"]
        forwarder = Forwarder(self.api, path_of(PODS, meta["namespace"], meta["name"],
                                                      "portforward"), pairs, "127.0.0.1")
        forwarder.serve()
        where = ", ".join(f"127.0.0.1:{local} -> {remote}" for local, remote in forwarder.ports())
        return forwarder, f"Forwarding from {where} (pod {meta['name']}); press s to stop"


class AskText(ModalScreen[str | None]):
    """One line of input (a command, ports): Enter answers, Escape cancels."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel")]

    def __init__(self, question: str, placeholder: str) -> None:
        super().__init__()
        self.question, self.placeholder = question, placeholder

    def compose(self) -> ComposeResult:
        with Vertical(id="question"):
            yield Label(self.question)
            yield Input(placeholder=self.placeholder, id="answer")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ConfirmDelete(ModalScreen[bool]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("y", "answer(True)", "yes"), Binding("n", "answer(False)", "no"),
                                             Binding("escape", "answer(False)", "no")]

    def __init__(self, what: str) -> None:
        super().__init__()
        self.what = what

    def compose(self) -> ComposeResult:
        yield Vertical(Label(f"Delete {self.what}? Its pods and children go too. [y/n]", id="question"))

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)


class ManageApp(App[None]):
    TITLE = "kaiwo manage"
    CSS = """
    DataTable { height: 1fr; }
    RichLog { height: 1fr; border-top: solid $accent; }
    ConfirmDelete, AskText { align: center middle; }
    #question { padding: 1 2; border: thick $error; background: $surface; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("l", "logs", "logs"), Binding("p", "pods", "pods"), Binding("e", "explain", "explain"),
        Binding("m", "monitor", "GPUs"), Binding("c", "command", "run command"),
        Binding("f", "forward", "port-forward"), Binding("s", "stop_forwards", "stop forwards"),
        Binding("d", "delete", "delete"), Binding("r", "refresh", "refresh"), Binding("q", "quit", "quit")]

    def __init__(self, backend: ClusterBackend) -> None:
        super().__init__()
        self.backend = backend
        self.rows: list[JsonObj] = []
        self.forwarders: list[Forwarder] = []
        self.detail_text = ""  # what the detail pane shows (read by tests and screen readers alike)

    def compose(self) -> ComposeResult:
        yield Header()
        table: DataTable[str] = DataTable(cursor_type="row", id="workloads")
        table.add_columns("TYPE", "NAMESPACE", "NAME", "USER", "STATUS", "AGE")
        yield table
        yield RichLog(id="detail", wrap=True, markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.action_refresh()
        self.set_interval(REFRESH_SECONDS, self.action_refresh)

    # -- data -------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="refresh")
    def action_refresh(self) -> None:
        try:
            rows = self.backend.workloads()
        except CliError as err:
            self.call_from_thread(self.show, f"error: {err.message}")
            return
        self.call_from_thread(self.fill, rows)

    def fill(self, rows: list[JsonObj]) -> None:
        table = self.query_one("#workloads", DataTable)
        selected = self.selected()
        key = (selected["metadata"].get("namespace"), selected["metadata"]["name"]) if selected else None
        self.rows = rows
        table.clear()
        now = datetime.now(UTC)
        for item in rows:
            meta = item["metadata"]
            table.add_row(type_of(item).short, str(meta.get("namespace", "")), str(meta["name"]),
                          str((item.get("spec") or {}).get("user") or ""), phase(item) or "-",
                          age(meta.get("creationTimestamp"), now))
        for index, item in enumerate(rows):
            if key == (item["metadata"].get("namespace"), item["metadata"]["name"]):
                table.move_cursor(row=index)
        self.sub_title = f"{len(rows)} workload(s)"

    def selected(self) -> JsonObj | None:
        table = self.query_one("#workloads", DataTable)
        if not self.rows or table.cursor_row is None or table.cursor_row >= len(self.rows):
            return None
        return self.rows[table.cursor_row]

    def show(self, text: str) -> None:
        self.detail_text = text
        detail = self.query_one("#detail", RichLog)
        detail.clear()
        detail.write(text)

    def _label(self, item: JsonObj) -> str:
        return f"{type_of(item).short}/{item['metadata']['name']}"

    # -- actions ----------------------------------------------------------------------------
    def _act(self, what: str) -> None:
        item = self.selected()
        if item is None:
            self.show("no workload selected")
            return
        self.run_detail(what, item)

    @work(thread=True, exclusive=True, group="detail")
    def run_detail(self, what: str, item: JsonObj) -> None:
        try:
            text = {"logs": self.backend.logs, "pods": self.backend.pods, "explain": self.backend.explain,
                    "monitor": self.backend.monitor}[what](item)
        except (CliError, ApiStatusError) as err:
            text = f"error: {err.message}"
        self.call_from_thread(self.show, f"[{what} of {self._label(item)}]\n{text}")

    def action_logs(self) -> None:
        self._act("logs")

    def action_pods(self) -> None:
        self._act("pods")

    def action_explain(self) -> None:
        self._act("explain")

    def action_monitor(self) -> None:
        self._act("monitor")

    def _ask_then(self, question: str, placeholder: str, act: Callable[[JsonObj, str], object]) -> None:
        """Ask one line about the selected workload; `act(workload, answer)` unless cancelled or empty."""
        item = self.selected()
        if item is None:
            self.show("no workload selected")
            return

        def answered(answer: str | None) -> None:
            if answer:
                act(item, answer)

        self.push_screen(AskText(question.format(workload=self._label(item)), placeholder), answered)

    def action_command(self) -> None:
        self._ask_then("Run in a pod of {workload} (sh -c):", "nvidia-smi; ls /workload", self.run_in_pod)

    @work(thread=True, exclusive=True, group="detail")
    def run_in_pod(self, item: JsonObj, command: str) -> None:
        try:
            text = self.backend.run_command(item, command)
        except (CliError, ApiStatusError) as err:
            text = f"error: {err.message}"
        self.call_from_thread(self.show, f"[command in {self._label(item)}]\n{text}")

    def action_forward(self) -> None:
        self._ask_then("Port-forward to a pod of {workload}: LOCAL:REMOTE, or :REMOTE for any free local port",
                       ":8080", self.start_forward)

    @work(thread=True, group="forward")
    def start_forward(self, item: JsonObj, ports: str) -> None:
        try:
            forwarder, text = self.backend.port_forward(item, ports)
        except (CliError, ApiStatusError) as err:
            text = f"error: {err.message}"
        else:
            self.forwarders.append(forwarder)
        self.call_from_thread(self.show, text)

    def action_stop_forwards(self) -> None:
        stopped = len(self.forwarders)
        for forwarder in self.forwarders:
            forwarder.stop()
        self.forwarders.clear()
        self.show(f"stopped {stopped} port-forward(s)")

    def on_unmount(self) -> None:
        for forwarder in self.forwarders:
            forwarder.stop()

    def action_delete(self) -> None:
        item = self.selected()
        if item is None:
            self.show("no workload selected")
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.delete_now(item)
            else:
                self.show(f"kept {self._label(item)}")

        self.push_screen(ConfirmDelete(self._label(item)), answered)

    @work(thread=True, group="delete")
    def delete_now(self, item: JsonObj) -> None:
        try:
            self.backend.delete(item)
            message = f"deleted {self._label(item)}"
        except CliError as err:
            message = f"error: {err.message}"
        self.call_from_thread(self.show, message)
        self.call_from_thread(self.action_refresh)
