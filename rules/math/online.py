"""Fact provider of the online-softmax family, named by rules/math/normal_loop_max_to_prefix_max.toml,
normal_loop_summation_on_exp_to_prefix_summation_on_exp.toml, online_softmax.toml,
flashattention_wo_tiling.toml and normal_matmul_to_prefix_matmul_based_on_online_softmax.toml.

The rules match the *shape* of the computation with egglog patterns (online.egg, beside this
file, also named by those rule files); these facts supply the context a pattern cannot see:

* ``ScanAxis`` / ``ScanNest`` / ``ScanGap`` (reduction_axis): the one loop a single-equation
  reduction runs over, which becomes the scan position of a prefix tensor; an online pass that
  scans along one loop; and where the scan position goes among the reduced subscripts to
  follow the nest's loop order;
* ``ReadOnlyAfter`` / ``UnreadAfter`` (dependency): which reads of a tensor the rest of the
  program makes (that a reduction starts from its identity is the shared ``FirstWriteIn``);
* ``MatmulLoops`` (loop_nest_consistency): the index correspondence between a softmax nest
  and the matmul with the values that follows it;
* ``OnlineFreshIndex`` (parameter): an index name free in two nests, for the value loop that
  flash attention nests inside the softmax loops.
"""

from __future__ import annotations

from typing import Iterable

from leir_egraph.egraph.encoding import encode, to_egglog
from leir_egraph.egraph.vocabulary import (Fact, GuardExtension, LoadedProgram, ParameterSet,
                                           Relation)
from leir_egraph.leir.analysis import (accesses, accumulated_operand, accumulation_op,
                                       equation_reads, index_names as used_indices,
                                       picked_indices, single_equation)
from leir_egraph.leir.ast import Bin, Call, Equation, IBin, IConst, IfThenElse, IName, LoopNest, Var
from leir_egraph.leir.names import fresh, index_name_supply

SERIAL_KINDS = ("L", "U")  # a scan reads what the previous iteration wrote: no P/V/B loop



def scan_axis(nest: LoopNest) -> tuple[Var, str, int] | None:
    """``(target, r, R)`` when the nest is one accumulation ``T_s = op(T_s, e)`` whose written
    element is picked by every loop but one serial loop ``r`` (extent ``R``).

    The target's subscripts must each be a distinct loop index or the constant 0, so the
    reduction writes a full box of elements and a prefix tensor ``T'_{s,r}`` covers exactly the
    elements of ``T`` times the scan positions; ``e`` must not read ``T`` (the partial values are
    only the accumulator's).

    ``B^{4}_{tx=0}L^{8}_{a=0}[D_{tx}=max(D_{tx},A_{tx,a});]`` -> ``(D_{tx}, 'a', 8)``.
    """
    eq = single_equation(nest)
    if eq is None:
        return None
    operand = accumulated_operand(eq)
    if operand is None or any(v.name == eq.target.name for v in accesses(operand)):
        return None
    if any(v.name == eq.target.name for s in eq.target.subscripts for v in accesses(s)):
        return None
    picked = picked_indices(eq.target.subscripts, [l.index for l in nest.loops])
    if picked is None:
        return None
    free = [l for l in nest.loops if l.index not in picked]
    if len(free) != 1 or free[0].kind not in SERIAL_KINDS:
        return None
    return eq.target, free[0].index, free[0].extent


def scan_gap(nest: LoopNest, target: Var, r: str) -> tuple[tuple, tuple]:
    """``(pre, post)``: the target's subscripts split where the scan position ``r`` goes in
    loop order -- after the leading subscripts that are indices of loops outside ``r``.

    ``B^{16}_{tx=0}L^{16}_{a=0}L^{16}_{c=0}[D_{tx,c}=max(D_{tx,c},A_{tx,a,c});]`` with ``r='a'``
    -> ``((tx,), (c,))``: the prefix tensor is ``E_{tx,a,c}``, its subscripts in the nest's loop
    order, where the reference writes it (the appended position gives ``E_{tx,c,a}``)."""
    order = [l.index for l in nest.loops]
    outer = set(order[:order.index(r)])
    k = 0
    for sub in target.subscripts:
        if not (isinstance(sub, IName) and sub.name in outer):
            break
        k += 1
    return target.subscripts[:k], target.subscripts[k:]


def scan_nest(nest: LoopNest) -> tuple[str, int] | None:
    """``(r, R)`` when the nest is an online max/sum pass: two equations, each writing one
    element per iteration (distinct loop indices or 0 for every loop but one serial loop ``r``,
    then ``r`` itself as the last subscript), reading what the nest writes only at the written
    position or the previous one (``r-1``), and the first a max whose scanned operand reads
    nothing the nest writes.

    ``B^{4}_{tx=0}L^{8}_{a=0}[F_{tx,a}=max(if_then_else(a-1<0,-inf,F_{tx,a-1}),A_{tx,a});G_{tx,a}=...;]``
    -> ``('a', 8)``.
    """
    if len(nest.body) != 2 or not all(isinstance(i, Equation) for i in nest.body):
        return None
    targets = [eq.target for eq in nest.body]
    last = targets[0].subscripts[-1:] if targets[0].subscripts else ()
    if not last or not isinstance(last[0], IName):
        return None
    r = last[0].name
    loops = {l.index: l for l in nest.loops}
    if r not in loops or loops[r].kind not in SERIAL_KINDS:
        return None
    previous = IBin("-", IName(r), IConst(1))
    allowed: dict[str, set] = {}
    for t in targets:
        if not t.subscripts or t.subscripts[-1] != IName(r):
            return None
        rest = t.subscripts[:-1]
        picked = picked_indices(rest, loops)
        if picked is None or set(picked) | {r} != set(loops) or r in picked:
            return None
        allowed.setdefault(t.name, set()).update({t.subscripts, rest + (previous,)})
    if len(allowed) != 2:
        return None
    for eq in nest.body:
        for var in equation_reads(eq):
            if var.name in allowed and var.subscripts not in allowed[var.name]:
                return None
    first = nest.body[0].value
    if not (isinstance(first, Call) and first.fn == "max"):
        return None
    scanned = [a for a in first.args
               if not (isinstance(a, IfThenElse) and isinstance(a.otherwise, Var)
                       and a.otherwise.name == targets[0].name)]
    if len(scanned) != 1 or any(v.name in allowed for v in accesses(scanned[0])):
        return None
    return r, loops[r].extent


def _reduction_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    for k in loaded.top_level:
        nest = loaded.nests[k]
        found = scan_axis(nest)
        if found is not None:
            target, r, extent = found
            yield SCAN_AXIS(loaded.nest_terms[k], target, r, extent)
            pre, post = scan_gap(nest, target, r)
            yield SCAN_GAP(loaded.nest_terms[k], r, pre, post)
        scan = scan_nest(nest)
        if scan is not None:
            yield SCAN_NEST(loaded.nest_terms[k], scan[0], scan[1])


def _dependency_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    """Facts per top-level nest position; a nest term that occurs at several positions gets a
    fact only where it holds at every one of them (facts are keyed by the nest term)."""
    nests = loaded.program.leir.nests
    # per position: (relation, tensor, the read's term) -- the nest column is added at the end
    per_position: list[set[tuple]] = [set() for _ in nests]
    # Only tensors the nest itself accesses: the rules ask about what follows the nest that
    # reads or writes them, and every fact is a command egglog has to load.
    reads: dict[str, set[Var]] = {}
    writes: set[str] = set()
    for i in reversed(range(len(nests))):
        for name in sorted({v.name for v in accesses(nests[i])}):
            read = reads.get(name, set())
            if not read:
                per_position[i].add((UNREAD_AFTER, name))
            elif name not in writes and len(read) == 1:
                (var,) = read
                per_position[i].add((READ_ONLY_AFTER, name, encode(var)))
        for eq in _equations(nests[i]):
            writes.add(eq.target.name)
            for var in equation_reads(eq):
                reads.setdefault(var.name, set()).add(_plain(var))
    positions: dict[LoopNest, list[int]] = {}
    for i, nest in enumerate(nests):
        positions.setdefault(nest, []).append(i)
    for nest, where in positions.items():
        common = set.intersection(*(per_position[i] for i in where))
        term = loaded.top_nest_term(where[0])
        for relation, *columns in sorted(common, key=lambda c: (c[0].name, c[1],
                                                                *map(to_egglog, c[2:]))):
            yield relation(*columns, term)


def _plain(var: Var) -> Var:
    return Var(var.name, var.dtype, var.scope, var.subscripts)


def _equations(nest: LoopNest) -> Iterable[Equation]:
    for item in nest.body:
        if isinstance(item, Equation):
            yield item
        else:
            yield from _equations(item)


def matmul_loops(softmax: LoopNest, matmul: LoopNest, r: str):
    """``(v, f, dval)`` when ``matmul`` is ``O_o = O_o + Y_{u[r->f]} * v`` (or ``v * Y``) for the
    tensor ``Y_u`` that ``softmax`` writes, with ``f`` its only reduction loop, ``dval`` one more
    loop (the value position), and every other loop of ``matmul`` a loop of ``softmax`` with the
    same index and extent -- so iteration ``(ctx, f)`` of the matmul reads the element the softmax
    wrote at iteration ``(ctx, r=f)`` -- and ``v`` reading neither ``Y`` nor ``O``.

    ``B^{4}_{tx=0}L^{8}_{a=0}[Y_{tx,a}=...;]`` then
    ``B^{4}_{tx=0}L^{3}_{d=0}L^{8}_{f=0}[O_{tx,d}=O_{tx,d}+Y_{tx,f}*V_{f,d};]`` -> ``(V_{f,d}, 'f', 'd')``.
    """
    y_eq, found = single_equation(softmax), scan_axis(matmul)
    if y_eq is None or found is None:
        return None
    target, f, extent = found
    loops = {l.index: l for l in softmax.loops}
    if r not in loops or loops[r].extent != extent:
        return None
    u = y_eq.target.subscripts
    if (len(u) != len(loops) or not all(isinstance(s, IName) for s in u)
            or {s.name for s in u} != set(loops)):
        return None
    expected = Var(y_eq.target.name, y_eq.target.dtype, y_eq.target.scope,
                   tuple(IName(f) if s.name == r else s for s in u))
    operand = accumulated_operand(single_equation(matmul))
    if accumulation_op(single_equation(matmul)) != "+" or not isinstance(operand, Bin) \
            or operand.op != "*":
        return None
    sides = [(operand.lhs, operand.rhs), (operand.rhs, operand.lhs)]
    value = next((v for y, v in sides if isinstance(y, Var) and _plain(y) == expected), None)
    if value is None or any(a.name in (y_eq.target.name, target.name) for a in accesses(value)):
        return None
    shared = [l for l in softmax.loops if l.index != r]
    others = [l for l in matmul.loops if l.index != f]
    mine = {l.index: l.extent for l in others}
    if any(mine.get(l.index) != l.extent for l in shared) or len(others) != len(shared) + 1:
        return None
    (dval,) = [l.index for l in others if l.index not in {s.index for s in shared}]
    return value, f, dval


def _consistency_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    top = loaded.top_level
    for a, b in zip(top, top[1:]):
        softmax, matmul = loaded.nests[a], loaded.nests[b]
        for loop in softmax.loops:
            found = matmul_loops(softmax, matmul, loop.index)
            if found is not None:
                value, f, dval = found
                yield MATMUL_LOOPS(loaded.nest_terms[a], loaded.nest_terms[b], value, loop.index,
                                   f, dval)


def _fresh_index_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    top = loaded.top_level
    for a, b in zip(top, top[1:]):
        used = set(used_indices(loaded.nests[a])) | set(used_indices(loaded.nests[b]))
        used |= {l.index for n in (loaded.nests[a], loaded.nests[b]) for l in _all_loops(n)}
        (name,) = fresh(used, index_name_supply(), 1)
        yield ONLINE_FRESH_INDEX(loaded.nest_terms[a], loaded.nest_terms[b], name)


def _all_loops(nest: LoopNest):
    yield from nest.loops
    for item in nest.body:
        if isinstance(item, LoopNest):
            yield from _all_loops(item)


SCAN_AXIS = Relation(
    "ScanAxis", ("Nest", "Var", "String", "i64"),
    "{2} is the only reduction axis of {0}, a serial loop of extent {3}, "
    "and every other loop picks its own element of {1}")
SCAN_GAP = Relation(
    "ScanGap", ("Nest", "String", "Subs", "Subs"),
    "in the loop order of {0}, the scan position {1} falls between the "
    "reduced subscripts {2} and {3}")
SCAN_NEST = Relation(
    "ScanNest", ("Nest", "String", "i64"),
    "{0} scans along its serial loop {1} of extent {2}: each iteration "
    "writes its own element of each tensor, at position {1}, and reads "
    "them only at its own or the previous position")
READ_ONLY_AFTER = Relation(
    "ReadOnlyAfter", ("String", "Var", "Nest"),
    "no nest after {2} writes {0}, and every later read of {0} is {1}")
UNREAD_AFTER = Relation("UnreadAfter", ("String", "Nest"), "no nest after {1} reads {0}")
MATMUL_LOOPS = Relation(
    "MatmulLoops", ("Nest", "Nest", "Expr", "String", "String", "String"),
    "the matmul {1} runs the loops of {0} with its reduction loop {4} in "
    "the place of {3}, plus the value loop {5}, so it reads each element "
    "{0} writes in the iteration that wrote it and multiplies it by {2}")

GUARD_EXTENSIONS = (
    GuardExtension(
        "reduction_axis",
        relations=(SCAN_AXIS,
                   SCAN_GAP,
                   SCAN_NEST),
        facts=_reduction_facts),
    GuardExtension(
        "dependency",
        relations=(
            READ_ONLY_AFTER,
            UNREAD_AFTER,
        ),
        facts=_dependency_facts),
    GuardExtension(
        "loop_nest_consistency",
        relations=(MATMUL_LOOPS,),
        facts=_consistency_facts),
)

ONLINE_FRESH_INDEX = Relation(
    "OnlineFreshIndex", ("Nest", "Nest", "String"),
    "{2} is an index name unused in {0} and {1}")

PARAMETER_SETS = (
    ParameterSet((ONLINE_FRESH_INDEX,),
                 _fresh_index_facts),
)
