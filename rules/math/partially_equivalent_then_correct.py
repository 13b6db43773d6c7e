"""Fact provider of partially_equivalent_then_correct (rules/math/partially_equivalent_then_correct.toml;
its egglog helpers are in partially_equivalent_then_correct.egg beside it).

Two padded stencils of the same operation on two inputs (pad A into H, compute D from H; pad C
into I, compute E from I, with the same loops and weights) are computed as one: the inputs are
concatenated along a padded axis and padded once, one stencil runs over the concatenation, and
its output is split into D and E. That is equivalent except at the seam, where a window that
should see the zeros of H's right padding (or of I's left padding) sees the other input's data
instead; the rule recomputes exactly those output rows from H and I. These facts supply what the
rule's pattern cannot compute: which rows the seam spoils (dependency), how the stencil's loops
split into output and reduction loops (reduction_axis), and that the two stencils are the same
computation on different tensors (operation_identity).
"""

from __future__ import annotations

from functools import lru_cache
from itertools import combinations
from typing import Iterable

from leir_egraph.egraph.vocabulary import Fact, GuardExtension, LoadedProgram, Relation
from leir_egraph.leir.analysis import (accesses, accumulated_operand, accumulation_op, affine,
                                       inputs_and_writes, picked_indices, refine,
                                       single_equation)
from leir_egraph.leir.ast import (Compare, Equation, Idx, IfThenElse, IName, Logic,
                                  LoopNest, Neg, Num, Var)
from leir_egraph.leir.traverse import rebuild, walk


def _conjuncts(cond) -> list | None:
    """The comparisons of an ``&`` of comparisons, or ``None`` for anything else."""
    if isinstance(cond, Logic):
        if cond.op != "&":
            return None
        left, right = _conjuncts(cond.lhs), _conjuncts(cond.rhs)
        return None if left is None or right is None else left + right
    if isinstance(cond, Compare) and all(op in ("<", "<=", ">", ">=") for op in cond.ops):
        return [cond]
    return None


def _only_indices(expr) -> set[str] | None:
    """Index names of a value expression made of indices and integer literals only."""
    names = set()
    for node in walk(expr):
        if isinstance(node, Idx):
            names.add(node.name)
        elif isinstance(node, Var) or (isinstance(node, Num) and not node.is_integer_literal):
            return None
    return names


def pad_axes(pad: LoopNest) -> list[tuple[str, int, int, int]]:
    """``(x, lo, hi, extent)`` for each axis ``x`` along which ``pad`` is a constant padding
    ``H_{..x..} = if_then_else(cond, A_{..x-lo..}, z)``: ``H`` written at every loop index once,
    ``cond`` an ``&`` of comparisons each on one index, true along ``x`` exactly on
    ``lo <= x < hi``, ``A`` read with ``x - lo`` in one subscript and ``x`` nowhere else, ``z``
    a literal."""
    eq = single_equation(pad)
    if eq is None or not isinstance(eq.value, IfThenElse):
        return []
    value, loops = eq.value, {l.index: l for l in pad.loops}
    subs = eq.target.subscripts
    if (not all(isinstance(s, IName) for s in subs)
            or sorted(s.name for s in subs) != sorted(loops) or len(subs) != len(loops)):
        return []
    source, z = value.then, value.otherwise
    conjuncts = _conjuncts(value.cond)
    literal = z.operand if isinstance(z, Neg) else z
    if not isinstance(source, Var) or conjuncts is None or not isinstance(literal, Num):
        return []
    if any(isinstance(v, Var) for s in source.subscripts for v in walk(s)):
        return []
    out = []
    for x, loop in loops.items():
        mine = []
        for c in conjuncts:
            names = _only_indices(c)
            if names is None or len(names) != 1:
                return []
            if names == {x}:
                mine.append(c)
        if not mine:
            continue
        env = {x: (0, loop.extent - 1)}
        for c in mine:
            env = refine(env, c, True)
            if env is None:
                break
        if env is None:
            continue
        lo, hi = env[x][0], env[x][1] + 1
        positions = [k for k, s in enumerate(source.subscripts) if x in subscript_indices_of(s)]
        if any(isinstance(n, Idx) and n.name == x for n in walk(z)):
            continue
        if len(positions) != 1 or affine(source.subscripts[positions[0]]) != ({x: 1}, -lo):
            continue
        out.append((x, lo, hi, loop.extent))
    return out


def subscript_indices_of(sub) -> set[str]:
    return {n.name for n in walk(sub) if isinstance(n, IName)}


def stencil_shape(nest: LoopNest) -> tuple[list[str], Var] | None:
    """``(picked, D)`` when the nest is one sum ``D_o = D_o + e`` over at least one reduction
    loop, ``o`` made of distinct loop indices (``picked``, the output loops) or 0, and ``e`` not
    reading ``D``."""
    eq = single_equation(nest)
    if eq is None or accumulation_op(eq) != "+" or accumulated_operand(eq) is None:
        return None
    indices = [l.index for l in nest.loops]
    picked = picked_indices(eq.target.subscripts, indices)
    if picked is None or len(picked) == len(indices):
        return None
    if any(v.name == eq.target.name for v in accesses(accumulated_operand(eq))):
        return None
    return picked, eq.target


def stencil_loops(nest: LoopNest) -> int | None:
    """The number ``k`` of output loops when they come first, before the reduction loops."""
    shape = stencil_shape(nest)
    if shape is None:
        return None
    k = len(shape[0])
    return k if sorted(shape[0]) == sorted(l.index for l in nest.loops[:k]) else None


def seam_rows(pad: LoopNest, stencil: LoopNest):
    """For every padded axis ``x`` of ``pad`` that the stencil slides along with an output loop
    ``c`` (it reads ``H`` at ``c + g`` there, ``g`` in reduction loops only, and ``c`` nowhere
    else but in its output subscript): ``(x, nA, c, dlo, dhi, elo, ehi)``.

    Concatenating the two padded inputs' data (length ``nA = hi - lo`` each) and padding once
    makes ``K`` equal to ``H`` except on ``[hi, min(extent, hi + nA))``, where the second
    input's data replaces ``H``'s right padding, and ``K`` shifted by ``nA`` equal to ``I``
    except on ``[max(0, lo - nA), lo)``, where the first input's data replaces ``I``'s left
    padding. Output rows ``[dlo, dhi)`` of the first stencil and ``[elo, ehi)`` of the second
    read those positions (empty when ``lo >= hi``).
    """
    shape, stencil_eq = stencil_shape(stencil), single_equation(stencil)
    pad_eq = single_equation(pad)
    if shape is None or pad_eq is None:
        return []
    h = pad_eq.target.name
    out_loops = {l.index: l for l in stencil.loops if l.index in shape[0]}
    red_loops = {l.index: l for l in stencil.loops if l.index not in shape[0]}
    operand = accumulated_operand(stencil_eq)
    reads = [v for v in accesses(operand) if v.name == h]
    if len(reads) != 1:
        return []
    (read,) = reads
    found = []
    for x, lo, hi, extent in pad_axes(pad):
        p = [s.name for s in pad_eq.target.subscripts].index(x)
        form = affine(read.subscripts[p]) if p < len(read.subscripts) else None
        if form is None:
            continue
        coef, const = form
        outs = [n for n in coef if n in out_loops]
        if len(outs) != 1 or coef[outs[0]] != 1 or any(n not in red_loops for n in coef
                                                       if n != outs[0]):
            continue
        c = outs[0]
        gmin = gmax = const
        for n, a in coef.items():
            if n != c:
                top = a * (red_loops[n].extent - 1)
                gmin, gmax = gmin + min(0, top), gmax + max(0, top)
        if not _only_here(stencil_eq, c, read, p):
            continue
        n_out, n_a = out_loops[c].extent, hi - lo
        if n_out - 1 + gmax > extent - 1 or gmin < 0:
            continue
        bad_d = (hi, min(extent, hi + n_a))
        bad_e = (max(0, lo - n_a), min(lo, extent))
        rows = []
        for b0, b1 in (bad_d, bad_e):
            if b0 >= b1:
                rows.append((0, 0))
            else:
                rows.append((max(0, b0 - gmax), min(n_out, b1 - gmin)))
        found.append((x, n_a, c, *rows[0], *rows[1]))
    return found


def _only_here(eq: Equation, c: str, read: Var, p: int) -> bool:
    """``c`` occurs once in the target's subscripts, at position ``p`` of ``read``, and nowhere
    else (not as a value, not in another access)."""
    target = eq.target
    if sum(1 for s in target.subscripts if isinstance(s, IName) and s.name == c) != 1:
        return False
    if any(c in subscript_indices_of(s) for s in target.subscripts if not isinstance(s, IName)):
        return False
    for node in walk(accumulated_operand(eq)):
        if isinstance(node, Idx) and node.name == c:
            return False
        if isinstance(node, Var) and node != target and node is not read:
            if any(c in subscript_indices_of(s) for s in node.subscripts):
                return False
    return not any(c in subscript_indices_of(s) for q, s in enumerate(read.subscripts) if q != p)


def renamed(nest: LoopNest, names: dict[str, str]) -> LoopNest:
    def fn(node):
        if isinstance(node, Var) and node.name in names:
            return Var(names[node.name], node.dtype, node.scope, node.subscripts)
        return None
    return rebuild(nest, fn)


@lru_cache(maxsize=1 << 12)
def _unnamed(nest: LoopNest) -> LoopNest:
    """The nest with every tensor name erased (at every depth, gathers' too): equal for two
    nests one of which is the other renamed. Memoized on the nest (the entry holds it)."""
    def fn(node):
        if isinstance(node, Var):
            return Var("", node.dtype, node.scope, node.subscripts)
        return None
    return rebuild(nest, fn)


def twins(first: LoopNest, second: LoopNest) -> list[tuple[str, str]]:
    """``(H, I)`` when ``second`` is ``first`` with the tensor ``H`` it reads renamed ``I`` and
    its target renamed (both single-equation nests)."""
    return _twins(first, second, _equation_reads(first), _equation_reads(second))


def _equation_reads(nest: LoopNest) -> tuple[Equation, frozenset[str]] | None:
    """A single-equation nest's equation and the tensors it reads besides its target."""
    eq = single_equation(nest)
    if eq is None:
        return None
    return eq, frozenset(v.name for v in accesses(eq.value)) - {eq.target.name}


def _twins(first: LoopNest, second: LoopNest, a_reads, b_reads) -> list[tuple[str, str]]:
    """:func:`twins` with each nest's :func:`_equation_reads` given."""
    if a_reads is None or b_reads is None:
        return []
    (a, read_a), (b, read_b) = a_reads, b_reads
    if a.target.name == b.target.name or first.loops != second.loops:
        return []   # renaming tensors leaves the loops as they are
    if _unnamed(first) != _unnamed(second):
        return []   # ... and everything but the names
    out = []
    for h in sorted(read_a - read_b):
        for i in sorted(read_b - read_a):
            if renamed(first, {h: i, a.target.name: b.target.name}) == second:
                out.append((h, i))
    return out


def _identity_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    top = loaded.top_level
    nests = [loaded.nests[t] for t in top]
    reads = [_equation_reads(nest) for nest in nests]   # once per nest, not once per pair
    for p, q in combinations(range(len(top)), 2):
        for h, i in _twins(nests[p], nests[q], reads[p], reads[q]):
            yield RENAMED_TWIN(loaded.top_nest_term(p), loaded.top_nest_term(q), h, i)


def _seam_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    top = loaded.top_level
    writer = {}
    for p in range(len(top)):
        eq = single_equation(loaded.nests[top[p]])
        if eq is not None:
            writer.setdefault(eq.target.name, p)
    for q in range(len(top)):
        stencil = loaded.nests[top[q]]
        for v in {v.name for v in accesses(stencil)}:
            p = writer.get(v)
            if p is None or p >= q:
                continue
            for x, n_a, c, dlo, dhi, elo, ehi in seam_rows(loaded.nests[top[p]], stencil):
                yield SEAM_ROWS(loaded.top_nest_term(p), loaded.top_nest_term(q), x, n_a, c,
                                dlo, dhi, elo, ehi)


def _write_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    """``(NoWriteInto later earlier)``: the later nest writes nothing the earlier one reads
    without writing it itself (its inputs), so the earlier one may be redone after it."""
    top = loaded.top_level
    sets = [inputs_and_writes(loaded.nests[k]) for k in top]   # once per nest, not per pair
    for p, q in combinations(range(len(top)), 2):
        if not sets[q][1] & sets[p][0]:
            yield NO_WRITE_INTO(loaded.top_nest_term(q), loaded.top_nest_term(p))


def _stencil_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    for p in range(len(loaded.top_level)):
        nest = loaded.nests[loaded.top_level[p]]
        k = stencil_loops(nest)
        if k is not None:
            yield STENCIL_LOOPS(loaded.top_nest_term(p), nest.loops[:k], nest.loops[k:])


RENAMED_TWIN = Relation(
    "RenamedTwin", ("Nest", "Nest", "String", "String"),
    "{1} computes what {0} computes, on {3} instead of {2}")
SEAM_ROWS = Relation(
    "SeamRows", ("Nest", "Nest", "String", "i64", "String", "i64", "i64", "i64", "i64"),
    "the padding {0} puts its input's {3} values between zeros along "
    "{2}, and {1} slides along it with its output loop {4}: once two such "
    "inputs are concatenated and padded together, only output rows "
    "{5}..{6} of the first and {7}..{8} of the second read the seam")
NO_WRITE_INTO = Relation(
    "NoWriteInto", ("Nest", "Nest"),
    "{0} writes none of the inputs of {1}")
STENCIL_LOOPS = Relation(
    "StencilLoops", ("Nest", "Loops", "Loops"),
    "the loops of {0} are its output loops {1} followed by its reduction "
    "loops {2}")

GUARD_EXTENSIONS = (
    GuardExtension(
        "operation_identity",
        relations=(RENAMED_TWIN,),
        facts=_identity_facts),
    GuardExtension(
        "dependency",
        relations=(SEAM_ROWS,),
        facts=_seam_facts),
    GuardExtension(
        "dependency",
        relations=(NO_WRITE_INTO,),
        facts=_write_facts),
    GuardExtension(
        "reduction_axis",
        relations=(STENCIL_LOOPS,),
        facts=_stencil_facts),
)
