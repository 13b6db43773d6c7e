"""Checking a translation against PyTorch itself: run the LEIR program through the TVM
lowering (``leir_egraph.lower.run``) and the module eagerly on the same inputs, and compare
every output under the project's tolerance policy (``leir_egraph.verify.compare``).

    >>> record = check_kind("ReLU", "f32")
    >>> record.status, record.nests
    ('equal', 1)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from .errors import UnsupportedOp
from .translate import as_numpy, from_torch, output_leaves

def fast_cpu() -> dict:
    """The oracle's target. Verification compiles hundreds of small programs: LLVM's optimiser
    would dominate the time and cannot change a correctly lowered program's values, so it is
    switched off; ``exact_target`` rounds every operation on its own, with hardware float16
    conversions (the same bits as baseline x86-64, 2.4x faster on float16)."""
    from ..lower.targets import exact_target
    return exact_target(**{"opt-level": 0, "num-cores": 1})


@dataclass
class CheckRecord:
    """One program checked: ``status`` is ``equal``, ``mismatch``, ``uninformative`` (a float
    output that is all zero or non-finite), ``unsupported``, ``no-reference`` (PyTorch's own
    CPU kernels do not run the module in this dtype: ``avg_pool3d`` has no f16 kernel) or
    ``error``; times in seconds
    (``compile_s``: lowering and compiling, ``run_s``: the first run, which includes LLVM's
    code generation)."""
    kind: str
    dtype: str
    family: str = ""
    status: str = "error"
    nests: int = 0
    translate_s: float = 0.0
    compile_s: float = 0.0
    run_s: float = 0.0
    detail: str = ""
    outputs: list = field(default_factory=list)


def torch_outputs(module, inputs) -> list[np.ndarray]:
    """The module's outputs, flattened, as NumPy arrays."""
    with torch.no_grad():
        out = module(*inputs)
    return [as_numpy(v) for v in output_leaves(out)]


def check_module(module, inputs, record: CheckRecord, target=None) -> CheckRecord:
    """Translate, run through TVM and compare with eager PyTorch; fills ``record``."""
    from ..lower import build, run
    from ..verify import compare
    target = target or fast_cpu()
    try:
        start = time.perf_counter()
        program = from_torch(module, inputs, name=record.kind)
        record.translate_s = time.perf_counter() - start
        record.nests = len(program.leir.nests)
    except UnsupportedOp as err:
        record.status, record.detail = "unsupported", str(err)
        return record
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    feeds = {spec.name: as_numpy(x)
             for spec, x in zip(program.signature.inputs, tensors)}
    start = time.perf_counter()
    build(program, target)
    record.compile_s = time.perf_counter() - start
    start = time.perf_counter()
    got = run(program, feeds, target=target)
    record.run_s = time.perf_counter() - start
    try:  # after the translation: a forward that updates module state (an RNN's hidden
        # state) is translated with the state PyTorch's call starts from
        expected = torch_outputs(module, inputs)
    except (NotImplementedError, RuntimeError) as err:
        if "not implemented for" not in str(err):
            raise
        record.status, record.detail = "no-reference", f"PyTorch: {err}"
        return record
    if len(expected) != len(program.signature.outputs):
        record.status = "mismatch"
        record.detail = (f"{len(program.signature.outputs)} LEIR outputs for {len(expected)} "
                         "PyTorch outputs")
        return record
    record.status = "equal"
    for spec, ref in zip(program.signature.outputs, expected):
        result = compare(ref, got[spec.name], spec.name)
        record.outputs.append((spec.name, result.max_abs_err, result.max_rel_err))
        if not result.equal:
            record.status, record.detail = "mismatch", result.problem or ""
            break
        if not result.informative and ref.dtype.kind == "f":
            # an all-zero or all-non-finite float output agrees with almost any program
            record.status = "uninformative"
            record.detail = f"output {spec.name} is all zero or non-finite"
    return record


def check_kind(kind: str, dtype: str = "f32", seed: int = 0, size: str = "small",
               target=None) -> CheckRecord:
    """Instantiate a zoo kind and check its translation; never raises."""
    from ..workloads import KINDS, instantiate
    record = CheckRecord(kind, dtype, KINDS[kind].family if kind in KINDS else "")
    try:
        module, inputs, _ = instantiate(kind, seed, size, dtype)
        return check_module(module, inputs, record, target)
    except Exception as err:  # noqa: BLE001 -- a record per program, the batch goes on
        record.status, record.detail = "error", f"{type(err).__name__}: {err}"
        return record


def check_workload(index: int, seed: int = 0, target=None) -> CheckRecord:
    """Instantiate a mapped Step-TP paper workload at CPU size, in its own dtype
    (``workloads.steptp``), and check its translation; never raises."""
    record = CheckRecord(f"#{index}", "")
    try:
        from ..workloads import steptp
        module, inputs, meta = steptp.instantiate(index, "cpu", seed)
        record.kind, record.dtype = f"#{index} {meta['kind']}", meta["dtype"]
        record.family = "steptp"
        return check_module(module, inputs, record, target)
    except Exception as err:  # noqa: BLE001 -- a record per program, the batch goes on
        record.status, record.detail = "error", f"{type(err).__name__}: {err}"
        return record


def warm_up() -> None:
    """Pay the one-time costs (importing TVM, torch.fx's first trace, the first compile) before
    anything is timed."""
    import torch.nn as nn
    check_module(nn.ReLU(), [torch.ones(2, 2)], CheckRecord("warm-up", "f32"))


def check_kinds(kinds, dtypes=("f32", "f64"), workers: int = 2, seed: int = 0,
                size: str = "small") -> list[CheckRecord]:
    """``check_kind`` for every (kind, dtype), in a process pool of ``workers`` (each warmed
    up first); records come back in input order."""
    return check_all([(check_kind, (k, d, seed, size)) for k in kinds for d in dtypes], workers)


def check_workloads(indices, workers: int = 2, seed: int = 0) -> list[CheckRecord]:
    """``check_workload`` for every index, as ``check_kinds`` does."""
    return check_all([(check_workload, (i, seed)) for i in indices], workers)


def check_all(jobs, workers: int = 2) -> list[CheckRecord]:
    """Run ``(check function, arguments)`` jobs in a process pool of ``workers`` (each warmed
    up first; one process, this one, for ``workers <= 1``); records in input order."""
    if workers <= 1:
        warm_up()
        return [fn(*args) for fn, args in jobs]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    # forkserver/spawn workers start clean (TVM and torch threads do not survive fork well)
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=ctx, initializer=warm_up) as pool:
        futures = [pool.submit(fn, *args) for fn, args in jobs]
        return [f.result() for f in futures]
