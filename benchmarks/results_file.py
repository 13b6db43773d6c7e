"""Each benchmark's latest figures in ``benchmarks/results/<benchmark>.md``.

A benchmark script ends with ``sys.exit(recorded(main))``: ``main`` runs as before, what it
prints still goes to the terminal, and when it returns 0 the same text is written to
``benchmarks/results/<script name>.md`` under a header that says how it was measured -- the
exact command, the commit (and whether the tree had uncommitted changes), the machine, the
1-minute load average at the start and at the end, and the wall time. A failed or
interrupted run leaves the previous file alone. The file holds the latest run only; earlier
figures are in git history. ``LEIR_BENCH_RESULTS=0`` turns the writing off (a scratch run);
``LEIR_BENCH_RESULTS_DIR`` writes to another folder.
"""

from __future__ import annotations

import io
import os
import platform
import shlex
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

RESULTS_DIR = Path(__file__).resolve().parent / "results"
REPO = Path(__file__).resolve().parent.parent


class _Tee(io.TextIOBase):
    """Writes to the terminal and keeps a copy."""

    def __init__(self, stream):
        self.stream, self.copy = stream, io.StringIO()

    def write(self, text: str) -> int:
        self.copy.write(text)
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()


def commit() -> str:
    """``git describe``-like short commit of the checkout, marked when the tree is dirty."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True,
                              timeout=30).stdout.strip()
    try:
        head = git("rev-parse", "--short", "HEAD") or "unknown"
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return "unknown (no git)"
    return head + (" with uncommitted changes" if dirty else "")


def load() -> str:
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return "unknown"


def header(name: str, command: str, *, commit_text: str, load_text: str, date: str,
           machine: str, wall: str) -> str:
    """The header every results file starts with (also used for figures seeded by hand)."""
    return (f"# {name}\n\n"
            f"Latest figures of `benchmarks/{name}.py`, written by the benchmark when a run "
            "finishes; run the command again to replace them. Earlier figures are in git "
            "history.\n\n"
            f"- command: `{command}`\n"
            f"- commit: {commit_text}\n"
            f"- date: {date}\n"
            f"- machine: {machine}\n"
            f"- load (1-minute average): {load_text}\n"
            f"- wall time: {wall}\n")


def write(name: str, command: str, output: str, *, load_text: str, wall: float) -> Path:
    folder = Path(os.environ.get("LEIR_BENCH_RESULTS_DIR") or RESULTS_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    machine = f"{os.cpu_count()} CPUs, {platform.system()} {platform.machine()}, " \
              f"Python {platform.python_version()}"
    date = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    text = header(name, command, commit_text=commit(), load_text=load_text, date=date,
                  machine=machine, wall=f"{wall:.1f} s")
    text += "\n## Output\n\n```\n" + output.rstrip("\n") + "\n```\n"
    path = folder / f"{name}.md"
    tmp = path.with_suffix(".md.tmp")
    tmp.write_text(text)
    tmp.replace(path)
    return path


def recorded(main: Callable[[], int | None]) -> int:
    """Run a benchmark's ``main`` and, when it returns 0, write its printed figures to
    ``benchmarks/results/<script>.md``. Returns ``main``'s status."""
    name = Path(sys.argv[0]).stem
    command = "python " + " ".join(shlex.quote(a) for a in
                                   [f"benchmarks/{name}.py", *sys.argv[1:]])
    start_load, start = load(), time.perf_counter()
    tee = _Tee(sys.stdout)
    sys.stdout = tee
    try:
        status = main() or 0
    finally:
        sys.stdout = tee.stream
    if status == 0 and os.environ.get("LEIR_BENCH_RESULTS", "1") != "0":
        path = write(name, command, tee.copy.getvalue(),
                     load_text=f"{start_load} at the start, {load()} at the end",
                     wall=time.perf_counter() - start)
        print(f"figures written to {path}", file=sys.stderr)
    return status
