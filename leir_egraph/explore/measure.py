"""Ranking and measuring explored programs.

``rank`` orders every program of an exploration by the CPU cost model (``leir_egraph.cost``,
docs/COST.md): the ranking is over the state graph's nodes, not an e-graph extraction (the
model is whole-program, not tree-compositional). ``top_k`` verifies the k cheapest non-root
programs against the **root** (Equal and Independent, ``leir_egraph.verify``) and takes the
times the verifier's worker measures for root and candidate (TVM llvm, opt-level 3,
``time_evaluator`` through ``lower.build.time_program``, same seeded inputs, back to back).
``torch_eager_ms`` times a zoo kind's PyTorch module on its own inputs, and ``tvm_ms`` a
program on the same inputs, so the best program can be set beside torch eager.

>>> # space = explore(root, ["loop_reorder"], depth=2)
>>> # [m.speedup for m in top_k(space, 4)]      # root time / program time, verified ones
"""

from __future__ import annotations

import random
import statistics
import time
from dataclasses import dataclass

from ..cost import costs
from ..leir.program import Program
from .space import Exploration


def rank(space: Exploration) -> list[tuple[str, float]]:
    """(canonical text, modelled seconds) of every explored program, cheapest first; ties keep
    discovery order."""
    keys = sorted(space.programs, key=lambda k: space.graph.nodes[k]["index"])
    modelled = costs(space.programs[k] for k in keys)
    order = sorted(range(len(keys)), key=lambda i: (float(modelled[i]), i))
    return [(keys[i], float(modelled[i])) for i in order]


@dataclass(frozen=True)
class Measured:
    """One explored program verified against the root and timed."""
    program: str
    depth: int
    modelled_s: float
    level: str
    equal: bool
    independent: bool
    root_ms: float | None
    time_ms: float | None
    reason: str | None = None
    threads: int | None = None   # TVM runtime threads the times ran on (lower.threads)

    @property
    def speedup(self) -> float | None:
        return self.root_ms / self.time_ms if self.root_ms and self.time_ms else None

    @property
    def valid(self) -> bool:
        """Equal to the root, and Independent (or the root's own P/V/B claims are false)."""
        return self.equal and self.independent

    def to_dict(self) -> dict:
        return {**self.__dict__, "speedup": self.speedup, "valid": self.valid}


def measure(space: Exploration, keys, *, trials: int = 3, timeout: float = 60.0,
            seed: int = 0, timing: bool = True) -> list[Measured]:
    """Verify (and time) the programs ``keys`` of ``space`` against its root, in order."""
    from ..verify import verify_many

    keys = list(keys)
    modelled = dict(rank(space)) if keys else {}
    pairs = [(space.root, space.programs[k]) for k in keys]
    results = verify_many(pairs, trials=trials, timeout=timeout, seed=seed, timing=timing)
    out = []
    for k, r in zip(keys, results):
        independent = r.independent or (r.equal and r.before_independent is False)
        out.append(Measured(k, space.graph.nodes[k]["depth"], modelled[k], r.level, r.equal,
                            independent, r.time_before_ms, r.time_after_ms, r.reason,
                            r.threads))
    return out


def best_keys(space: Exploration, k: int) -> list[str]:
    """The ``k`` programs the cost model ranks best, the root excluded. A factored exploration
    extracts them from its whole product space (``FactoredSpace.best`` with the per-kernel
    cost, ``cost.kernel_cost``), adding any its graph does not hold to the graph; otherwise
    they are ranked over the graph's programs."""
    if space.factored is None:
        return [key for key, _ in rank(space) if key != space.root_key][:k]
    from ..cost import kernel_cost
    factored = space.factored
    seconds = kernel_cost(factored.root)
    keys = [_hold(space, choice) for _, choice in factored.best(k + 1, seconds)]
    return [key for key in keys if key != space.root_key][:k]


def _hold(space: Exploration, choice: tuple[int, ...]) -> str:
    """The key of a factored space's program, added to the graph if it does not hold it."""
    factored = space.factored
    key = factored.text(choice)
    if key not in space.programs:
        depth = sum(kern.distance[v] for kern, v in zip(factored.kernels, choice))
        space.add_node(factored.program(choice), depth, key)
    return key


def top_k(space: Exploration, k: int, **options) -> list[Measured]:
    """The ``k`` programs the cost model ranks best (``best_keys``: the root excluded), verified
    and timed against the root, in ranking order."""
    return measure(space, best_keys(space, k), **options)


def sample(space: Exploration, n: int, *, seed: int | None = None,
           per_depth: bool = False) -> list[str]:
    """A seeded sample of ``n`` explored programs (the root excluded); ``per_depth``: ``n`` from
    every depth (of the graph). A factored exploration whose graph holds only part of its space
    draws uniformly from the whole space (``FactoredSpace.sample``)."""
    rng = random.Random(space.seed if seed is None else seed)
    if space.factored is not None and len(space) < sum(space.space_counts()) and not per_depth:
        # the graph holds part of the space: draw from the whole product instead
        return [_hold(space, c) for c in space.factored.sample(n, rng)]
    ordered = sorted(space.programs, key=lambda k: space.graph.nodes[k]["index"])
    if not per_depth:
        pool = [k for k in ordered if k != space.root_key]
        return rng.sample(pool, min(n, len(pool)))
    out = []
    for d in range(1, len(space.counts())):
        pool = [k for k in ordered if space.graph.nodes[k]["depth"] == d]
        out.extend(rng.sample(pool, min(n, len(pool))))
    return out


def tvm_ms(program: Program, inputs) -> float:
    """Median time (ms) of ``program`` on ``inputs`` (torch tensors in signature input order, or
    a name -> array mapping), TVM llvm at opt-level 3 (``lower.build.time_program``)."""
    from ..lower.build import time_program
    return time_program(program, program_inputs(program, inputs))   # "llvm": as the verifier


def program_inputs(program: Program, inputs) -> dict:
    """``inputs`` as the name -> array mapping TVM runs ``program`` on: a mapping as it is, or
    the module's torch tensors in the order of the signature's inputs (the frontend's order;
    inputs it stored, weights, come from ``program.values``)."""
    if isinstance(inputs, dict):
        return inputs
    tensors = [x for x in inputs if hasattr(x, "detach")]
    return {spec.name: x.detach().cpu().numpy()
            for spec, x in zip(program.signature.inputs, tensors)}


def torch_eager_ms(module, inputs, *, warmup: int = 2, repeat: int = 5,
                   min_repeat_ms: float = 10.0, threads: int | None = 1) -> float:
    """Median time (ms) of ``module(*inputs)`` in eager PyTorch, measured the way
    ``time_program`` measures TVM: warm-up calls, then ``repeat`` repeats each looping the call
    until it has run ``min_repeat_ms``. ``threads``: torch's intra-op threads during the
    measurement (``None``: torch's default). One by default: on a loaded 2-core machine torch's
    thread pool spins, and a tiny program takes orders of magnitude longer than with one."""
    import torch
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        return _eager_ms(module, inputs, warmup, repeat, min_repeat_ms)
    finally:
        torch.set_num_threads(before)


def _eager_ms(module, inputs, warmup: int, repeat: int, min_repeat_ms: float) -> float:
    import torch
    with torch.no_grad():
        for _ in range(warmup):
            module(*inputs)
        start = time.perf_counter()
        module(*inputs)
        once = max(time.perf_counter() - start, 1e-7)
        number = max(1, int(min_repeat_ms / 1e3 / once))
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            for _ in range(number):
                module(*inputs)
            times.append((time.perf_counter() - start) / number)
    return statistics.median(times) * 1e3
