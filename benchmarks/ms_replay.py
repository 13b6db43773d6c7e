"""TVM MetaSchedule's design space, replayed at random: the peer ``benchmarks/peers.py`` sets
beside our search (issue 39).

TVM 0.27's tuner (``meta_schedule.tune_tir``) crashes on this build (its mutators at set-up,
then the task scheduler; ``TuneContext`` with the default ``"post-order-apply"`` generator and
``generate_measure_candidates`` segfault here too), so the tuner itself is not a usable peer.
What works is its design space: ``PostOrderApply`` with the default llvm schedule rules and
postprocessors (no mutators) makes the design-space schedules of a PrimFunc, and each sample
replays one of their traces with its random decisions drawn afresh (the way MetaSchedule's own
``ReplayTrace`` search strategy samples), then runs the postprocessors.

The programs are PyTorch's, as TVM imports them: ``torch.export`` -> Relax
(``from_exported_program``, parameters as constants) -> TVM's ``zero`` pipeline (``LegalizeOps``
to TOPI's PrimFuncs with blocks, which MetaSchedule's rules need -- our own lowering emits plain
loops, which they cannot schedule -- then operator fusion, as TVM's CPU build does). Every PrimFunc gets ``samples`` replays; each that builds is timed alone (TVM
``time_evaluator`` on seeded inputs) and the fastest replaces the PrimFunc; the whole module is
then built for the Relax VM. Where TVM cannot import, schedule or build a workload, ``replay``
raises :class:`ReplayError` with the reason (the benchmark records it and goes on).

Replays are seeded (``seed``): the same workload, samples and seed give the same schedules.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np


class ReplayError(Exception):
    """TVM could not import, schedule or build the workload (the message says which step)."""


@dataclass
class Replayed:
    """The whole program with MetaSchedule-replayed PrimFuncs, ready to run."""
    call: Callable[[], Any]          # runs the Relax VM's main on the inputs (tensors made once)
    outputs: Callable[[], list[np.ndarray]]   # runs it and returns its outputs
    functions: list[dict[str, Any]] = field(default_factory=list)   # per PrimFunc: samples,
    #                                   replays that built, best and default kernel times (ms)


def _step(what: str, fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except Exception as err:  # noqa: BLE001 -- TVM raises many kinds; one line says which step
        text = " ".join(str(err).split())[:300]
        raise ReplayError(f"{what}: {type(err).__name__}: {text}") from None


def _random_args(func, rng: np.random.Generator):
    """Seeded tensors for a PrimFunc's buffer parameters (timing only: integers are zeros)."""
    import tvm
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo
    args = []
    for info in ArgInfo.from_prim_func(func):
        shape = [int(d) for d in info.shape]
        dtype = str(info.dtype)
        if dtype.startswith("float") or dtype.startswith("bfloat"):
            array = rng.standard_normal(shape).astype("float32").astype(dtype)
        else:
            array = np.zeros(shape, dtype=dtype)
        args.append(tvm.runtime.tensor(array))
    return args


def _kernel_ms(func, target, args) -> float:
    """Median time (ms) of one PrimFunc built alone, on ``args``."""
    import tvm
    lib = tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}),
                      target=target)
    timer = lib.mod.time_evaluator("main", tvm.cpu(), number=1, repeat=5, min_repeat_ms=2)
    return float(timer(*args).median) * 1e3


def _design_space(func, target, threads: int, seed: int):
    from tvm.s_tir import meta_schedule as ms
    generator = ms.space_generator.PostOrderApply(
        sch_rules=ms.ScheduleRule.create("llvm"), postprocs=ms.Postproc.create("llvm"),
        mutator_probs={})   # no mutators: the default ones crash at set-up on this build
    import tvm
    context = ms.TuneContext(tvm.IRModule({"main": func}), target=target,
                             space_generator=generator, num_threads=threads,
                             rand_state=seed % (2**31 - 2) + 1)
    return context.generate_design_space(), context.space_generator.postprocs


def _replays(func, target, samples: int, threads: int, seed: int):
    """Up to ``samples`` scheduled versions of ``func`` (postprocessors passed)."""
    import tvm
    from tvm.s_tir import Schedule
    spaces, postprocs = _design_space(func, target, threads, seed)
    rng = random.Random(seed)
    mod = tvm.IRModule({"main": func})
    out = []
    for i in range(samples):
        trace = spaces[i % len(spaces)].trace.simplified(remove_postproc=True)
        sch = Schedule(mod, seed=rng.randrange(1, 2**31 - 1))
        try:
            trace.apply_to_schedule(sch, remove_postproc=True, decision_provider=None)
            if all(p.apply(sch) for p in postprocs):
                out.append(sch.mod["main"])
        except Exception:  # noqa: BLE001 -- a sample that does not apply is not counted
            continue
    return out, len(spaces)


def replay(module, inputs, target: dict[str, Any], *, samples: int = 16, threads: int = 1,
           seed: int = 0) -> Replayed:
    """The PyTorch ``module`` on ``inputs`` compiled by TVM with each PrimFunc the fastest of
    ``samples`` random replays of MetaSchedule's design space (module docstring)."""
    import torch
    import tvm
    from tvm import relax
    from tvm.relax.frontend.torch import from_exported_program

    tvm_target = tvm.target.Target(target)
    with torch.no_grad():
        exported = _step("torch.export", torch.export.export, module, tuple(inputs))
    mod = _step("Relax import", from_exported_program, exported, keep_params_as_input=False)
    # legalise and fuse as TVM's CPU pipeline does; the fused PrimFuncs are what it schedules
    mod = _step("legalising and fusing", relax.get_pipeline("zero"), mod)
    rng = np.random.default_rng(seed)
    functions = []
    for gv, func in list(mod.functions_items()):
        if not isinstance(func, tvm.tirx.PrimFunc):
            continue
        name = gv.name_hint
        candidates, spaces = _step(f"design space of {name}", _replays, func, tvm_target,
                                   samples, threads, seed)
        args = _random_args(func, rng)
        timed = []
        for candidate in candidates:
            try:
                timed.append((_kernel_ms(candidate, tvm_target, args), candidate))
            except Exception:  # noqa: BLE001 -- a replay that does not build is not counted
                continue
        default_ms = _step(f"building {name}", _kernel_ms, func, tvm_target, args)
        entry = {"function": name, "design_spaces": spaces, "samples": samples,
                 "applied": len(candidates), "built": len(timed), "default_ms": default_ms}
        if timed:
            best_ms, best = min(timed, key=lambda t: t[0])
            mod.update_func(gv, best.with_attrs(func.attrs))
            entry["best_ms"] = best_ms
        else:
            entry["best_ms"] = None   # TOPI's default schedule stays (no replay built)
        functions.append(entry)
    from tvm.relax.backend.cpu_generic.pipeline import (dataflow_lower_passes,
                                                        finalize_passes)
    rest = tvm.transform.Sequential(dataflow_lower_passes(tvm_target)
                                    + finalize_passes(tvm_target))   # no second fusion
    executable = _step("building the module", tvm.compile, mod, target=tvm_target,
                       relax_pipeline=rest)
    vm = relax.VirtualMachine(executable, tvm.cpu())
    main = vm["main"]
    args = [tvm.runtime.tensor(x.detach().cpu().contiguous().numpy()) for x in inputs
            if isinstance(x, torch.Tensor)]

    def outputs() -> list[np.ndarray]:
        result = main(*args)
        items = [result] if hasattr(result, "numpy") else list(result)
        return [item.numpy() for item in items]
    return Replayed(lambda: main(*args), outputs, functions)
