"""A tiny shell for simulated containers (pure): what `kubectl exec` runs and what an entrypoint
script prints to its log.

No process runs in the sandbox, so commands are interpreted: `sh -c`/`bash -c` scripts split on
`;`, `&&`, `||` and newlines, `|` pipes, `$VAR` expansion from the container's env, and a set of
builtins (echo, printf, cat, env, hostname, true/false/exit, ...) including the GPU tools a
workload's image would carry: `nvidia-smi` in pods with `nvidia.com/gpu` limits, `amd-smi` and
`rocm-smi` in pods with `amd.com/gpu` limits (utilisation from the
`sandbox.kaiwo-ray.dev/gpu-utilization` annotation). Anything else is `not found` (exit 127).
"""

from __future__ import annotations

import contextlib
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field

from kaiwo_sandbox.contracts import JsonObj

GPU_UTILIZATION = "sandbox.kaiwo-ray.dev/gpu-utilization"
SHELLS = frozenset({"sh", "bash", "ash", "dash", "zsh"})
CONTROL = frozenset({"do", "done", "then", "fi", "else", "elif", "esac", "{", "}"})
_VAR = re.compile(r"\$(\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*)|\?)")


@dataclass
class Context:
    """Who runs the command: the pod, the container and its environment."""

    pod: JsonObj
    container: str
    env: dict[str, str] = field(default_factory=dict)
    last_status: int = 0

    @classmethod
    def of(cls, pod: JsonObj, container: str) -> Context:
        meta = pod.get("metadata") or {}
        env = {"HOSTNAME": str(meta.get("name", "")), "HOME": "/root",
               "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
        for spec in _containers(pod):
            if spec.get("name") == container:
                for item in spec.get("env") or []:
                    env[str(item.get("name", ""))] = str(item.get("value", ""))
        return cls(pod=pod, container=container, env=env)


@dataclass
class Result:
    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0


class _Exit(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


def _containers(pod: JsonObj) -> list[JsonObj]:
    spec = pod.get("spec") or {}
    return [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]


def run(argv: list[str], ctx: Context, stdin: str = "") -> Result:
    """Run one command as the container runtime would exec it (argv, no shell unless it names one)."""
    out = Result()
    try:
        out = _run_argv(argv, ctx, stdin)
    except _Exit as done:
        out.exit_code = done.code
    return out


def run_script(script: str, ctx: Context, stdin: str = "") -> Result:
    total = Result()
    try:
        _script(script, ctx, stdin, total)
    except _Exit as done:
        total.exit_code = done.code
    return total


def entrypoint_output(container: JsonObj, ctx: Context) -> str:
    """What a container's command printed (for pods/log): only the output of the builtins, since the
    real programs (python, ray ...) never ran; errors of unknown commands are left out."""
    argv = [str(a) for a in [*(container.get("command") or []), *(container.get("args") or [])]]
    if not argv:
        return ""
    program = argv[0].rsplit("/", 1)[-1]
    script = _shell_script(argv) if program in SHELLS else shlex.join(argv)
    if script is None:
        return ""
    return run_script(script, ctx).stdout


def _shell_script(argv: list[str]) -> str | None:
    for index, arg in enumerate(argv[1:], start=1):
        if arg.startswith("-") and "c" in arg[1:] and index + 1 < len(argv):
            at = index + 2 if argv[index + 1] == "--" else index + 1
            return argv[at] if at < len(argv) else None
    return None


def _tokens(line: str) -> list[str]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        return list(lexer)
    except ValueError:  # unbalanced quotes
        return line.split()


def _script(script: str, ctx: Context, stdin: str, total: Result) -> None:
    for line in script.splitlines():
        tokens = _tokens(line)
        # statements joined by ; && || ; each a pipeline of |
        statement: list[str] = []
        connector = ";"
        for token in [*tokens, ";"]:
            if token in (";", "&&", "||", "&"):
                if statement:
                    skip = (connector == "&&" and ctx.last_status != 0) or (connector == "||" and ctx.last_status == 0)
                    if not skip:
                        result = _pipeline(statement, ctx, stdin)
                        total.stdout += result.stdout
                        total.stderr += result.stderr
                        total.exit_code = ctx.last_status = result.exit_code
                statement, connector = [], (token if token != "&" else ";")
            else:
                statement.append(token)


def _pipeline(tokens: list[str], ctx: Context, stdin: str) -> Result:
    stages: list[list[str]] = [[]]
    for token in tokens:
        if token == "|":
            stages.append([])
        else:
            stages[-1].append(token)
    data, errors, result = stdin, "", Result()
    for stage in stages:
        words = [_expand(w, ctx) for w in stage]
        while words and words[0] in CONTROL:
            words = words[1:]
        if not words:
            continue
        result = _run_argv(words, ctx, data)
        data, errors = result.stdout, errors + result.stderr
    return Result(data if stages else "", errors, result.exit_code)


def _expand(word: str, ctx: Context) -> str:
    def value(match: re.Match[str]) -> str:
        if match.group(0) == "$?":
            return str(ctx.last_status)
        return ctx.env.get(match.group(2) or match.group(3) or "", "")

    return _VAR.sub(value, word)


def _run_argv(argv: list[str], ctx: Context, stdin: str) -> Result:
    program = argv[0].rsplit("/", 1)[-1]
    if program in SHELLS:
        script = _shell_script(argv)
        if script is None:
            return run_script(stdin, ctx)  # `sh` reading its script from stdin
        return run_script(script, ctx, stdin)
    if "=" in program and not program.startswith("="):  # VAR=value
        name, _, value = argv[0].partition("=")
        ctx.env[name] = value
        return _run_argv(argv[1:], ctx, stdin) if len(argv) > 1 else Result()
    builtin = BUILTINS.get(program)
    if builtin is None or not _available(program, ctx):
        return Result(stderr=f"sh: 1: {argv[0]}: not found\n", exit_code=127)
    return builtin(argv[1:], ctx, stdin)


# ---------------------------------------------------------------------------------------- builtins
def _echo(args: list[str], ctx: Context, stdin: str) -> Result:
    newline, escapes = True, False
    while args and args[0] in ("-n", "-e", "-ne", "-en", "-E"):
        newline = newline and "n" not in args[0]
        escapes = escapes or "e" in args[0]
        args = args[1:]
    text = " ".join(args)
    if escapes:
        text = text.encode().decode("unicode_escape")
    return Result(text + ("\n" if newline else ""))


def _printf(args: list[str], ctx: Context, stdin: str) -> Result:
    if not args:
        return Result(stderr="printf: usage: printf format [arguments]\n", exit_code=2)
    fmt = args[0].encode().decode("unicode_escape")
    values = iter(args[1:])
    text = re.sub(r"%[-0-9.]*[sdif%]", lambda m: "%" if m.group(0) == "%%" else next(values, ""), fmt)
    return Result(text)


def _cat(args: list[str], ctx: Context, stdin: str) -> Result:
    if not args or args == ["-"]:
        return Result(stdin)
    out, err, code = "", "", 0
    for path in args:
        content = _file(path, ctx)
        if content is None:
            err += f"cat: {path}: No such file or directory\n"
            code = 1
        else:
            out += content
    return Result(out, err, code)


def _file(path: str, ctx: Context) -> str | None:
    meta = ctx.pod.get("metadata") or {}
    files = {
        "/etc/hostname": f"{meta.get('name', '')}\n",
        "/etc/os-release": 'PRETTY_NAME="kaiwo-ray sandbox"\nID=sandbox\n',
        "/var/run/secrets/kubernetes.io/serviceaccount/namespace": str(meta.get("namespace", "")),
    }
    return files.get(path)


def _env(args: list[str], ctx: Context, stdin: str) -> Result:
    if args:
        return _run_argv(args, ctx, stdin)
    return Result("".join(f"{k}={v}\n" for k, v in ctx.env.items()))


def _printenv(args: list[str], ctx: Context, stdin: str) -> Result:
    if not args:
        return _env([], ctx, stdin)
    found = [ctx.env[a] for a in args if a in ctx.env]
    return Result("".join(f"{v}\n" for v in found), exit_code=0 if len(found) == len(args) else 1)


def _exit(args: list[str], ctx: Context, stdin: str) -> Result:
    try:
        code = int(args[0]) % 256 if args else ctx.last_status
    except ValueError:
        code = 2
    raise _Exit(code)


def _wc(args: list[str], ctx: Context, stdin: str) -> Result:
    if "-l" in args:
        return Result(f"{stdin.count(chr(10))}\n")
    return Result(f"{stdin.count(chr(10))} {len(stdin.split())} {len(stdin.encode())}\n")


def _head_tail(tail: bool) -> Callable[[list[str], Context, str], Result]:
    def cut(args: list[str], ctx: Context, stdin: str) -> Result:
        count = 10
        for i, arg in enumerate(args):
            if arg == "-n" and i + 1 < len(args) and args[i + 1].lstrip("-").isdigit():
                count = abs(int(args[i + 1]))
            elif arg.startswith("-") and arg[1:].isdigit():
                count = int(arg[1:])
        lines = stdin.splitlines(keepends=True)
        return Result("".join(lines[-count:] if tail else lines[:count]) if count else "")
    return cut


def _grep(args: list[str], ctx: Context, stdin: str) -> Result:
    patterns = [a for a in args if not a.startswith("-")]
    if not patterns:
        return Result(stderr="Usage: grep PATTERN\n", exit_code=2)
    try:
        regex = re.compile(patterns[0], re.IGNORECASE if "-i" in args else 0)
    except re.error:
        return Result(stderr=f"grep: invalid pattern {patterns[0]}\n", exit_code=2)
    lines = [line for line in stdin.splitlines(keepends=True) if bool(regex.search(line)) != ("-v" in args)]
    return Result("".join(lines), exit_code=0 if lines else 1)


def _which(args: list[str], ctx: Context, stdin: str) -> Result:
    names = [a for a in args if not a.startswith("-")]
    found = [n for n in names if n in BUILTINS and _available(n, ctx)]
    return Result("".join(f"/usr/bin/{n}\n" for n in found), exit_code=0 if len(found) == len(names) else 1)


def _const(text: str) -> Callable[[list[str], Context, str], Result]:
    return lambda args, ctx, stdin: Result(text)


def _hostname(args: list[str], ctx: Context, stdin: str) -> Result:
    return Result(f"{(ctx.pod.get('metadata') or {}).get('name', '')}\n")


def _ls(args: list[str], ctx: Context, stdin: str) -> Result:
    return Result("bin\ndev\netc\nhome\nproc\nroot\nsys\ntmp\nusr\nvar\nworkload\n")


# -- GPU tools -------------------------------------------------------------------------------------
def gpu_count(pod: JsonObj, vendor_key: str) -> int:
    total = 0
    for container in (pod.get("spec") or {}).get("containers") or []:
        limits = (container.get("resources") or {}).get("limits") or {}
        with contextlib.suppress(ValueError):  # a malformed quantity counts as none
            total += int(str(limits.get(vendor_key, 0)))
    return total


def _vendor(ctx: Context) -> str | None:
    if gpu_count(ctx.pod, "nvidia.com/gpu"):
        return "nvidia"
    if gpu_count(ctx.pod, "amd.com/gpu"):
        return "amd"
    return None


def _available(program: str, ctx: Context) -> bool:
    if program == "nvidia-smi":
        return _vendor(ctx) == "nvidia"
    if program in ("amd-smi", "rocm-smi"):
        return _vendor(ctx) == "amd"
    return True


def _utilisation(ctx: Context) -> int:
    raw = ((ctx.pod.get("metadata") or {}).get("annotations") or {}).get(GPU_UTILIZATION, "0")
    try:
        return max(0, min(100, round(float(str(raw)))))
    except ValueError:
        return 0


def _nvidia_smi(args: list[str], ctx: Context, stdin: str) -> Result:
    count, util = gpu_count(ctx.pod, "nvidia.com/gpu"), _utilisation(ctx)
    memory = 80 * 1024 * util // 100
    lines = ["+-----------------------------------------------------------------------------+",
             "| NVIDIA-SMI 550.54.15    Driver Version: 550.54.15    CUDA Version: 12.4     |",
             "| GPU  Name                 | Memory-Usage         | GPU-Util  (kaiwo-ray sandbox) |",
             "|=============================================================================|"]
    lines += [f"| {i:>3}  NVIDIA H100 80GB HBM3 | {memory:>6}MiB / 81559MiB | {util:>3}%" + " " * 28 + "|"
              for i in range(count)]
    lines.append("+-----------------------------------------------------------------------------+")
    return Result("\n".join(lines) + "\n")


def _rocm_smi(args: list[str], ctx: Context, stdin: str) -> Result:
    count, util = gpu_count(ctx.pod, "amd.com/gpu"), _utilisation(ctx)
    lines = ["========================= ROCm System Management Interface =========================",
             "=================================== Concise Info ===================================",
             "GPU  Temp (DieEdge)  AvgPwr  SCLK     MCLK     Fan  Perf  PwrCap  VRAM%  GPU%",
             "===================================================================================="]
    lines += [f"{i:<4} {40 + util // 3:>5.1f}c         {100 + 6 * util:>4}.0W  {'2100Mhz':<8} {'1300Mhz':<8} 0%   "
              f"auto  750.0W  {util:>4}%  {util:>3}%" for i in range(count)]
    lines.append("============================== End of ROCm SMI Log =================================")
    return Result("\n".join(lines) + "\n")


def _amd_smi(args: list[str], ctx: Context, stdin: str) -> Result:
    count, util = gpu_count(ctx.pod, "amd.com/gpu"), _utilisation(ctx)
    lines = ["GPU  POWER   GPU_TEMP  GFX_UTIL  VRAM_USED  VRAM_TOTAL"]
    lines += [f"{i:<4} {100 + 6 * util:>3} W  {40 + util // 3:>5} °C  {util:>6} %  {192 * util // 100:>6} GB  192 GB"
              for i in range(count)]
    return Result("\n".join(lines) + "\n")


BUILTINS: dict[str, Callable[[list[str], Context, str], Result]] = {
    "echo": _echo, "printf": _printf, "cat": _cat, "env": _env, "printenv": _printenv,
    "exit": _exit, "true": _const(""), ":": _const(""), "false": lambda a, c, s: Result(exit_code=1),
    "sleep": _const(""), "pwd": _const("/\n"), "whoami": _const("root\n"), "id": _const("uid=0(root) gid=0(root)\n"),
    "hostname": _hostname, "uname": _const("Linux\n"), "ls": _ls, "wc": _wc, "head": _head_tail(False),
    "tail": _head_tail(True), "grep": _grep, "which": _which, "watch": lambda a, c, s: _run_argv(
        [w for w in a if not w.startswith("-") and not w.isdigit()] or ["true"], c, s),
    "nvidia-smi": _nvidia_smi, "rocm-smi": _rocm_smi, "amd-smi": _amd_smi,
}
