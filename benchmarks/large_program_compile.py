"""Compile time of large programs: whole-program builds against segmented builds.

    .venv/bin/python benchmarks/large_program_compile.py [--nests 75,150,300,600]
        [--opt-levels 0,3] [--whole-up-to 300] [--networks ResNet50,ViT,...]

Programs are real translations (``from_torch``): stacks of distinct residual MLP layers (a
linear map, then LayerNorm, Linear, GELU and a residual add; every layer a different width so
that no segment repeats) with at least the requested number of nests, and zoo networks at
small shapes. For each program and LLVM opt level it reports, in seconds, wall time of

* ``whole``: ``lower()`` to one PrimFunc, ``tvm.compile``, and the first call (LLVM's JIT
  generates machine code on first use, so a build is not usable before it);
* ``segmented``: ``build()`` (segments compiled and linked under a driver) and the first call;
* ``one nest changed``: the segmented build of the same program with one nest changed, right
  after the first (what verifying a rewrite costs: unchanged segments are reused);

and the number of segments and of distinct segment functions. Caches are cleared between
measurements. Whole builds of more than ``--whole-up-to`` nests are skipped (they grow
superlinearly: minutes to hours). Prints the machine's load average: on a shared machine,
read the times with it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

from leir_egraph.frontend import from_torch  # noqa: E402
from leir_egraph.leir import Program  # noqa: E402
from leir_egraph.leir.ast import Leir  # noqa: E402
from leir_egraph.lower import build, clear_cache, lower, run  # noqa: E402
from leir_egraph.lower import link as linking  # noqa: E402
from leir_egraph.lower.build import call_tensors  # noqa: E402
from leir_egraph.lower.segments import partition  # noqa: E402
from results_file import recorded  # noqa: E402


class Layer(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm, self.fc = nn.LayerNorm(width), nn.Linear(width, width)

    def forward(self, x):
        return x + torch.nn.functional.gelu(self.fc(self.norm(x)))


def mlp_program(nests: int) -> Program:
    """The first stack of distinct residual MLP layers (widths 8, 9, 10, ... joined by linear
    maps) with at least ``nests`` nests."""
    layers, width = [], 8
    torch.manual_seed(0)
    per_layer = None
    while True:
        layers += [nn.Linear(width, width + 1), Layer(width + 1)]
        width += 1
        if per_layer is None or len(layers) // 2 * per_layer >= nests:
            program = from_torch(nn.Sequential(*layers).eval(), (torch.randn(4, 8),))
            per_layer = len(program.leir.nests) / (len(layers) // 2)
            if len(program.leir.nests) >= nests:
                return program


def zoo_program(kind: str) -> Program:
    from leir_egraph.workloads import instantiate
    module, inputs, _ = instantiate(kind, 0)
    return from_torch(module, inputs)


def feeds(program: Program) -> dict:
    rng = np.random.default_rng(0)
    return {s.name: rng.standard_normal(s.shape).astype(s.dtype)
            for s in program.signature.inputs if s.name not in program.values}


def whole_seconds(program: Program, target: dict) -> float:
    import tvm
    start = time.perf_counter()
    executable = tvm.compile(lower(program), target=target)
    args, outs = call_tensors(program, feeds(program))
    executable(*args, *outs)
    return time.perf_counter() - start


def segmented_seconds(program: Program, target: dict) -> float:
    start = time.perf_counter()
    run(program, feeds(program), target)
    return time.perf_counter() - start


def one_nest_changed(program: Program) -> Program:
    """The program with the first equation (not an accumulation) of a nest from the middle on
    multiplied by 1: a different nest, the same values."""
    from dataclasses import replace

    from leir_egraph.leir.analysis import accumulation_op
    from leir_egraph.leir.ast import Bin, Equation, Num
    nests = list(program.leir.nests)
    for n in range(len(nests) // 2, len(nests)):
        body = list(nests[n].body)
        k = next((i for i, item in enumerate(body) if isinstance(item, Equation)
                  and accumulation_op(item) is None), None)
        if k is not None:
            body[k] = replace(body[k], value=Bin("*", body[k].value, Num("1")))
            nests[n] = replace(nests[n], body=tuple(body))
            return program.with_leir(Leir(tuple(nests)))
    raise ValueError("no nest to change")


def measure(program: Program, label: str, opt: int, whole_up_to: int) -> None:
    target = {"kind": "llvm", "opt-level": opt, "num-cores": os.cpu_count() or 1}
    nests = len(program.leir.nests)
    part = partition(program)
    distinct = len({s.key for s in part.segments})
    clear_cache()
    linking.clear()
    whole = whole_seconds(program, target) if nests <= whole_up_to else None
    clear_cache()
    linking.clear()
    segmented = segmented_seconds(program, target)
    changed = one_nest_changed(program)
    start = time.perf_counter()
    build(changed, target)
    rebuild = time.perf_counter() - start
    params = len(program.signature.inputs)
    whole_text = f"{whole:9.2f}" if whole is not None else f"{'(skip)':>9}"
    print(f"{label:<22}{nests:>6}{params:>7}{len(part.segments):>9}{distinct:>9}{opt:>5}"
          f"{whole_text}{segmented:>11.2f}{rebuild:>10.2f}", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nests", default="75,150,300,600")
    ap.add_argument("--opt-levels", default="0,3")
    ap.add_argument("--whole-up-to", type=int, default=300)
    ap.add_argument("--networks", default="ResNet50,ViT,TransformerEncoder,LSTMCellLoop")
    args = ap.parse_args(argv)
    load = os.getloadavg()[0]
    print(f"load average {load:.1f} ({os.cpu_count()} cores); seconds of wall time")
    print(f"{'program':<22}{'nests':>6}{'inputs':>7}{'segments':>9}{'distinct':>9}{'opt':>5}"
          f"{'whole':>9}{'segmented':>11}{'1 changed':>10}")
    import tvm  # noqa: F401  (pay the import before the first measurement)
    warm = mlp_program(9)
    whole_seconds(warm, {"kind": "llvm", "opt-level": 0})
    programs = [("mlp-stack", mlp_program(int(n))) for n in args.nests.split(",") if n]
    programs += [(k, zoo_program(k)) for k in args.networks.split(",") if k]
    for opt in (int(o) for o in args.opt_levels.split(",")):
        for label, program in programs:
            measure(program, label, opt, args.whole_up_to)
    print(f"load average {os.getloadavg()[0]:.1f} after")
    return 0


if __name__ == "__main__":
    sys.exit(recorded(main))
