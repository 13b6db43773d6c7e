"""The ``rules`` proposer: candidates are single steps of our engine (``egraph.all_steps``).

``rank="cost"`` orders the steps by
the CPU cost model (``leir_egraph.cost``) and offers the ``k`` cheapest; with ``lookahead=2``
a step is scored by the cheapest program reachable with it and one further step (among the
``beam`` cheapest first steps), so that an enabling step (a loop reorder that lets the loop
vectorise, a split that makes a parallel loop) is not ranked by its own, unchanged cost.
``diverse=True`` (the default) then interleaves the strategies: the best step of every
strategy first (strategies in the order of their best steps), then the second best of each,
and so on. The model ranks loop moves finely and everything else coarsely, so a plain
cost order spends a 16-sample budget on sixteen near-identical splits, unrolls and bindings
while a step of another strategy that pays, ranked lower, is never offered; interleaving keeps
the cost order inside each strategy and lets the judge's measurements choose between
strategies.
The model's verdicts shape the order too (issue 39: "no samples spent on moves the model knows
cannot help"): steps the model expects to make the program faster (their own cost, or the
lookahead's, below the program's) come before every step it expects to gain nothing, each group
interleaved as above; and a step that only adds a P loop (``PARALLEL_ONLY``) is never offered when the programs
are timed on one thread, where a P loop is the serial loop plus a fork and join. The model's
machine has the cores the timings run on (``lower.threads.wanted``: ``LEIR_NUM_THREADS``,
``TVM_NUM_THREADS`` or the CPUs this process may use).
``rank="random"`` offers a seeded uniform choice -- the baseline. Either way a step is offered
only if no step equal to it up to renaming was judged in this run or offered before it.

Steps and costs are memoised per program text, so algorithms run one after another on the
same workload share the enumeration work. With ``shared=True`` a node's kernel-local steps
come from matches kept per kernel and its window-local ones from matches kept per window key
(``KernelSteps.node_matches``): a child matches only the kernels and windows its parent did
not have. Costs are computed by ``cost.SharedSeconds``, which
costs each nest once for all the programs holding it. The lookahead's second steps are only
costed, never offered, so with ``shared=True`` (the default) the kernel-local ones among them
(the loop strategies) come from ``KernelSteps``: each distinct kernel of the lookahead's
programs is matched once and its successors are put in place as nests, without building or
printing a program; the other lookahead strategies are matched per program and their steps
put in place and costed as nests the same way (``KernelSteps.rest_successors``). The ranking
is the same as with ``shared=False``, which enumerates every second step in full (tested).

    >>> from leir_egraph import Program
    >>> sig = {"inputs": [{"name": "A", "dtype": "float32", "shape": [64, 256]}],
    ...        "outputs": [{"name": "D", "dtype": "float32", "shape": [64]}]}
    >>> p = Program.parse("B^{64}_{tx=0}L^{256}_{a=0}[D^{f32,g}_{tx}=D^{f32,g}_{tx}+A^{f32,g}_{tx,a};];", sig)
    >>> ranked = RulesProposer().ranked(p)
    >>> ranked[0].strategy in {t.strategy for t in ranked}
    True
"""

from __future__ import annotations

import random
import re
from typing import Sequence

from ..cost import CPU, Machine, SharedSeconds
from ..egraph import Transition, all_steps
from ..egraph.steps import default_strategies, resolve
from ..gcpause import gc_paused
from ..leir.canonical import canonical_text
from ..leir.program import Program
from .kernel_steps import KernelSteps
from .proposer import Request
from .tree import Proposal


# The second step of the lookahead tries, by default, the loop and fusion strategies among
# the built-in ones: they are where speed comes from on a CPU (docs/COST.md), and enumerating
# all 46 twice per node is too slow. A user's own strategies (loaded from a directory) that the
# proposer runs are looked ahead with too: the user chose them, and nothing says they do not
# enable a faster step.
LOOKAHEAD_STRATEGIES = ("loop_reorder", "loop_split", "loop_parallelization",
                        "bound_loop_parallelization", "loop_vectorization",
                        "split_vectorization", "register_tiling", "operator_fusion",
                        "compute_inline")
# How many first steps the lookahead costs the second steps of (``_looked_ahead``); each
# costs 0.1-0.3 s on the 30 CPU workloads.
LOOKAHEAD_WIDTH = 24
# The most iterations loop_vectorization makes vector lanes of (rules/operator/
# loop_vectorization.toml): a split whose inner loop has 2 to this many iterations can be
# followed by a V loop.
VECTOR_LANES = 16
# How many transposed copies of an operand (layout_transformation, "dimensions ... exchanged")
# the lookahead costs the second steps of, beyond LOOKAHEAD_WIDTH: a GEMM whose weight is
# stored [out, in] (torch's Linear) reads it across the output's vector lanes, a gather;
# register_tiling after the transposed copy reads whole vectors (#34: 6x faster measured,
# docs/SEARCH.md "Enablers"). The copy alone is slower, so only the lookahead sees it pay.
TRANSPOSES = 8
# Steps that only add parallel (P) loops: they cannot make a program faster on one thread.
PARALLEL_ONLY = frozenset({"loop_parallelization", "bound_loop_parallelization"})


class RulesProposer:
    """``strategies``: ids (built-in, or registered by ``load_strategies(dir)``) or
    :class:`~leir_egraph.egraph.Strategy` objects; None for every built-in strategy.
    ``lookahead_strategies``: the strategies of the lookahead's second step -- ``"auto"``
    (default: the built-in ``LOOKAHEAD_STRATEGIES`` and every non-built-in strategy, among
    those the proposer runs), None (every strategy the proposer runs) or ids/strategies. An
    unknown id raises :class:`~leir_egraph.egraph.strategy.UnknownStrategy` here, before any
    search runs. ``shared=False`` enumerates every lookahead step in full instead of matching
    each kernel once (the same ranking, slower: the reference the shared one is tested
    against)."""

    def __init__(self, rank: str = "cost", *, seed: int = 0, strategies: Sequence | None = None,
                 lookahead: int = 2, beam: int = 2, diverse: bool = True,
                 lookahead_strategies: Sequence | str | None = "auto",
                 machine: Machine | None = None, shared: bool = True):
        if rank not in ("cost", "random"):
            raise ValueError(f"rank {rank!r}: use 'cost' or 'random'")
        self.rank, self.seed, self.lookahead, self.beam = rank, seed, lookahead, beam
        self.diverse = diverse
        self.strategies = list(resolve(strategies)) if strategies is not None else None
        if self.strategies == []:
            raise ValueError("strategies: an empty list chooses nothing; None means all")
        self.machine = machine if machine is not None else timing_machine()
        self.shared = shared
        self._seconds = SharedSeconds(self.machine)
        self.lookahead_strategies = self._lookahead(lookahead_strategies)
        self._kernel_steps: KernelSteps | None = None
        self._next: dict[str, list[Transition]] = {}
        self.name = f"rules-{rank}"
        self._steps: dict[str, list[Transition]] = {}
        self._cost: dict[str, float] = {}
        self._ranked: dict[str, list[Transition]] = {}
        self._expected: dict[str, float] = {}

    def _lookahead(self, chosen) -> list[str] | None:
        """The ids of the lookahead's second-step strategies (None: the proposer's own)."""
        if chosen is None:
            return None
        if chosen != "auto":
            return [s.id for s in resolve(chosen)]
        runs = self.strategies if self.strategies is not None else list(default_strategies())
        builtin = {s.id for s in default_strategies()}
        return [s.id for s in runs if s.id in LOOKAHEAD_STRATEGIES or s.id not in builtin]

    # ------------------------------------------------------------ memoised pieces

    def steps(self, program: Program) -> list[Transition]:
        """The single steps of ``program`` (textual duplicates dropped). Steps equal up to
        renaming are dropped when offered (``propose``), not here: canonicalising all of an
        attention program's thousands of steps is too slow per node, and only ``k`` are
        offered."""
        if program.text not in self._steps:
            seen, out = {program.text}, []
            kernels = self._shared_kernels()
            # the node's engine run (``node_matches`` makes it for ``all_steps``) under the
            # collector's pause ``all_steps`` makes it under (leir_egraph/gcpause.py)
            with gc_paused():
                known = kernels.node_matches(program) if kernels is not None else None
                steps = all_steps(program, self.strategies, known=known)
            for t in steps:
                if t.after.text not in seen:
                    seen.add(t.after.text)
                    out.append(t)
            self._steps[program.text] = out
        return self._steps[program.text]

    def next_steps(self, program: Program) -> list[Transition]:
        """The lookahead's second steps (``lookahead_strategies`` only)."""
        if self.lookahead_strategies is None:
            return self.steps(program)
        if program.text not in self._next:
            self._next[program.text] = all_steps(program, self._lookahead_set())
        return self._next[program.text]

    def _lookahead_set(self) -> list:
        """The lookahead strategies as objects, in the proposer's own when it has them (a
        user strategy loaded later under the same id does not change a proposer's set)."""
        own = {s.id: s for s in self.strategies or ()}
        return [own.get(sid, sid) for sid in self.lookahead_strategies]

    def cost_of(self, program: Program) -> float:
        """``cost(program, machine).seconds``, memoised per text."""
        if program.text not in self._cost:
            self._cost[program.text] = self._seconds(program)
        return self._cost[program.text]

    def best_next(self, program: Program) -> float | None:
        """The least cost among the lookahead's second steps from ``program`` (None when it
        has none): with ``shared``, the kernel-local strategies' steps from ``KernelSteps``
        (costed as nests) and the others' matched per program, costed as nests too; else every
        step enumerated."""
        kernels = self._shared_kernels()
        if kernels is not None:
            if kernels.applies(program):
                costs = [self._seconds.of(program.signature, nests)
                         for nests in kernels.successors(program)]
                costs += [self._seconds.of(program.signature, nests)
                          for nests in kernels.rest_successors(program)]
                return min(costs) if costs else None
        nxt = self.next_steps(program)
        return min(self.cost_of(n.after) for n in nxt) if nxt else None

    def _shared_kernels(self) -> KernelSteps | None:
        """The lookahead strategies' ``KernelSteps`` (None unless ``shared``)."""
        if not self.shared:
            return None
        if self._kernel_steps is None:
            chosen = (tuple(self._lookahead_set()) if self.lookahead_strategies is not None
                      else self.strategies)
            self._kernel_steps = KernelSteps(resolve(chosen), resolve(self.strategies))
        return self._kernel_steps

    def ranked(self, program: Program) -> list[Transition]:
        """The steps of ``program`` best first (cost model, with lookahead)."""
        if program.text in self._ranked:
            return self._ranked[program.text]
        with gc_paused():  # thousands of programs costed: garbage without cycles
            order = self._rank(program)
        self._ranked[program.text] = order
        return order

    def _rank(self, program: Program) -> list[Transition]:
        steps = self.steps(program)
        if self.machine.cores == 1:
            steps = [t for t in steps if t.strategy not in PARALLEL_ONLY]
        own = {id(t): self.cost_of(t.after) for t in steps}
        order = sorted(steps, key=lambda t: (own[id(t)], t.strategy, t.after.text))
        score = dict(own)
        if self.lookahead >= 2:
            ahead = self._looked_ahead(order)
            kernels = self._shared_kernels()
            if kernels is not None:
                # the node first: its windows are most of every looked-ahead program's
                kernels.prefetch([p for p in [program, *(t.after for t in ahead)]
                                  if kernels.applies(p)])
            for t in ahead:
                best = self.best_next(t.after)
                if best is not None:
                    score[id(t)] = min(own[id(t)], best)
            order = sorted(steps, key=lambda t: (score[id(t)], own[id(t)], t.strategy,
                                                 t.after.text))
        for t in steps:
            self._expected[t.after.text] = score[id(t)]
        now = self.cost_of(program)
        gains = [t for t in order if score[id(t)] < now]
        rest = [t for t in order if score[id(t)] >= now]
        if self.diverse:
            gains, rest = interleave(gains), interleave(rest)
        return gains + rest

    def expected(self, program: Program) -> float | None:
        """The model's seconds for ``program`` with the lookahead: the least cost of it and of
        the costed steps after it, as ranked when a step reached it (None: not reached by a
        ranked step). The beam keeps an enabling child by it (``algorithms.beam``)."""
        return self._expected.get(program.text)

    def _looked_ahead(self, order: list[Transition]) -> list[Transition]:
        """The first steps whose second steps are costed: the ``beam`` most promising, then
        the steps of the lookahead strategies round-robin over the loop each one acts on
        (strategy, nest, loop index; in cost order within each), ``LOOKAHEAD_WIDTH`` in all.
        An enabler whose own cost is unchanged still gets looked at, and not only the
        cheapest of its strategy: the split of a sigmoid's 505 columns into 101 x 5, which
        lets the 5 vectorise, costs a little more than the splits of its 64 rows, whose
        vector lanes would be strided (workload #81). The splits of one loop cost the same,
        so among them those whose inner loop could become vector lanes come first, the most
        lanes first (#79's GELU over 546 columns: 39 x 14, not 2 x 273 whose cost is as low)."""
        head = order[:self.beam]
        groups: dict[tuple, list[Transition]] = {}
        for t in order:
            if self.lookahead_strategies is None or t.strategy in self.lookahead_strategies:
                site = (t.strategy, t.bindings.get("nest"), t.bindings.get("i"))
                groups.setdefault(site, []).append(t)
        for group in groups.values():
            group.sort(key=lambda t: -_lanes_inside(t))   # stable: cost order otherwise
        chosen, seen = list(head), {id(t) for t in head}
        transposes = sorted((t for t in order if _transposes(t)), key=lambda t: -_transposes(t))
        for t in transposes[:TRANSPOSES]:
            if id(t) not in seen:   # beyond the width: a transposed copy enables a tile
                seen.add(id(t))
                chosen.append(t)
        for rank in range(max((len(g) for g in groups.values()), default=0)):
            for group in groups.values():
                if len(chosen) >= max(LOOKAHEAD_WIDTH, len(head)):
                    return chosen
                if rank < len(group) and id(group[rank]) not in seen:
                    seen.add(id(group[rank]))
                    chosen.append(group[rank])
        return chosen

    # ------------------------------------------------------------ the interface

    def propose(self, request: Request) -> list[Proposal]:
        program = request.node.program
        if self.rank == "cost":
            pool = self.ranked(program)
        else:
            pool = list(self.steps(program))
            rng = random.Random(f"{self.seed}|{canonical_text(program)}|{request.node.trials}")
            rng.shuffle(pool)
        out, offered = [], {canonical_text(program)}
        for t in pool:
            key = canonical_text(t.after)
            if key in request.seen or key in offered:
                continue
            offered.add(key)
            out.append(Proposal(t.after.text, t.strategy, t.cot, program=t.after))
            if len(out) == request.k:
                break
        return out


def timing_machine() -> Machine:
    """The model's CPU with the cores the timings run on (``lower.threads.wanted``) and SIMD
    exp/log in V loops unless ``LEIR_VECTOR_MATH=0`` (``lower.vector_math``)."""
    from dataclasses import replace

    from ..lower.threads import wanted
    from ..lower.vector_math import enabled
    return replace(CPU, cores=wanted(), vector_math=enabled())


def _transposes(t: Transition) -> int:
    """2 for a layout_transformation step that copies an operand of a reduction nest (its
    innermost loop is no subscript of the target) with two dimensions exchanged so that the
    nest's second-innermost loop becomes its last subscript where the innermost loop was (``G_{a,c}`` -> ``G'_{c,a}`` in ``... L_a L_c [D_{tx,a} += A_{tx,c}*G_{a,c}]``: the
    lanes register_tiling makes of ``a`` then read whole vectors), 1 for any other such copy,
    0 for any other step."""
    if t.strategy != "layout_transformation":
        return 0
    layout = str(t.bindings.get("layout", ""))
    if "exchanged" not in layout:
        return 0
    head, _, body = str(t.bindings.get("n", "")).partition("[")
    loops = re.findall(r"_\{(\w+)=0\}", head)
    target = re.findall(r"_\{([^}]*)\}", body.split("=", 1)[0])
    old = str(t.bindings.get("subs", "")).split(",")
    new = str(t.bindings.get("new", "")).split(",")
    reduces = len(loops) >= 2 and bool(target) and loops[-1] not in target[-1].split(",")
    return 2 if reduces and old[-1] == loops[-1] and new[-1] == loops[-2] else 1


def _lanes_inside(t: Transition) -> int:
    """The inner extent of a ``loop_split`` step when a V loop could take it (2 to
    ``VECTOR_LANES`` iterations), else 0."""
    inner = t.bindings.get("m") if t.strategy == "loop_split" else None
    m = int(inner) if inner is not None and str(inner).isdigit() else 0
    return m if 2 <= m <= VECTOR_LANES else 0


def interleave(order: Sequence[Transition]) -> list[Transition]:
    """``order`` round-robin over strategies: the first step of each strategy (in the order of
    their first steps), then the second of each, ...; the order within a strategy is kept.

        [split1, split2, reorder1, split3, tile1] -> [split1, reorder1, tile1, split2, split3]
    """
    groups: dict[str, list[Transition]] = {}
    for t in order:
        groups.setdefault(t.strategy, []).append(t)
    out: list[Transition] = []
    for rank in range(max((len(g) for g in groups.values()), default=0)):
        out.extend(g[rank] for g in groups.values() if rank < len(g))
    return out
