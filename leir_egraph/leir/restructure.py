"""When whole equations may move between loop nests: fission and inlining.

Pure, conservative analyses ("True" is a proof for every input) used by the graph-level
strategies. Fusion and fission are the same equivalence read in two directions, so fission
asks :func:`~leir_egraph.leir.legality.fusible` of the two halves it would create.
"""

from __future__ import annotations

from dataclasses import dataclass

from .analysis import accesses, accumulation_op, equation_reads, equation_sites, writes
from .ast import Compare, Equation, Leir, LoopNest, Var
from .legality import determined_loops, fusible
from .subexpressions import KERNEL_SCOPES, flat, tensors_read
from .traverse import walk


def implicit_initialisations(leir: Leir, inputs) -> frozenset[tuple[int, tuple[int, ...]]]:
    """``(top-level nest, item path)`` of every accumulation that starts from its identity
    (docs/LEIR.md section 3): ``X=X op e`` whose target no textually earlier equation wrote and
    which is not an input."""
    written: set[str] = set()
    out = set()
    for site in equation_sites(leir):
        name = site.equation.target.name
        if accumulation_op(site.equation) is not None and name not in written and name not in inputs:
            out.add((site.nest, site.path))
        written.add(name)
    return frozenset(out)


# ---------------------------------------------------------------- fission

@dataclass(frozen=True)
class FissionPoint:
    """A nest's body cut after ``k`` items into ``head`` and ``tail`` (both with the nest's loops)."""
    k: int
    head: LoopNest
    tail: LoopNest


def fission_points(nest: LoopNest) -> list[FissionPoint]:
    """Every cut of the body into two non-empty parts."""
    return [FissionPoint(k, LoopNest(nest.loops, nest.body[:k]), LoopNest(nest.loops, nest.body[k:]))
            for k in range(1, len(nest.body))]


def fissionable(point: FissionPoint) -> bool:
    """May the head run to completion before the tail starts?

    That is the fusion question asked backwards: running ``head`` then ``tail`` equals running
    them in one nest exactly when the tail could be fused into the head
    (:func:`~leir_egraph.leir.legality.fusible`). In addition no kernel-local (scope s/l) tensor
    may be touched by both halves: on CUDA each half becomes its own kernel."""
    if not fusible(point.head, point.tail):
        return False
    local = lambda n: {v.name for v in accesses(n) if v.scope in KERNEL_SCOPES}
    return not (local(point.head) & local(point.tail))


# ---------------------------------------------------------------- inlining

def loops_within(producer: LoopNest, consumer: LoopNest) -> bool:
    """Is every loop of ``producer`` a loop of ``consumer`` (same index, same extent)?"""
    mine = {(l.index, l.extent) for l in consumer.loops}
    return all((l.index, l.extent) in mine for l in producer.loops)


def writes_each_once(x: Var, loops) -> bool:
    """Does the write ``x`` over ``loops`` address a different element at every iteration?
    True when its subscripts are affine in the loop indices (no gather) and fix every loop of
    more than one iteration (``legality.determined_loops``: ``X_{tx,a*4+c}`` over ``a < 8,
    c < 4``; a scalar ``S`` in ``B^{1}_{tx=0}``).

        writes_each_once(X_{tx,a}, B^{4}_{tx} L^{8}_{a})  -> True
        writes_each_once(X_{tx},   B^{4}_{tx} L^{8}_{a})  -> False   (8 writes per element)
    """
    if any(isinstance(v, Var) for s in x.subscripts for v in walk(s)):
        return False
    fixed = determined_loops(x, tuple(loops))
    return all(l.index in fixed or l.extent == 1 for l in loops)


def _comparisons_with(expr, name: str):
    for node in walk(expr):
        if isinstance(node, Compare) and any(isinstance(v, Var) and v.name == name
                                             for o in node.operands for v in walk(o)):
            yield node


def inlinable(producer: LoopNest, consumer: LoopNest) -> bool:
    """May the consumer read the producer's right-hand side instead of its result?

    The producer is one equation ``X_{..}=e`` writing each element exactly once
    (``writes_each_once``: its loop indices, or affine forms of them such as ``a*4+c`` that
    determine every loop of more than one iteration), not an accumulation, and ``e``
    does not read X. The consumer reads X only at that very element ``X_{i,j,..}`` (never in a
    gather), writes neither X nor anything ``e`` reads, and evaluates X in X's own dtype: its
    equations reading X have X's dtype (not bool, where arithmetic is done in int32), and a
    comparison around X reads only tensors of that dtype, with ``e`` reading at least one, so it
    is still evaluated in that dtype."""
    if len(producer.body) != 1 or not isinstance(producer.body[0], Equation) or not flat(consumer):
        return False
    eq = producer.body[0]
    x, e = eq.target, eq.value
    if accumulation_op(eq) is not None or x.dtype == "bool" or x.name in tensors_read(e):
        return False
    if not writes_each_once(x, producer.loops):
        return False
    if x.name in writes(consumer) or tensors_read(e) & writes(consumer):
        return False
    e_dtypes = {v.dtype for v in walk(e) if isinstance(v, Var)}
    for item in consumer.body:
        reads_x = [v for v in equation_reads(item) if v.name == x.name]
        if not reads_x:
            continue
        if any(v != x for v in reads_x) or item.target.dtype != x.dtype:
            return False
        # X inside a subscript (a gather) has no value form to substitute
        for sub in item.target.subscripts:
            if x.name in {v.name for v in walk(sub) if isinstance(v, Var)}:
                return False
        for v in accesses(item.value):
            if any(x.name in {w.name for w in walk(s) if isinstance(w, Var)} for s in v.subscripts):
                return False
        for cmp in _comparisons_with(item.value, x.name):
            others = {v.dtype for o in cmp.operands for v in walk(o)
                      if isinstance(v, Var) and v.name != x.name}
            if not e_dtypes or (e_dtypes | others) != {x.dtype}:
                return False
    return True
