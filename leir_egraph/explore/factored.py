"""Factored exploration: when every strategy rewrites one kernel and reads only facts of that
kernel, the space of programs is the product of the spaces of its kernels (docs/EXPLORE.md).

A *kernel* is a top-level loop nest. A strategy is **kernel-local** when every rule rewrites a
``Nest`` and every relation its conditions read is one of ``KERNEL_LOCAL_RELATIONS``: facts
about a nest that are a function of the nest term and of the kernel it sits in, nothing else
(the audit is in the comments of that set). If moreover no two kernels of the root write the
same tensor, no nest term ever occurs in two kernels (every nest holds an equation writing its
kernel's tensors, and the loop strategies keep what each kernel writes), so

* a single step of a program rewrites exactly one kernel, and which steps a kernel has depends
  on that kernel alone: the state graph is the Cartesian product of the kernels' own graphs;
* the fewest steps from the root to a program is the sum over kernels of the fewest steps from
  the root's kernel to the program's (distances add in a product graph);
* two programs are the same up to renaming exactly when each kernel is (the root is canonical,
  the strategies rename no tensor, and loop indices are renamed per kernel).

So each distinct kernel variant is matched **once**, whatever number of programs contain it:
round ``r`` matches the kernel variants first found in round ``r - 1`` of every kernel
together, in one engine run per batch (facts computed for the batch, which for these relations
are each variant's own), and the number of programs at each depth is the coefficient of the
product of the kernels' distance polynomials -- counted, never enumerated. The space e-graph
stores each kernel variant once, unioned with the variant it came from; the root program
``State(PCons k1 (PCons k2 ...))`` is then, by congruence, one e-class holding every program
of the product. The state graph is materialised (up to ``max_programs``) only on request.

>>> from leir_egraph import Program
>>> sig = {"inputs": [{"name": "A", "dtype": "float32", "shape": [4, 2, 3]}],
...        "outputs": [{"name": "C", "dtype": "float32", "shape": [4, 2, 3]},
...                    {"name": "E", "dtype": "float32", "shape": [4, 2, 3]}]}
>>> nest = "L^{4}_{a=0}L^{2}_{c=0}L^{3}_{d=0}[%s^{f32,g}_{a,c,d}=A^{f32,g}_{a,c,d};];"
>>> root = Program.parse(nest % "C" + nest % "E", sig)
>>> space = explore_factored(root, ["loop_reorder"], depth=6)
>>> space.counts()      # the 3! x 3! loop orders of two independent kernels, by distance
[1, 6, 13, 12, 4]
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from heapq import nsmallest
from typing import Callable, Iterator

from ..egraph.encoding import Decoder, OccurrenceIndex, encode, replace_at, uncons
from ..egraph.engine import engine_for
from ..egraph.kernel_batches import disjoint_batches, member_of
from ..egraph.steps import resolve
from ..egraph.strategy import Strategy
from ..egraph.traversals import SCHEMA_FILE
from ..leir.analysis import writes
from ..leir.ast import Leir, LoopNest
from ..leir.canonical import canonical, canonical_kernel
from ..leir.printer import to_text
from ..leir.program import Program
from .egraph import SpaceEGraph
from .space import Deadline, Exploration, Pace, Round, peak_rss_mb

# Relations whose facts about a nest depend on the nest term and its kernel only (audited):
KERNEL_LOCAL_RELATIONS = frozenset({
    # egglog analysis over the term itself (rules/prelude/core.egg, operator.egg)
    "LoopIn", "LoopOuter", "LoopNext", "LoopInnermost", "EquationsOnly", "UnrolledCopies",
    # functions of the nest term (guards.py: dependency, reduction_axis; loop_fusion.py)
    "Swappable", "IndependentAxis", "SubscriptOnlyIndex",
    # the nest and the indices bound around it, all inside its kernel (parameters.py)
    "FreshIndex",
    # the nest and the GPU kernel it is in (loop_binding.py, loop_fusion.py)
    "BindingName", "SplitPair", "TilePair",
    # arithmetic on the loop's own extent (guards.py: loop_range_factorization)
    "ProperFactor",
})
_CONSTRUCTORS = frozenset(re.findall(r"\(constructor (\w+)", SCHEMA_FILE.read_text()))


def nonlocal_reason(strategy: Strategy) -> str | None:
    """Why ``strategy`` is not kernel-local (None when it is)."""
    for rule in strategy.rules:
        if rule.lhs_sort != "Nest":
            return f"{strategy.id}/{rule.name} rewrites a {rule.lhs_sort}, not one kernel"
        for condition in rule.parsed_conditions:
            head = condition.head
            if (head in KERNEL_LOCAL_RELATIONS or head in _CONSTRUCTORS
                    or not re.match(r"[A-Za-z]", head)):
                continue
            return f"{strategy.id}/{rule.name} reads {head}, a fact not local to a kernel"
    return None


def unfactorable_reason(program: Program, strategies) -> str | None:
    """Why the space of ``program`` under ``strategies`` is not the product of its kernels'
    spaces (None when it is)."""
    for strategy in resolve(strategies):
        reason = nonlocal_reason(strategy)
        if reason:
            return reason
    seen: dict[str, int] = {}
    for i, nest in enumerate(program.leir.nests):
        for name in sorted(writes(nest)):
            if name in seen:
                return f"kernels {seen[name]} and {i} both write {name}"
            seen[name] = i
    return None


@dataclass
class Kernel:
    """One top-level nest position: its variants (canonical nests, discovery order), their
    distance from the root's nest, and the steps between them."""
    position: int
    variants: list[LoopNest] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    distance: list[int] = field(default_factory=list)
    steps: dict[int, dict[int, list[str]]] = field(default_factory=dict)  # u -> v -> labels
    index: dict[LoopNest, int] = field(default_factory=dict)

    def add(self, nest: LoopNest, distance: int) -> tuple[int, bool]:
        k = self.index.get(nest)
        if k is not None:
            return k, False
        k = self.index[nest] = len(self.variants)
        self.variants.append(nest)
        self.texts.append(to_text(Leir((nest,))))
        self.distance.append(distance)
        return k, True

    def by_distance(self) -> dict[int, list[int]]:
        """Variant numbers at each distance, in discovery order."""
        groups: dict[int, list[int]] = {}
        for v, d in enumerate(self.distance):
            groups.setdefault(d, []).append(v)
        return groups

    def polynomial(self, depth: int) -> list[int]:
        """Number of variants at each distance 0..depth."""
        out = [0] * (depth + 1)
        for d in self.distance:
            if d <= depth:
                out[d] += 1
        return out


def _product(polys: list[list[int]], depth: int) -> list[int]:
    out = [1] + [0] * depth
    for p in polys:
        new = [0] * (depth + 1)
        for i, a in enumerate(out):
            if a:
                for j, b in enumerate(p[:depth + 1 - i]):
                    new[i + j] += a * b
        out = new
    return out


def _trim(counts: list[int]) -> list[int]:
    while len(counts) > 1 and counts[-1] == 0:
        counts.pop()
    return counts


@dataclass
class FactoredSpace:
    """The product space: ``kernels[i]`` holds the variants of the root's kernel ``i``."""
    root: Program
    kernels: list[Kernel]
    depth: int
    complete: bool = True     # every kernel variant within ``depth`` found (no time limit hit)

    def counts(self) -> list[int]:
        """Distinct programs at each depth 0..depth, counted from the kernels' distances."""
        return _trim(_product([k.polynomial(self.depth) for k in self.kernels], self.depth))

    def tuples(self, limit: int | None = None) -> Iterator[tuple[tuple[int, ...], int]]:
        """``(variant numbers per kernel, depth)`` of every program, depth by depth, each depth
        in a fixed order (kernel by kernel, variants in discovery order)."""
        emitted = 0
        by_distance = [k.by_distance() for k in self.kernels]

        def spread(i: int, budget: int):   # choices for kernels i.. summing to budget
            if i == len(self.kernels):
                if budget == 0:
                    yield ()
                return
            for d in range(budget + 1):
                for v in by_distance[i].get(d, ()):
                    for rest in spread(i + 1, budget - d):
                        yield (v, *rest)

        for d in range(self.depth + 1):
            for t in spread(0, d):
                if limit is not None and emitted >= limit:
                    return
                emitted += 1
                yield t, d

    def text(self, choice: tuple[int, ...]) -> str:
        return "".join(k.texts[v] for k, v in zip(self.kernels, choice))

    def program(self, choice: tuple[int, ...]) -> Program:
        return self.root.with_leir(Leir(tuple(k.variants[v]
                                              for k, v in zip(self.kernels, choice))))

    def sample(self, n: int, rng) -> list[tuple[int, ...]]:
        """``n`` distinct programs drawn uniformly from the whole space, the root excluded (all
        of them when there are fewer): a depth with probability proportional to its count, then
        each kernel's distance in proportion to the ways the later kernels can make up the
        rest, then a variant at that distance."""
        polys = [k.polynomial(self.depth) for k in self.kernels]
        ways = [[0] * (self.depth + 1) for _ in range(len(polys) + 1)]
        ways[-1][0] = 1
        for i in reversed(range(len(polys))):
            for b in range(self.depth + 1):
                ways[i][b] = sum(polys[i][d] * ways[i + 1][b - d] for d in range(b + 1))
        total = sum(ways[0]) - 1
        groups = [k.by_distance() for k in self.kernels]
        chosen: set[tuple[int, ...]] = set()
        out: list[tuple[int, ...]] = []
        while len(out) < min(n, total):
            budget = rng.choices(range(1, self.depth + 1), weights=ways[0][1:])[0]
            choice = []
            for i, g in enumerate(groups):
                d = rng.choices(range(budget + 1), weights=[
                    polys[i][d] * ways[i + 1][budget - d] for d in range(budget + 1)])[0]
                choice.append(rng.choice(g[d]))
                budget -= d
            t = tuple(choice)
            if t not in chosen:
                chosen.add(t)
                out.append(t)
        return out

    def best(self, n: int, kernel_cost: Callable[[LoopNest], float]
             ) -> list[tuple[float, tuple[int, ...]]]:
        """The ``n`` programs of least total ``kernel_cost`` (summed over kernels) within the
        depth: extraction from the product with an additive cost, per depth budget (a
        dynamic programme over kernels keeping the ``n`` best partial choices per depth used)."""
        costs = [[kernel_cost(v) for v in k.variants] for k in self.kernels]
        partial: dict[int, list[tuple[float, tuple[int, ...]]]] = {0: [(0.0, ())]}
        for k, c in zip(self.kernels, costs):
            grown: dict[int, list] = {}
            for used, options in partial.items():
                for v, d in enumerate(k.distance):
                    if used + d > self.depth:
                        continue
                    grown.setdefault(used + d, []).extend(
                        (total + c[v], (*choice, v)) for total, choice in options)
            partial = {u: nsmallest(n, opts) for u, opts in grown.items()}
        return nsmallest(n, [x for opts in partial.values() for x in opts])


class _KernelMatcher:
    """Matches kernel variants in batches on one engine; results are canonical nests."""

    def __init__(self, root: Program, chosen: tuple[Strategy, ...]):
        self.root, self.chosen = root, chosen
        self.engine = engine_for(chosen)
        self.decoder = Decoder()
        self.known: dict = {}

    def steps(self, batch: list[LoopNest]) -> list[list[tuple[LoopNest, str, str]]]:
        """Per member, its single steps ``(canonical successor, strategy, rule)``, one per
        distinct (strategy, site, successor) in match order, as ``explorer.successors``."""
        program = self.root.with_leir(Leir(tuple(batch)))
        term = encode(program.leir)
        index = OccurrenceIndex(term)
        members = uncons(term, "PCons")
        out: list[list] = [[] for _ in batch]
        seen: set = set()
        for m in self.engine.matches(program, self.chosen):
            if m.rhs is None or m.rhs == m.lhs:
                continue
            for path in index.paths(m.lhs):
                member, inner = member_of(path)
                old = members[member]
                new = replace_at(old, inner, m.rhs)
                if new == old or (m.strategy, member, inner, new) in seen:
                    continue
                seen.add((m.strategy, member, inner, new))
                after = self.known.get(new)
                if after is None:
                    after = self.known[new] = canonical_kernel(self.decoder(new))
                out[member].append((after, m.strategy, m.rule))
        return out


def explore_factored(program: Program, strategies, *, depth: int,
                     time_limit: float | None = None,
                     progress: Callable[[Round], None] | None = None,
                     rounds: list[Round] | None = None,
                     deadline: Deadline | None = None) -> FactoredSpace:
    """The product space of ``program`` to ``depth`` (raises ValueError when it is not a
    product: ``unfactorable_reason``). Kernel variants are matched once each, round by round;
    ``rounds`` receives per-round statistics. ``time_limit`` seconds from this call (or a
    ``deadline`` shared with the caller) cut the round in progress: the deadline is checked
    before every engine run, whose number of variants is sized to the time left (one at
    least: one engine run is the indivisible piece), and between the batches of the space
    e-graph's flush."""
    if depth < 0:
        raise ValueError(f"depth must be >= 0, not {depth}")
    deadline = Deadline(time_limit) if deadline is None else deadline
    chosen = resolve(strategies)
    reason = unfactorable_reason(program, chosen)
    if reason:
        raise ValueError(f"the space is not a product of kernels: {reason}")
    root = canonical(program)
    matcher = _KernelMatcher(root, chosen)
    kernels = [Kernel(i) for i in range(len(root.leir.nests))]
    for k, nest in zip(kernels, root.leir.nests):
        k.add(canonical_kernel(nest), 0)
    space = FactoredSpace(root, kernels, depth)
    storage = SpaceEGraph()
    handles = {(k.position, 0): storage.add_nest(k.variants[0]) for k in kernels}
    storage.add_program(space.text(tuple(0 for _ in kernels)),
                        [handles[(k.position, 0)] for k in kernels])
    storage.flush()
    frontier = [(k.position, 0) for k in kernels]
    rounds = [] if rounds is None else rounds
    pace = Pace()
    for d in range(1, depth + 1):
        if not frontier:
            break
        if deadline.passed():
            space.complete = False
            break
        rnd = Round(d)
        t0 = time.perf_counter()
        found: list[tuple[int, int]] = []
        items = [(i, v, kernels[i].variants[v]) for i, v in frontier]
        for batch in disjoint_batches(items, lambda item: item[2]):
            while batch and not deadline.passed():
                size = pace.size(len(batch), deadline)
                chunk, batch = batch[:size], batch[size:]
                t1 = time.perf_counter()
                results = matcher.steps([nest for _, _, nest in chunk])
                rnd.matching_s += time.perf_counter() - t1
                t2 = time.perf_counter()
                for (i, v, _), steps in zip(chunk, results):
                    rnd.expanded += 1
                    kernel = kernels[i]
                    for after, strategy, rule in steps:
                        rnd.steps += 1
                        w, new = kernel.add(after, d)
                        if w == v:
                            continue
                        if new:
                            found.append((i, w))
                            handles[(i, w)] = storage.add_nest(after)
                        storage.union_nests(handles[(i, v)], handles[(i, w)])
                        labels = kernel.steps.setdefault(v, {}).setdefault(w, [])
                        label = f"{strategy}/{rule}"
                        if label not in labels:
                            labels.append(label)
                rnd.placing_s += time.perf_counter() - t2
                pace.record(len(chunk), time.perf_counter() - t1)
            if batch:
                break
        t1 = time.perf_counter()
        flushed = storage.flush(deadline)
        if rnd.expanded < len(items) or not flushed:
            rnd.stopped, space.complete = "time_limit", False
        rnd.enodes, rnd.eclasses = storage.size()["total"]
        rnd.placing_s += time.perf_counter() - t1
        counts = _product([k.polynomial(d) for k in kernels], d)
        rnd.new_programs = counts[d]
        rnd.seconds = time.perf_counter() - t0
        rnd.peak_rss_mb = peak_rss_mb()
        rounds.append(rnd)
        if progress is not None:
            progress(rnd)
        frontier = found
        if not space.complete:
            break
    return space


def materialise(space: FactoredSpace, exploration: Exploration, max_programs: int | None,
                deadline: Deadline | None = None) -> str:
    """Fill ``exploration`` (its graph and programs) with the product's programs in depth order,
    at most ``max_programs`` of them, and the steps between them. Returns ``""`` when all fit,
    ``"max_programs"`` when the graph holds the first ``max_programs``, ``"time_limit"`` when
    ``deadline`` passed first (checked before each program is added and before the steps of
    each are: the root is always held, and a graph cut while its steps are added holds its
    programs with part of the steps between them)."""
    deadline = Deadline(None) if deadline is None else deadline
    cut = ""
    keys: dict[tuple[int, ...], str] = {}
    for choice, d in space.tuples(None if max_programs is None else max_programs + 1):
        if max_programs is not None and len(keys) >= max_programs:
            cut = "max_programs"
            break
        if keys and deadline.passed():
            cut = "time_limit"
            break
        keys[choice] = key = space.text(choice)
        if d == 0:
            exploration.root_key = key
        exploration.add_node(space.program(choice), d, key)
    depth_of = {key: d for key, d in exploration.graph.nodes(data="depth")}
    for n, (choice, key) in enumerate(keys.items()):
        if n and deadline.passed():
            return "time_limit"
        if depth_of[key] >= space.depth:
            continue
        for i, (kernel, v) in enumerate(zip(space.kernels, choice)):
            for w, labels in kernel.steps.get(v, {}).items():
                target = keys.get((*choice[:i], w, *choice[i + 1:]))
                if target is None:
                    continue
                exploration.graph.add_edge(key, target, steps=list(labels))
    return cut
