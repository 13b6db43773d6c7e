"""TVM's runtime thread pool: how many threads run a program's ``P`` loops.

TVM sizes its pool once, when a process first runs parallel code, from ``TVM_NUM_THREADS`` or,
unset, half the hardware threads (its guess at hyper-threading); on a 2-core machine that is
one thread, and ``P`` loops ran serially. ``configure`` sets the pool from the machine: the
CPUs this process may run on (``os.sched_getaffinity``), or ``LEIR_NUM_THREADS`` (or TVM's own
``TVM_NUM_THREADS``) when set. ``lower.run``/``time_program``/``time_pair`` configure it before
they call a program, and every timing records the count the pool really has (``in_use``):
``PairedTiming.threads``, ``VerificationResult.threads``.

A pool that already exists can shrink but not grow past the size it was created with, so the
count is set in the environment too (inherited by worker processes started later) and read
back, never assumed.

``use(n)`` is how a caller chooses the count (every command that times takes ``--threads N``,
applied by ``cli.run_command`` through it; ``benchmarks/peers.py`` switches between counts
with it): it sets ``LEIR_NUM_THREADS``, which the next ``configure`` -- in this process and in
every verifier worker started afterwards -- reads. A worker that is already running keeps the
count it started with; start a fresh ``Verifier`` after changing it.
"""

from __future__ import annotations

import functools
import os

ENV = "LEIR_NUM_THREADS"

_configured: int | None = None


@functools.lru_cache(maxsize=None)
def machine_threads() -> int:
    """The CPUs this process may run on (read once: TVM pins its own thread when it starts)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def wanted() -> int:
    """The thread count to run with: ``LEIR_NUM_THREADS``, else ``TVM_NUM_THREADS``, else
    :func:`machine_threads`. A value that is not a whole number >= 1 is a ValueError."""
    for name in (ENV, "TVM_NUM_THREADS"):
        value = os.environ.get(name, "").strip()
        if value:
            try:
                count = int(value)
            except ValueError:
                count = 0
            if count < 1:
                raise ValueError(f"{name}={value!r}: expected a whole number of threads >= 1")
            return count
    return machine_threads()


def use(count: int) -> int:
    """Run TVM's parallel loops on ``count`` threads from now on: in this process (its pool is
    reconfigured at the next ``configure``) and in worker processes started afterwards (they
    inherit ``LEIR_NUM_THREADS``). Returns ``count``; below 1 is a ValueError."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"threads: expected a whole number of threads >= 1, got {count!r}")
    os.environ[ENV] = str(count)
    return count


def configure() -> int:
    """Size TVM's runtime pool to :func:`wanted` threads (once per count and process) and
    return the count it has."""
    global _configured
    count = wanted()
    machine_threads()  # before TVM's pool pins this thread to one core
    if _configured != count:
        os.environ["TVM_NUM_THREADS"] = str(count)  # the size TVM creates its pool with
        import tvm
        tvm.get_global_func("runtime.config_threadpool")(1, count)  # 1: all cores, this many
        _configured = count
    return in_use()


def in_use() -> int:
    """The number of threads TVM's runtime pool runs parallel loops on in this process."""
    import tvm
    return int(tvm.get_global_func("runtime.NumThreads")())
