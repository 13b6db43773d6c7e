"""A persistent subprocess that does the TVM work of verifications.

TVM is imported once per worker (about 1 CPU s: torch, which TVM's FFI would import, is kept
out) and compiled modules stay cached in it, so checking many rewrites of one program compiles
the original once. A segfault or a runaway kernel kills only the worker: the parent reports
how far the verification got and starts a fresh worker for the next request.

The worker dies with its parent: on Linux the kernel sends it SIGKILL when the parent exits
(``PR_SET_PDEATHSIG``), and a watchdog thread ends it when its parent process changes, so a
killed ``leir verify`` or sampler never leaves a worker running.

Protocol (pickled messages over two pipes): the parent sends a job dict; the worker answers
with any number of ``("progress", {...})`` messages and one ``("done", result fields)`` or
``("error", text)``. Jobs carry LEIR text and numpy arrays only: pickling TVM IR segfaults.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

STARTUP_TIMEOUT = 180.0
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int | None = None) -> None:
    """End this process when its parent process ends (call it first thing in a worker).

    Linux: the kernel sends SIGKILL on the parent's exit (prctl PR_SET_PDEATHSIG). Everywhere:
    a daemon thread checks every 0.5 s that the parent is still ``parent`` and exits
    otherwise (an orphan is re-parented); it also covers a parent that died before the prctl."""
    parent = os.getppid() if parent is None else parent
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:
        os._exit(1)

    def watch():
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="die-with-parent", daemon=True).start()


class WorkerOutcome:
    """What came back for one job: ``status`` is done, timeout, crash or error."""

    def __init__(self, status: str, result: dict | None, progress: dict, detail: str = "",
                 output: str = ""):
        self.status, self.result, self.progress = status, result, progress
        self.detail, self.output = detail, output


class Worker:
    """Client side of one worker process; ``request`` restarts it after a crash or timeout.
    Threads may share one: a lock keeps each exchange (and a start or stop) whole, so jobs
    of two threads run one after the other."""

    def __init__(self):
        self._lock = threading.RLock()
        self.proc: subprocess.Popen | None = None
        self._send: Connection | None = None
        self._recv: Connection | None = None
        self._log = None
        self._ready = False

    # ------------------------------------------------------------ lifecycle

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, deadline: float | None = None) -> None:
        """Start the worker process and wait until it is ready; raises TimeoutError when it is
        not ready by ``deadline`` (a ``time.monotonic()`` value; default: STARTUP_TIMEOUT from
        now)."""
        self.launch()
        self._await_ready(deadline)

    def launch(self) -> None:
        """Start a fresh worker process without waiting for it: its imports (TVM's, ~2 s) run
        while the caller goes on, and the first ``request`` waits for the rest."""
        with self._lock:
            self._launch()

    def _launch(self) -> None:
        self.close()
        to_child_r, to_child_w = os.pipe()
        to_parent_r, to_parent_w = os.pipe()
        self._log = tempfile.TemporaryFile(prefix="leir-verify-worker-")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [_PACKAGE_ROOT, env.get("PYTHONPATH")]))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "leir_egraph.verify.worker", str(to_child_r), str(to_parent_w),
             str(os.getpid())],
            pass_fds=(to_child_r, to_parent_w), stdin=subprocess.DEVNULL, stdout=self._log,
            stderr=self._log, env=env, start_new_session=True)
        os.close(to_child_r)
        os.close(to_parent_w)
        self._send = Connection(to_child_w, readable=False)
        self._recv = Connection(to_parent_r, writable=False)
        self._ready = False

    def _await_ready(self, deadline: float | None = None) -> None:
        """Wait for the launched worker's ready message (``start``'s errors)."""
        limit = STARTUP_TIMEOUT
        if deadline is not None:
            limit = min(limit, max(0.0, deadline - time.monotonic()))
        if not self._recv.poll(limit):
            detail = self.log_tail()
            self.close()
            if limit < STARTUP_TIMEOUT:
                raise TimeoutError("the verification worker was not ready in time")
            raise RuntimeError(f"verification worker did not start in {STARTUP_TIMEOUT:.0f} s"
                               + (f": {detail}" if detail else ""))
        try:
            message = self._recv.recv()
        except (EOFError, OSError):
            detail = self.log_tail()
            self.close()
            raise RuntimeError(f"verification worker died while starting: {detail}") from None
        if message != ("ready",):
            self.close()
            raise RuntimeError(f"verification worker sent {message!r} instead of ready")
        self._ready = True

    def exclusive(self) -> threading.RLock:
        """The lock that keeps an exchange whole (re-entrant): held around several requests, it
        keeps another thread's jobs from running between them."""
        return self._lock

    def close(self) -> None:
        """Stop the worker (the one this client started) and release its pipes. The process
        is killed before the lock is taken: a thread waiting on it in ``request`` then gets
        its crash at once instead of holding the lock until its job's deadline."""
        self._kill(self.proc)
        with self._lock:
            self._close()

    @staticmethod
    def _kill(proc: subprocess.Popen | None) -> None:
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                proc.kill()

    def _close(self) -> None:
        if self.proc is not None:
            self._kill(self.proc)
            self.proc.wait()
        for conn in (self._send, self._recv):
            if conn is not None:
                conn.close()
        if self._log is not None:
            self._log.close()
        self.proc = self._send = self._recv = self._log = None
        self._ready = False

    def log_tail(self, lines: int = 6) -> str:
        """Last lines the worker wrote to stdout/stderr (crash messages, fault tracebacks)."""
        if self._log is None:
            return ""
        try:
            self._log.flush()
            self._log.seek(0, os.SEEK_END)
            size = self._log.tell()
            self._log.seek(max(0, size - 4000))
            text = self._log.read().decode("utf-8", "replace")
        except OSError:
            return ""
        kept = [l.strip() for l in text.splitlines() if l.strip() and not _noise(l.strip())]
        return " | ".join(kept[-lines:])

    # ------------------------------------------------------------ one job

    def request(self, job: dict[str, Any], deadline: float) -> WorkerOutcome:
        """Send ``job`` and wait for its result until ``deadline`` (a ``time.monotonic()``
        value), starting the worker first if needed (its start-up counts). Time spent waiting
        for another thread's exchange to end does not count: the deadline moves by it, so a
        job gets the same time as when it is the only one."""
        asked = time.monotonic()
        with self._lock:
            deadline += time.monotonic() - asked
            try:
                return self._request(job, deadline)
            except BaseException:
                # an interrupted exchange leaves the worker mid-job: its next messages would be
                # taken for the next job's, so it goes
                self.close()
                raise

    def _request(self, job: dict[str, Any], deadline: float) -> WorkerOutcome:
        progress: dict[str, Any] = {"fields": {}, "stage": "starting the verification worker"}
        try:
            if not self.alive():
                self.start(deadline)
            elif not self._ready:   # launched earlier (``launch``): its start-up counts
                self._await_ready(deadline)
            try:
                self._send.send(job)
            except (BrokenPipeError, OSError):  # died since the last job: one fresh start
                self.start(deadline)
                self._send.send(job)
        except TimeoutError:
            return WorkerOutcome("timeout", None, progress)
        progress["stage"] = "starting the job"
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._recv.poll(max(remaining, 0)):
                self.close()
                return WorkerOutcome("timeout", None, progress)
            try:
                kind, payload = self._recv.recv()
            except (EOFError, OSError):
                code = self.proc.wait() if self.proc is not None else None
                detail = _exit_description(code)
                tail = self.log_tail()
                self.close()
                return WorkerOutcome("crash", None, progress, detail, tail)
            if kind == "progress":
                fields = payload.pop("fields", None)
                if fields:
                    progress["fields"].update(fields)
                progress.update(payload)
            elif kind == "done":
                return WorkerOutcome("done", payload, progress)
            else:
                return WorkerOutcome("error", None, progress, str(payload))


_FAULTHANDLER_LINES = ("Fatal Python error", "Current thread", "Thread 0x", "File \"",
                       "Extension modules", "Stack (most recent", "<no Python frame>")


def _noise(line: str) -> bool:
    """TVM warnings and faulthandler's stack dump: nothing a user can act on."""
    return "Warning" in line or line.startswith(_FAULTHANDLER_LINES)


def _exit_description(code: int | None) -> str:
    if code is None:
        return "worker exited"
    if code < 0:
        try:
            return f"worker killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"worker killed by signal {-code}"
    return f"worker exited with status {code}"


# ---------------------------------------------------------------- the worker process itself

def serve(read_fd: int, write_fd: int, parent: int | None = None) -> None:
    """Worker main loop: import TVM (not torch), make what every job needs first
    (``session.warm_up``), say ready, then evaluate jobs until the pipe closes."""
    die_with_parent(parent)
    from ..leir.limits import allow_deep_programs
    allow_deep_programs()
    recv = Connection(read_fd, writable=False)
    send = Connection(write_fd, readable=False)
    # TVM's FFI imports torch whenever it can (tvm_ffi/__init__.py, for DLPack exchange); no
    # job here uses torch, whose import was most of TVM's: a None entry makes it fail as not
    # installed (about 2 CPU s and 200 MB less per worker)
    sys.modules.setdefault("torch", None)
    import tvm  # noqa: F401  (pay the import once, before the first job)
    from .session import evaluate, warm_up
    warm_up()
    send.send(("ready",))
    while True:
        try:
            job = recv.recv()
        except (EOFError, OSError):
            return

        def report(**payload):
            send.send(("progress", payload))

        try:
            result = evaluate(job, report)
        except Exception as err:  # noqa: BLE001 -- reported to the parent as a verdict
            from .session import describe_error
            send.send(("error", describe_error(err)))
            continue
        send.send(("done", result))


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else None)
