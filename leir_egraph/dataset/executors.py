"""Running ``process_program`` over many programs: a local process pool or Ray.

Both yield ``(index, result)`` pairs in completion order; the caller orders them. A worker
that dies (a segfault in TVM, the OOM killer) or overruns ``program_timeout`` costs only the
program it was running, which comes back as a result with one failure at stage ``worker``; a
fresh worker takes its place.
"""

from __future__ import annotations

import multiprocessing as mp
import signal
import time
from multiprocessing.connection import wait
from typing import Any, Iterator

from .records import failure
from .sources import ProgramSource

Task = tuple[int, dict[str, Any]]  # (index, ProgramSource as a dict)


def worker_failure(source: dict[str, Any], reason: str) -> dict[str, Any]:
    """The result standing in for a program whose worker died or was stopped."""
    src = ProgramSource.from_dict(source)
    summary = {"program_id": src.program_id, "program": src.name, "source": src.kind,
               "seed": src.seed, "status": "failed", "stage": "worker", "reason": reason,
               "leir": None, "signature": None, "enumerated": 0, "selected": 0, "verified": 0,
               "by_strategy": {}}
    return {"program": summary, "records": [],
            "failures": [failure(src.program_id, src.name, "worker", reason)]}


# The same words whatever the executor: the failures file must not depend on it.
DIED = "the worker process died while processing this program"


def timed_out(seconds: float) -> str:
    return f"still running after {seconds:g} s (the program timeout); stopped"


def run_task(source: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """``process_program``, with a bug of the pipeline itself recorded instead of raised."""
    from .pipeline import process_program
    try:
        return process_program(source, config)
    except Exception as err:  # noqa: BLE001 -- a bug in our pipeline, not a lost worker
        return worker_failure(source, f"pipeline error: {type(err).__name__}: {err}")


# ---------------------------------------------------------------- local process pool

def _serve(conn, config: dict[str, Any], program_timeout: float | None = None) -> None:
    """Worker process: answer (index, source) requests until told to stop (None) or until the
    parent is gone -- it dies with its parent (and its verification worker with it), so a
    killed run leaves no process behind."""
    from ..egraph.vocabulary import provider_deadline
    from ..leir.limits import allow_deep_programs
    from ..verify.worker import die_with_parent
    from .pipeline import close_contexts
    die_with_parent()
    allow_deep_programs()
    # Ctrl-C reaches the whole process group: the parent handles it and stops this worker.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        while True:
            try:
                task = conn.recv()
            except (EOFError, OSError):
                return
            if task is None:
                return
            index, source = task
            # a rule provider that hangs is stopped well before the program timeout (at 90% of
            # it, and at least 10 s or half of it before), so that the program's row (and the
            # rest of its strategies) can still name it on a loaded machine
            provider_deadline(None if program_timeout is None
                              else time.monotonic() + program_timeout
                              - max(0.1 * program_timeout, min(10.0, 0.5 * program_timeout)))
            result = run_task(source, config)
            try:
                conn.send((index, result))
            except (BrokenPipeError, OSError):  # the parent is gone: nobody to report to
                return
    finally:
        close_contexts()


class _Slot:
    def __init__(self, ctx, config, program_timeout: float | None = None):
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_serve, args=(child, config, program_timeout),
                                   daemon=True)
        self.process.start()
        child.close()
        self.task: Task | None = None
        self.started = 0.0

    def stop(self, kill: bool = False) -> None:
        if kill:
            self.process.kill()
        else:
            try:
                self.conn.send(None)
            except (OSError, BrokenPipeError):
                pass
        self.process.join(timeout=30)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()


class LocalExecutor:
    """``workers`` spawned processes (spawn, not fork: the parent may hold threads of torch
    or TVM). Each keeps its strategies and verifier across programs."""

    def __init__(self, workers: int, config: dict[str, Any], program_timeout: float = 3600.0):
        self.workers, self.config, self.timeout = workers, config, program_timeout
        self._ctx = mp.get_context("spawn")

    def run(self, tasks: list[Task]) -> Iterator[tuple[int, dict[str, Any]]]:
        pending = list(reversed(tasks))
        slots = [_Slot(self._ctx, self.config, self.timeout)
                 for _ in range(min(self.workers, len(tasks)))]
        try:
            for slot in slots:
                self._assign(slot, pending)
            while any(s.task is not None for s in slots):
                busy = [s for s in slots if s.task is not None]
                ready = wait([s.conn for s in busy] + [s.process.sentinel for s in busy],
                             timeout=5.0)
                now = time.monotonic()
                for i, slot in enumerate(slots):
                    if slot.task is None:
                        continue
                    outcome = None
                    if slot.conn in ready or slot.process.sentinel in ready:
                        try:
                            if slot.conn.poll():
                                outcome = slot.conn.recv()
                        except (EOFError, OSError):
                            outcome = None
                        if outcome is None and not slot.process.is_alive():
                            outcome = (slot.task[0], worker_failure(slot.task[1], DIED))
                            slot = slots[i] = self._replace(slot, pending)
                    elif now - slot.started > self.timeout:
                        outcome = (slot.task[0], worker_failure(
                            slot.task[1], timed_out(self.timeout)))
                        slot = slots[i] = self._replace(slot, pending)
                    if outcome is not None:
                        slot.task = None
                        self._assign(slot, pending)
                        yield outcome
        finally:
            for slot in slots:
                slot.stop(kill=slot.task is not None)

    def _replace(self, slot: _Slot, pending: list[Task]) -> _Slot:
        """Stop a dead or overrunning worker; a fresh one only if work is left for it."""
        slot.stop(kill=True)
        slot.task = None
        if pending:
            return _Slot(self._ctx, self.config, self.timeout)
        return slot

    def _assign(self, slot: _Slot, pending: list[Task]) -> None:
        if pending:
            slot.task = pending.pop()
            slot.started = time.monotonic()
            slot.conn.send(slot.task)


# ---------------------------------------------------------------- Ray

class RayExecutor:
    """The same per-program function as Ray tasks: a local Ray instance with ``workers`` CPUs,
    or the cluster at ``address``. At most ``2 * workers`` tasks are in flight, so a huge
    program list does not flood the object store."""

    def __init__(self, workers: int, config: dict[str, Any], address: str | None = None,
                 program_timeout: float = 3600.0):
        self.workers, self.config, self.address = workers, config, address
        self.timeout = program_timeout

    def run(self, tasks: list[Task]) -> Iterator[tuple[int, dict[str, Any]]]:
        if not tasks:  # a resumed run with every shard complete
            return
        import ray

        started_here = not ray.is_initialized()
        if started_here:
            if self.address:
                ray.init(address=self.address, include_dashboard=False, log_to_driver=False)
            else:
                ray.init(num_cpus=self.workers, include_dashboard=False, log_to_driver=False)
        try:
            yield from self._run(ray, tasks)
        finally:
            if started_here:
                ray.shutdown()

    def _run(self, ray, tasks: list[Task]):
        # A crashed worker is a result (stage "worker"), not a retry: the same program would
        # most likely crash the next worker too.
        remote = ray.remote(num_cpus=1, max_retries=0)(run_task)
        config_ref = ray.put(self.config)
        pending = list(reversed(tasks))
        inflight: dict[Any, tuple[Task, float]] = {}
        limit = 2 * self.workers
        while pending or inflight:
            while pending and len(inflight) < limit:
                task = pending.pop()
                inflight[remote.remote(task[1], config_ref)] = (task, time.monotonic())
            done, _ = ray.wait(list(inflight), num_returns=1, timeout=5.0)
            for ref in done:
                (index, source), _ = inflight.pop(ref)
                try:
                    yield index, ray.get(ref)
                except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
                        ray.exceptions.OutOfMemoryError, ray.exceptions.LocalRayletDiedError):
                    yield index, worker_failure(source, DIED)
                except Exception as err:  # noqa: BLE001 -- run_task never raises: Ray itself
                    first = (str(err).strip().splitlines() or [""])[0]
                    yield index, worker_failure(source, f"ray task failed: "
                                                        f"{type(err).__name__}: {first}")
            now = time.monotonic()
            for ref, ((index, source), started) in list(inflight.items()):
                if now - started > self.timeout:
                    ray.cancel(ref, force=True)
                    inflight.pop(ref)
                    yield index, worker_failure(source, timed_out(self.timeout))


def executor(kind: str, workers: int, config: dict[str, Any], address: str | None,
             program_timeout: float):
    if kind == "ray":
        return RayExecutor(workers, config, address, program_timeout)
    return LocalExecutor(workers, config, program_timeout)
