"""A shared egglog database in a process of its own, so that a time or a memory limit holds
(docs/EXPLORE.md, "Time and memory limits").

egglog cannot be interrupted inside a call: one rule run over a shared database may take
minutes and gigabytes (measured: all 44 strategies on softmax, one depth-1 program added to the
156 before it, more than 5 GB in the strategies' one iteration). So the shared method's
database lives in a child process (``python -m leir_egraph.explore.worker``) that the explorer
talks to through two pipes, one pickled request and one pickled reply at a time; while it
waits for a reply it checks the deadline and the child's resident memory every
``POLL_S`` seconds and kills the child when either is exceeded (:class:`Stopped`). The child
is started once per strategy set and kept for the next exploration of that set (its rules are
compiled once), unless it was killed.

A request is ``(method, args)`` of :class:`~leir_egraph.explore.shared.SharedDatabase`; the
reply is ``("ok", value, cpu_s)``, ``("rule_error", (path, line, message), cpu_s)`` (a
``RuleFileError``, raised again in the parent) or ``("error", one-line message, cpu_s)``, where
``cpu_s`` is the child's process CPU time so far (an exploration's CPU includes its child's).
"""

from __future__ import annotations

import atexit
import os
import pickle
import select
import struct
import subprocess
import sys
import time

from ..egraph.strategy import RuleFileError
from .space import Deadline

POLL_S = 0.05        # how often a wait checks the deadline and the child's memory
KEPT = 2             # strategy sets whose child is kept alive between explorations


def default_memory_mb() -> float:
    """Half the machine's physical memory: a shared database never takes the machine down."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20 / 2
    except (ValueError, OSError, AttributeError):
        return 8192.0


class Stopped(Exception):
    """A request was cut: ``reason`` is ``"time_limit"`` or ``"memory_limit"`` (the child was
    killed), or ``"worker_died"`` (it ended by itself, e.g. the allocator gave up)."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


def _write(stream, value) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack("<Q", len(data)))
    stream.write(data)
    stream.flush()


def _read_exactly(fd: int, size: int) -> bytes:
    parts, left = [], size
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def _rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return None   # not Linux, or the child is gone: only the deadline is checked


class Worker:
    """One child process holding a ``SharedDatabase`` of a strategy set."""

    def __init__(self, strategies: tuple):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)   # this checkout's code
        self.process = subprocess.Popen(
            [sys.executable, "-m", "leir_egraph.explore.worker"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, env=env)
        self.cpu_s = 0.0   # the child's CPU time at its last reply
        self.alive = True
        self.call("__init__", (strategies,), None, None)

    def call(self, method: str, args: tuple, deadline: Deadline | None,
             memory_mb: float | None):
        """``method(*args)`` of the child's database; its value. Raises :class:`Stopped` when
        the deadline passes or the child's resident memory exceeds ``memory_mb`` before the
        reply (the child is killed), or the child dies; ``RuntimeError`` with the child's
        one-line message when the method raised."""
        if not self.alive:
            raise Stopped("worker_died", "the shared database's process was stopped before")
        try:
            _write(self.process.stdin, (method, args))
        except (BrokenPipeError, OSError):   # it ended since its last reply
            self.alive = False
            code = self.process.wait()
            raise Stopped("worker_died", f"the shared database's process ended (exit status "
                                         f"{code}) before {method}") from None
        fd = self.process.stdout.fileno()
        while True:
            wait = POLL_S if deadline is None else max(0.0, min(POLL_S, deadline.left()))
            ready, _, _ = select.select([fd], [], [], wait)
            if ready:
                try:
                    (size,) = struct.unpack("<Q", _read_exactly(fd, 8))
                    status, value, self.cpu_s = pickle.loads(_read_exactly(fd, size))
                except EOFError:
                    self.alive = False
                    code = self.process.wait()
                    raise Stopped("worker_died", f"the shared database's process ended "
                                                 f"(exit status {code}) during {method}") from None
                if status == "rule_error":   # a rule file egglog rejects: the same error
                    raise RuleFileError(*value)
                if status == "error":
                    raise RuntimeError(value)
                return value
            if deadline is not None and deadline.passed():
                self.kill()
                raise Stopped("time_limit", f"{method} killed at the time limit")
            rss = _rss_mb(self.process.pid) if memory_mb is not None else None
            if rss is not None and rss > memory_mb:
                self.kill()
                raise Stopped("memory_limit", f"{method} killed at {rss:.0f} MB resident "
                                              f"(limit {memory_mb:.0f} MB)")

    def kill(self) -> None:
        if self.alive:
            self.alive = False
            self.cpu_s = max(self.cpu_s, _cpu_of(self.process.pid))
            self.process.kill()
            self.process.wait()

    def close(self) -> None:
        """End the child normally (it exits when its input closes)."""
        if self.alive:
            self.alive = False
            self.process.stdin.close()
            self.process.wait()


def _cpu_of(pid: int) -> float:
    """A live child's CPU seconds from /proc (0 where that cannot be read)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


_kept: dict[tuple, Worker] = {}


def worker_for(strategies: tuple) -> Worker:
    """The live child of a strategy set, started when there is none (the oldest of more than
    :data:`KEPT` is closed)."""
    worker = _kept.get(strategies)
    if worker is not None and worker.alive and worker.process.poll() is None:
        return worker
    worker = _kept[strategies] = Worker(strategies)
    while len(_kept) > KEPT:
        _kept.pop(next(iter(_kept))).close()
    return worker


@atexit.register
def close_all() -> None:
    """End every kept child (at exit too: a child also ends when its input closes)."""
    while _kept:
        _kept.popitem()[1].close()


def _die_with_parent() -> None:
    """On Linux, ask the kernel to kill this process when its parent ends (a parent killed by
    a signal runs no exit handler, and a child busy in a long egglog call would read the end of
    its input only when the call returns)."""
    try:
        import ctypes
        import signal
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def serve() -> None:
    """The child's loop: requests from stdin, replies to stdout, until stdin closes."""
    import traceback

    parent = os.getppid()
    _die_with_parent()
    if os.getppid() != parent:   # the parent ended before the request above was made
        return

    inp, out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr   # nothing else may write into the reply stream
    database = None
    while True:
        head = inp.read(8)
        if len(head) < 8:
            return
        (size,) = struct.unpack("<Q", head)
        method, args = pickle.loads(inp.read(size))
        try:
            if method == "__init__":
                from .shared import SharedDatabase
                database, value = SharedDatabase(*args), None
            else:
                value = getattr(database, method)(*args)
            reply = ("ok", value, time.process_time())
        except RuleFileError as err:
            reply = ("rule_error", (err.path, err.line, err.message), time.process_time())
        except Exception as err:  # reported to the parent as one line
            lines = str(err).strip().splitlines() or [traceback.format_exc().splitlines()[-1]]
            reply = ("error", f"{type(err).__name__}: {lines[-1]}", time.process_time())
        _write(out, reply)


if __name__ == "__main__":
    serve()
