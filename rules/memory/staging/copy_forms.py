"""Copy nests of layout_transformation in the other sound forms real LEIR data writes them.

``memory_staging`` gives the plain form: the copy nest runs over the loops the read uses, in
nest order and with their kinds, and stores each element at its re-laid-out subscripts. Two
more forms of the same copy are offered here (``CopyForm`` facts), each a bijection from the
copy loops onto the fresh tensor, so every slot is written exactly once:

* **bound**: the same copy with its first loop of extent <= 1024 bound to ``threadIdx.x``
  (renamed ``tx``), when none of its loops is bound yet. Sound because that loop is
  determined by the element it copies (every copy loop is, the read must determine its
  parallel loops and the layout is a bijection), so no two threads write one slot::

      B^{4}_{tx}L^{6}_{a}L^{5}_{c}[..C_{c,a}..]  reads C transposed through
      B^{6}_{tx=0}L^{5}_{c=0}[E_{tx,c}=C_{c,tx};]          (plain form: L^{6}_{a}L^{5}_{c})

* **split loop**: a read whose subscripts are distinct bare loop indices (or constants) has one
  of them, ``d`` of extent ``n = f0*f1``, split: the copy runs over the read's loops in
  subscript order with ``d``'s loop replaced by a new outer loop ``h`` (extent ``f0``, kind L)
  around ``d`` (extent ``f1``, its kind kept), writes ``E_{..,h,d,..} = X_{..,h*f1+d,..}``, and
  the nest reads ``E_{..,d//f1,d%f1,..}``; then bound as above when no loop of it is bound::

      B^{16}_{tx}L^{16}_{a}[..A_{tx,a}..]  ->  B^{16}_{tx=0}L^{2}_{h=0}L^{8}_{a=0}
      [E_{tx,h,a}=A_{tx,h*8+a};]  and the nest reads  E_{tx,a//8,a%8}

The new tensor's shape is the copy loops' box, so it holds exactly the region the nest reads.

precompute_indices' index table has the same bound form (``BoundIndexTable`` facts): the
table nest over the loops the index uses, its first loop bound to ``tx``, the index expression
renamed with it. Every slot of the table is its own loop point, so threads never share one::

    B^{8}_{tx}L^{8}_{a}L^{1}_{c}[..A_{tx,a*1+c}..]  ->  B^{8}_{tx=0}L^{1}_{c=0}[K_{tx,c}=tx*1+c;]
                                                        (plain form: L^{8}_{a=0}L^{1}_{c=0})
"""

from __future__ import annotations

from typing import Iterable

from leir_egraph.leir.ast import IBin, IConst, IName, Loop, Var
from leir_egraph.leir.hardware import AXIS_LIMITS
from leir_egraph.leir.legality import determined_loops
from leir_egraph.leir.memory import layouts, loops_used, parallel_loops_determined
from leir_egraph.leir.traverse import walk
from leir_egraph.leir.names import index_name_supply
from leir_egraph.egraph.vocabulary import Fact, LoadedProgram, ParameterSet, Relation
from .regions import _stageable_read, _view, compound_indices

#: threadIdx.x's limit; the copy binds a loop only strictly below it, as the reference does.
BIND_LIMIT = AXIS_LIMITS["tx"]


def _rename(sub, old: str, new: str):
    if isinstance(sub, IName):
        return IName(new) if sub.name == old else sub
    if isinstance(sub, IBin):
        return IBin(sub.op, _rename(sub.lhs, old, new), _rename(sub.rhs, old, new))
    return sub


def bind_first(loops: tuple[Loop, ...], *subs_lists, allowed=None):
    """``loops`` with the first loop of extent < 1024 made ``B`` and renamed ``tx`` (in the
    subscript lists too); ``None`` if a loop is already bound, ``tx`` is taken, or no loop fits.
    ``allowed``: the loops that may be bound (those the copied element determines), if not all.

    ``bind_first((L 6 a, L 5 c), (c, a))`` -> ``((B 6 tx, L 5 c), ((c, tx),))``
    """
    if any(l.kind == "B" or l.index == "tx" for l in loops):
        return None
    pick = next((k for k, l in enumerate(loops) if l.extent < BIND_LIMIT
                 and (allowed is None or l.index in allowed)), None)
    if pick is None:
        return None
    old = loops[pick].index
    new_loops = tuple(Loop("B", l.extent, "tx") if k == pick else l for k, l in enumerate(loops))
    return new_loops, tuple(tuple(_rename(s, old, "tx") for s in subs) for subs in subs_lists)


def _fixed(loops, subs) -> set[str]:
    """The loops whose index the element ``subs`` determines."""
    return set(determined_loops(Var("_", "f32", "g", tuple(subs)), loops))


def _parallel_fixed(loops, subs) -> bool:
    """Every P/V/B loop is determined by the element: no two of its iterations write one slot.
    (A serial loop may revisit a slot -- a window ``c*2+d*3`` -- storing the same element.)"""
    return parallel_loops_determined(Var("_", "f32", "g", tuple(subs)), loops)


def _names_in(sub) -> list[str]:
    """The loop indices of a subscript in order of appearance: ``c*2+d*3`` -> ``[c, d]``."""
    return list(dict.fromkeys(n.name for n in walk(sub) if isinstance(n, IName)))


def split_forms(x: Var, loops: tuple[Loop, ...]):
    """``(label, copy loops, copy write subs, copy read subs, nest read subs)`` of every
    split-loop copy of ``x`` (module docstring), bound where possible. A compound subscript (a
    convolution window ``c*2+d*3``) is carried into the copy as it is, over its loops in order
    of appearance: the copy then writes a slot once per window position that reaches it, the
    same element each time."""
    by_index = {l.index: l for l in loops}
    groups = [_names_in(s) for s in x.subscripts]
    flat = [n for g in groups for n in g]
    if (len(set(flat)) != len(flat) or any(n not in by_index for n in flat)
            or not any(isinstance(s, IName) for s in x.subscripts)):
        return
    taken = set(by_index)
    outer = next(n for n in index_name_supply() if n not in taken and n != "tx")
    for dim, sub in enumerate(x.subscripts):
        if not isinstance(sub, IName):
            continue
        loop = by_index[sub.name]
        n = loop.extent
        for f1 in range(2, n):
            if n % f1:
                continue
            f0 = n // f1
            copy_loops: list[Loop] = []
            for s, names in zip(x.subscripts, groups):
                if s is sub:
                    copy_loops += [Loop("L", f0, outer), Loop(loop.kind, f1, loop.index)]
                else:
                    copy_loops += [by_index[m] for m in names]
            write = x.subscripts[:dim] + (IName(outer), sub) + x.subscripts[dim + 1:]
            read = x.subscripts[:dim] + (
                IBin("+", IBin("*", IName(outer), IConst(f1)), sub),) + x.subscripts[dim + 1:]
            nest_read = x.subscripts[:dim] + (IBin("//", sub, IConst(f1)),
                                              IBin("%", sub, IConst(f1))) + x.subscripts[dim + 1:]
            label = f"loop {sub.name} split into {f0}x{f1} in the copy"
            copy_loops = tuple(copy_loops)
            if not _parallel_fixed(copy_loops, write):
                continue
            bound = bind_first(copy_loops, write, read, allowed=_fixed(copy_loops, write))
            if bound is not None:
                copy_loops, (write, read) = bound
            yield label, copy_loops, write, read, nest_read


def bound_forms(x: Var, loops: tuple[Loop, ...], shape):
    """The plain copy of ``x`` for every layout, with its first loop bound (module docstring)."""
    used = loops_used(loops, x.subscripts)
    if not used or not _parallel_fixed(used, x.subscripts):
        return
    fixed = _fixed(used, x.subscripts)   # only a loop the element determines is bound
    for lay in layouts(shape, merged_ranks=(5,), permutations_up_to=5):
        new = lay.apply(x.subscripts)
        bound = bind_first(used, new, x.subscripts, allowed=fixed)
        if bound is None:
            continue
        copy_loops, (write, read) = bound
        yield f"{lay.label}, copied by threads", copy_loops, write, read, new


def _copy_form_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    view = _view(loaded.program)
    out: dict[Fact, None] = {}
    for n in view.nests:
        name = loaded.top_nest_term(n.position)
        for x in n.reads:
            shape = view.shapes.get(x.name)
            if shape is None or not _stageable_read(x, n.nest.loops, shape):
                continue
            for label, cl, w, r, new in [*bound_forms(x, n.nest.loops, shape),
                                         *split_forms(x, n.nest.loops)]:
                out[COPY_FORM(name, x, label, cl, w, r, new)] = None
    return list(out)


def _index_table_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    out: dict[Fact, None] = {}
    for name, nest, e in compound_indices(loaded):
        bound = bind_first(loops_used(nest.loops, (e,)), (e,))
        if bound is not None:
            loops, ((renamed,),) = bound
            out[BOUND_INDEX_TABLE(name, e, loops, renamed)] = None
    return list(out)


BOUND_INDEX_TABLE = Relation(
    "BoundIndexTable", ("Nest", "IExpr", "Loops", "IExpr"),
    "the index table of {1} read in {0} can be computed by threads: "
    "over {2}, its first loop bound as tx, storing {3}")
COPY_FORM = Relation(
    "CopyForm", ("Nest", "Var", "String", "Loops", "Subs", "Subs", "Subs"),
    "a copy of the read {1} of {0} ({2}) runs over {3}, writing the "
    "fresh tensor at {4} from the element at {5}, and {0} then reads the "
    "copy at {6}: every slot is written once, from the element read "
    "there")

PARAMETER_SETS = (
    ParameterSet((BOUND_INDEX_TABLE,),
                 _index_table_facts),
    ParameterSet((COPY_FORM,),
                 _copy_form_facts),
)
