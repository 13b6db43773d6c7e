"""The single steps of kernel-local strategies, matched once per kernel and placed by nest.

A search ranks a node by its steps and, with lookahead, by the steps of its best steps
(``rules_proposer``). Those programs differ from the node in one nest, and the lookahead's
loop strategies are **kernel-local** (``explore.factored.nonlocal_reason``: every rule rewrites
a ``Nest`` and reads only facts of the nest and its kernel): when no nest term occurs in two
kernels of a program, every fact about a nest is the one its kernel alone has, so the steps of
such a strategy on the program are exactly, kernel by kernel, the steps of that kernel alone --
the factored exploration's argument (docs/EXPLORE.md), checked per program here rather than
for a whole space (an accumulation's initialising and updating kernels write the same tensor,
which the factored exploration refuses, but they hold different nests). So each distinct
kernel is matched once, whatever number of programs hold it, in batches of kernels that share
no nest term (one engine run per batch), and a program's one-step successors are its kernels'
successors put in place, as tuples of nests: nothing is printed or built as a ``Program`` for
a caller that only costs them (``cost.SharedSeconds.of``).

    >>> from leir_egraph import Program
    >>> from leir_egraph.egraph.steps import resolve
    >>> sig = {"inputs": [{"name": "A", "dtype": "float32", "shape": [16, 8]}],
    ...        "outputs": [{"name": "D", "dtype": "float32", "shape": [16]}]}
    >>> p = Program.parse("B^{16}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx}=D^{f32,g}_{tx}"
    ...                   "+A^{f32,g}_{tx,a};];", sig)
    >>> steps = KernelSteps(resolve(["loop_reorder"]))
    >>> [p.with_leir(Leir(nests)).text for nests in steps.successors(p)]
    ['L^{8}_{a=0}B^{16}_{tx=0}[D^{f32,g}_{tx}=D^{f32,g}_{tx}+A^{f32,g}_{tx,a};];']
"""

from __future__ import annotations

from ..egraph.encoding import Decoder, OccurrenceIndex, encode, replace_at, uncons
from ..egraph.engine import RawMatch, engine_for
from ..egraph.parameters import fresh_rules
from ..egraph.strategy import Strategy
from ..egraph.kernel_batches import disjoint_batches, member_of
from ..egraph.windows import WindowMatches, window_reason
from ..explore.factored import nonlocal_reason
from ..leir.ast import Leir, LoopNest
from ..leir.program import Program
from ..leir.traverse import nests_in

__all__ = ["KernelSteps"]


class KernelSteps:
    """The kernel-local strategies among ``strategies`` (``local``; the others are ``rest``),
    their steps kept per kernel (top-level nest) as the distinct nests each step makes of it."""

    def __init__(self, strategies: tuple[Strategy, ...], node: tuple[Strategy, ...] = ()):
        self.local = tuple(s for s in strategies if nonlocal_reason(s) is None)
        self.rest = tuple(s for s in strategies if nonlocal_reason(s) is not None)
        # the kernel-local strategies among a node's own (``node``): their raw matches are
        # kept per kernel (``node_matches``), each node's kernel matched once with all of
        # them; not when a rule names fresh tensors (its matches depend on the program)
        node_local = tuple(s for s in node if nonlocal_reason(s) is None)
        self.node_local = node_local if not fresh_rules(node_local) else ()
        self._matched = self.local + tuple(s for s in self.node_local if s not in self.local)
        # the node's own strategies that are window-local (egraph/windows.py; not one that
        # runs alone): their raw matches are kept per window key (``node_matches``)
        self.node = tuple(node)
        node_rest = tuple(s for s in node if nonlocal_reason(s) is not None)
        node_engine = engine_for(node_rest) if node_rest else None
        node_windowed = tuple(s for s in node_rest if not s.run_alone
                              and window_reason(s, node_engine) is None)
        self._node_windows = WindowMatches(node_windowed, raw=True) if node_windowed else None
        self._local_ids = frozenset(s.id for s in self.local)
        # (signature, kernel term) -> the raw matches on it (None: one could not be built)
        self._raw: dict[tuple, tuple[RawMatch, ...] | None] = {}
        engine = engine_for(self.rest) if self.rest else None
        windowed = tuple(s for s in self.rest if window_reason(s, engine) is None)
        # the rest strategies whose matches are kept per window (egraph/windows.py)
        self._windows = WindowMatches(windowed) if windowed else None
        self._whole = tuple(s for s in self.rest if s not in windowed)
        self._next: dict[LoopNest, tuple[LoopNest, ...]] = {}
        self._inner: dict[LoopNest, frozenset] = {}   # kernel -> the nest terms it holds
        self._decoder = Decoder()

    def applies(self, program: Program) -> bool:
        """Whether ``successors`` gives exactly the local strategies' steps of ``program``:
        there are local strategies and no nest term occurs in two of its kernels."""
        return bool(self.local) and self._disjoint(program)

    def _disjoint(self, program: Program) -> bool:
        """Whether no nest term occurs in two kernels of ``program``."""
        seen: set = set()
        for kernel in program.leir.nests:
            inner = self._inner.get(kernel)
            if inner is None:
                inner = self._inner[kernel] = frozenset(nests_in(kernel))
            if not seen.isdisjoint(inner):
                return False
            seen |= inner
        return True

    def node_matches(self, program: Program) -> dict[str, list[RawMatch]] | None:
        """The raw matches of the node's strategies on ``program``, by strategy id, for
        ``all_steps(known=)``: the kernel-local ones' (``node_local``) the union of its
        kernels' matches, each kernel matched once per proposer (with the lookahead's, in the
        same batches), by kernel; the window-local ones' from their window keys
        (``WindowMatches.reused``, new windows matched as regions), by window; every other
        strategy's (and a window-local one's with too many new windows) from one engine run
        on the program, as ``all_steps`` would make it, the window-local ones' among them kept
        per window (``all_steps`` puts them all in rule order). None where the kernels'
        matches are not exactly what matching the program would give, or might not be: a nest
        term in two kernels, a match that could not be built, or two matches of one rule at
        one term with the same replacement (then the engine's order of the two would decide
        which one a step is); then ``all_steps`` matches every other strategy itself."""
        out = self._kernel_matches(program)
        windows = self._node_windows
        if out is None or windows is None:
            return out
        got = windows.reused(program)
        found, whole = got if got is not None else ([], windows.strategies)
        # the node's other strategies matched here, in one run (as ``all_steps`` would), the
        # window-local ones among them kept per window
        chosen = [s for s in self.node if s.id not in out
                  and (s not in windows.strategies or s in whole)]
        engine = engine_for(self.node)
        ran = engine.matches(program, chosen, named=False) if chosen else []
        windows.keep_whole(program, ran, whole)
        out.update((s.id, []) for s in self.node if s.id not in out)
        for m in found + engine.named(program, ran):
            out[m.strategy].append(m)
        return out

    def _kernel_matches(self, program: Program) -> dict[str, list[RawMatch]] | None:
        """``node_matches`` of the kernel-local strategies alone."""
        if not self.node_local or not program.leir.nests or not self._disjoint(program):
            return None
        nests = program.leir.nests
        terms = uncons(encode(program.leir), "PCons")
        todo = [n for n, t in dict(zip(nests, terms)).items()
                if (program.signature, t) not in self._raw]
        for batch in disjoint_batches(todo):
            self._match(program, batch, node=True)
        found: dict = {}
        for t in terms:
            raw = self._raw.get((program.signature, t))
            if raw is None:
                return None
            found.update(dict.fromkeys(raw))
        out: dict[str, list[RawMatch]] = {s.id: [] for s in self.node_local}
        wanted = [m for m in found if m.strategy in out]
        if len({(m.strategy, m.rule, m.lhs, m.rhs) for m in wanted}) < len(wanted):
            return None
        for m in wanted:
            out[m.strategy].append(m)
        return out

    def successors(self, program: Program) -> list[tuple[LoopNest, ...]]:
        """The nests of every program one step of a local strategy away from ``program``
        (one per kernel and distinct new kernel, in kernel order; ``applies`` must hold).
        Only kernels never seen before are matched."""
        nests = program.leir.nests
        todo = [n for n in dict.fromkeys(nests) if n not in self._next]
        for batch in disjoint_batches(todo):
            self._match(program, batch)
        return [nests[:i] + (new,) + nests[i + 1:]
                for i, nest in enumerate(nests) for new in self._next[nest]]

    def prefetch(self, programs: list[Program]) -> None:
        """Match what ``successors`` and ``rest_successors`` will need for ``programs`` (a
        node's lookahead programs, for which ``applies`` holds) together rather than program
        by program. The kernels never seen before are matched in batches of kernels that
        share no nest term (the programs hold one new kernel each: one engine run per batch,
        not per program); the kernels of programs with another signature than the first are
        left to ``successors``. The windows of the window-local rest strategies are prefetched
        the same way (``WindowMatches.prefetch``)."""
        if not programs:
            return
        if self.local:
            first = programs[0]
            todo = [n for p in programs if p.signature == first.signature
                    for n in p.leir.nests if n not in self._next]
            for batch in disjoint_batches(list(dict.fromkeys(todo))):
                self._match(first, batch)
        if self._windows is not None:
            self._windows.prefetch(programs)

    def rest_successors(self, program: Program) -> list[tuple[LoopNest, ...]]:
        """The nests of every program one step of a ``rest`` strategy away from ``program``,
        for a caller that only costs them, without printing or building a ``Program``. The
        strategies that rewrite a window of adjacent nests (``egraph.windows``: the lookahead's
        operator_fusion, compute_inline and register_tiling) reuse the matches of every window
        whose key an earlier program had; the others match the whole program and each match
        is put in place at every occurrence of its term, decoded nest by nest (nests shared
        with other programs are the same objects). Duplicates and steps that change nothing
        are kept: neither changes the least cost of the steps, which is at most the
        program's own."""
        out = []
        if self._windows is not None:
            nests = program.leir.nests
            out += [nests[:j] + new + nests[j + width:]
                    for j, width, new in self._windows.edits(program)]
        if not self._whole:
            return out
        term = encode(program.leir)
        index = OccurrenceIndex(term)
        for m in engine_for(self._whole).matches(program, list(self._whole)):
            if m.rhs is None or m.rhs == m.lhs:
                continue
            for path in index.paths(m.lhs):
                new = uncons(replace_at(term, path, m.rhs), "PCons")
                out.append(tuple(self._decoder(n) for n in new))
        return out

    def _match(self, program: Program, batch: list[LoopNest], node: bool = False) -> None:
        """Match the kernels of ``batch`` (no nest term in two of them) in one engine run, as
        one program with ``program``'s signature, and keep each one's distinct successors
        (``local`` strategies only); with ``node``, match the node's local strategies too and
        keep each kernel's raw matches (those whose matched term it holds). A kernel of the
        lookahead's programs is matched with the ``local`` strategies only: most of those
        programs are never ranked as nodes, and the node's own strategies cost twice as much
        per kernel again."""
        together = program.with_leir(Leir(tuple(batch)))
        term = encode(together.leir)
        index = OccurrenceIndex(term)
        members = uncons(term, "PCons")
        found: list[dict] = [{} for _ in batch]
        raw: list[dict] = [{} for _ in batch]
        stuck = False
        chosen = self._matched if node else self.local
        for m in engine_for(chosen).matches(together, list(chosen)):
            if m.rhs is None:
                stuck = True
                continue
            if m.rhs == m.lhs:
                continue
            for path in index.paths(m.lhs):
                member, inner = member_of(path)
                raw[member].setdefault(m)
                if m.strategy not in self._local_ids:
                    continue
                new = replace_at(members[member], inner, m.rhs)
                if new != members[member]:
                    found[member].setdefault(new)
        for nest, member, news, own in zip(batch, members, found, raw):
            self._next[nest] = tuple(self._decoder(t) for t in news)
            if node:
                self._raw[program.signature, member] = None if stuck else tuple(own)
