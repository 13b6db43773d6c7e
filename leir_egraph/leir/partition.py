"""Splitting and concatenating tensors along one loop axis: the plans behind
tensor_split_to_decouple_operators and tensor_concat_to_fuse_operators.

Both move a one-equation nest's work between "one computation over the whole axis" and "one
computation per part of the axis", copying inputs into parts (or parts into one joined tensor)
and outputs back. The plans only cover the shape where that is exact and simple to state:

* the axis index appears as itself, in exactly one dimension, in the output and in every
  input read that mentions it (``A_{tx,a}``, not ``A_{tx+a}``), and never as a value;
* the output subscript is distinct plain indices, so the parts write disjoint elements;
* the equation reads no gathers, and its own output only as its running accumulation;
* all copies run over the loops their subscripts use (kinds kept); a P/V/B loop of a copy must
  be fixed by the element it writes, so the copy's parallel claims stay true, and the copied
  read must be in range on all of them (a padded read is guarded in the original, not in a
  copy).

A split point ``v`` cuts an axis of extent ``n`` into ``v`` and ``n-v`` iterations; the split
points offered are the divisors ``v < n`` of ``n`` (both parts are then whole multiples of
``v``: halves, quarters, ... and a single first element), a bounded, deterministic family.
The plans below do not depend on the split point: the rules cut the loops and shift the
second part's subscripts for each point.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping, Sequence

from .analysis import accumulation_op, equation_reads, index_names
from .ast import Equation, Idx, IName, Loop, LoopNest, Var
from .legality import determined_loops
from .subexpressions import KERNEL_SCOPES, in_range_everywhere
from .traverse import rebuild, walk


def divisor_split_points(extent: int) -> list[int]:
    """Where an axis of this extent may be cut: every divisor ``v`` of it below it."""
    return [v for v in range(1, extent) if extent % v == 0]


# ---------------------------------------------------------------- small helpers

def _axis_dim(var: Var, axis: str) -> int | None:
    """The dimension holding the plain index ``axis`` when that is its only mention."""
    dims = [d for d, s in enumerate(var.subscripts) if axis in index_names(s)]
    if len(dims) != 1 or var.subscripts[dims[0]] != IName(axis):
        return None
    return dims[0]


def _renamed(var: Var, name: str) -> Var:
    return replace(var, name=name)


def _resized(loops: Sequence[Loop], axis: str, extent: int) -> tuple[Loop, ...]:
    return tuple(replace(l, extent=extent) if l.index == axis else l for l in loops)


def _frame(loops: Sequence[Loop], var: Var) -> tuple[Loop, ...] | None:
    """The loops ``var``'s subscripts use; None when a P/V/B loop among them is not fixed by
    the element (a copy over them would claim independence falsely)."""
    used = index_names(var)
    loops = tuple(l for l in loops if l.index in used)
    fixed = determined_loops(var, loops)
    if any(l.kind in "PVB" and l.index not in fixed for l in loops):
        return None
    return loops


def _copy_frame(loops: Sequence[Loop], var: Var, shapes: Mapping[str, tuple[int, ...]]
                ) -> tuple[Loop, ...] | None:
    """The loops of a copy of ``var``'s elements (:func:`_frame`), provided the read is in range
    at every point of them: the original may read it only under an ``if_then_else`` guard
    (padding), while a copy reads it everywhere."""
    frame = _frame(loops, var)
    if frame is None or not in_range_everywhere(var, frame, shapes):
        return None
    return frame


def _has_gather(eq: Equation) -> bool:
    vars_ = [eq.target] + [v for v in walk(eq.value) if isinstance(v, Var)]
    return any(isinstance(n, Var) for v in vars_ for s in v.subscripts for n in walk(s))


def _plain_distinct(var: Var) -> bool:
    return (all(isinstance(s, IName) for s in var.subscripts)
            and len({s.name for s in var.subscripts}) == len(var.subscripts))


def _single_equation(nest: LoopNest) -> Equation | None:
    if len(nest.body) == 1 and isinstance(nest.body[0], Equation):
        eq = nest.body[0]
        if not isinstance(eq.value, Var) and not _has_gather(eq):
            return eq
    return None


def _inputs_along(eq: Equation, axis: str, plain: bool = True) -> dict[str, Var] | None:
    """Tensors the right-hand side reads along ``axis`` (other than the output), each read in
    one single form with ``axis`` as a plain index (``plain=False``: in any subscript, a
    window's ``d+h`` too); None if some such tensor is not, or lives in kernel-scoped
    memory."""
    forms: dict[str, set[Var]] = {}
    for v in walk(eq.value):
        if isinstance(v, Var) and v.name != eq.target.name:
            forms.setdefault(v.name, set()).add(v)
    found: dict[str, Var] = {}
    for name, seen in forms.items():
        if not any(axis in index_names(v) for v in seen):
            continue
        (var, *more) = seen
        if more or (plain and _axis_dim(var, axis) is None) or var.scope in KERNEL_SCOPES:
            return None
        found[name] = var
    return found


def self_contained(eq: Equation, implicit: bool) -> bool:
    """Does the equation read its output only as its own running accumulation, starting from the
    identity (``implicit``)? Then every output element is a function of the inputs alone, and
    may be computed in a separate nest and copied in."""
    own = [v for v in equation_reads(eq) if v.name == eq.target.name]
    if accumulation_op(eq) is None:
        return not own
    return own == [eq.target] and implicit


# ---------------------------------------------------------------- tensor split

@dataclass(frozen=True)
class SplitAxis:
    """How to split a nest along ``axis``, whatever the split point: ``copies`` holds, for each
    input read along the axis, one nest over the loops its read uses with two copy equations
    ``T1_r=T_r; T2_r=T_r`` naming its first and second part (the rule gives each its share of
    the axis and shifts the second's source); the output is copied back over ``out_loops``
    from the part outputs ``out1`` and ``out2``.

    ``B^{4}_{tx=0}L^{6}_{a=0}[C_{tx,a}=exp(A_{tx,a})*D_{a};]`` along tx: copies
    ``B^{4}_{tx=0}L^{6}_{a=0}[E_{tx,a}=A_{tx,a};F_{tx,a}=A_{tx,a};]``, out_loops tx, a, parts
    G and H."""
    axis: str
    copies: tuple[LoopNest, ...]
    out_loops: tuple[Loop, ...]
    out1: str
    out2: str


def _output_axes(nest: LoopNest) -> tuple[Equation | None, list[str]]:
    """A one-equation nest's equation (plain distinct output subscripts, global memory) and the
    loops of two or more iterations that index its output and are never read as values: the
    axes an output split may cut."""
    eq = _single_equation(nest)
    if eq is None or not _plain_distinct(eq.target) or eq.target.scope in KERNEL_SCOPES:
        return None, []
    values = {x.name for x in walk(eq.value) if isinstance(x, Idx)}
    return eq, [l.index for l in nest.loops if l.extent >= 2 and l.index not in values
                and IName(l.index) in eq.target.subscripts]


def split_axes(nest: LoopNest, names: Sequence[str], shapes: Mapping[str, tuple[int, ...]]
               ) -> list[SplitAxis]:
    """Every output axis along which a one-equation nest can be split (at any point).
    ``names`` are fresh tensor names: two per input read along the axis (in order of
    appearance), then the two part outputs; ``shapes`` the shapes of the program's tensors."""
    eq, axes = _output_axes(nest)
    out = []
    for axis in axes:
        inputs = _inputs_along(eq, axis)
        if inputs is None or len(names) < 2 * len(inputs) + 2:
            continue
        frames = {t: _copy_frame(nest.loops, v, shapes) for t, v in inputs.items()}
        if any(f is None for f in frames.values()):
            continue
        copies = tuple(LoopNest(frames[t], (Equation(_renamed(var, names[2 * k]), var),
                                            Equation(_renamed(var, names[2 * k + 1]), var)))
                       for k, (t, var) in enumerate(inputs.items()))
        o = 2 * len(inputs)
        out.append(SplitAxis(axis, copies, _frame(nest.loops, eq.target), names[o], names[o + 1]))
    return out


def _copy_loops(loops: Sequence[Loop], targets: Sequence[Var]) -> tuple[Loop, ...]:
    """The loops of a reference-form copy nest: all of ``loops``, except that a P/V/B loop no
    copy target uses runs once (extent 1), as the reference writes it: a parallel loop over
    an element that does not depend on it would write that element from every iteration."""
    used = {name for v in targets for name in index_names(v)}
    return tuple(replace(l, extent=1) if l.kind in "PVB" and l.index not in used else l
                 for l in loops)


def _reference_parts(nest: LoopNest, inputs: dict[str, Var] | None, names: Sequence[str],
                     shapes: Mapping[str, tuple[int, ...]]) -> tuple | None:
    """``(copies, first, second, out1, out2)`` of a reference-form split (:class:`SplitReduction`,
    :class:`SplitAllLoops`) copying ``inputs``: the renaming pairs, the two copy nests over all
    the nest's loops (:func:`_copy_loops`) and the two part outputs; None without inputs, names
    enough, or a read in range everywhere (a padded read is guarded in the original only)."""
    if not inputs or len(names) < 2 * len(inputs) + 2:
        return None
    if not all(in_range_everywhere(v, nest.loops, shapes) for v in inputs.values()):
        return None
    parts = [(Equation(_renamed(var, names[2 * k]), var),
              Equation(_renamed(var, names[2 * k + 1]), var))
             for k, var in enumerate(inputs.values())]
    o = 2 * len(inputs)
    frame = _copy_loops(nest.loops, [a.target for a, _ in parts])
    return (tuple(LoopNest(nest.loops, pair) for pair in parts),
            LoopNest(frame, tuple(a for a, _ in parts)), LoopNest(frame, tuple(b for _, b in parts)),
            names[o], names[o + 1])


@dataclass(frozen=True)
class ReferenceSplit:
    """A split in the reference's form (:class:`SplitReduction`, :class:`SplitAllLoops`): the
    renaming pairs ``copies`` (as in :class:`SplitAxis`), the copy nests of the two parts
    ``first`` and ``second``, and the two part outputs."""
    axis: str
    copies: tuple[LoopNest, ...]
    first: LoopNest
    second: LoopNest
    out1: str
    out2: str

    def copies_keep_parallel_claims(self) -> bool:
        """Does every copy fix each P/V/B loop of its nest that runs more than once? A copy
        over a parallel loop its element does not use writes that element from several
        iterations, which breaks the loop's independence claim (the verifier's check)."""
        parallel = {l.index for l in self.first.loops if l.kind in "PVB" and l.extent > 1}
        return all(parallel <= determined_loops(e.target, self.first.loops)
                   for e in self.first.body)


@dataclass(frozen=True)
class SplitReduction(ReferenceSplit):
    """How to split a nest's only reduction loop ``axis`` (the reference's form, whatever the
    split point): ``copies`` names each input read along the axis as in :class:`SplitAxis`
    (for the renaming of the parts); ``first`` and ``second`` are the copy nests of the two
    parts over *all* the nest's loops (the rule cuts the axis and shifts the second's sources;
    a P/V/B loop no copy uses runs once, :func:`_copy_loops`), one equation per input; the parts accumulate into ``out1`` and ``out2`` (the output's
    subscripts), and a last nest over the other loops combines them into the output with
    ``op``.

    ``B^{4}_{tx=0}L^{4}_{a=0}L^{8}_{c=0}[D_{tx,a}=D_{tx,a}+A_{tx,c}*C_{c,a};]`` along c, cut after
    3: ``B..L^{4}_{a}L^{3}_{c}[E_{tx,c}=A_{tx,c};G_{c,a}=C_{c,a};]``, the same over ``L^{5}_{c}``
    from ``A_{tx,c+3}`` and ``C_{c+3,a}``, ``I=I+E*G`` and ``J=J+F*H`` over the two cuts, then
    ``B^{4}_{tx=0}L^{4}_{a=0}[D_{tx,a}=D_{tx,a}+(I_{tx,a}+J_{tx,a});]``.

    Exact up to the association of ``op`` (as reduction_factorization): every term enters one
    part once, and the output keeps whatever it held before (its own accumulation or an
    earlier nest's values), when :func:`reduction_split_exact` holds. A copy runs over all the
    nest's loops, as the reference's does: over a serial loop its element does not use, it
    writes that element again with the same value."""
    op: str = ""


def split_reduction_axes(nest: LoopNest, names: Sequence[str],
                         shapes: Mapping[str, tuple[int, ...]]) -> list[SplitReduction]:
    """Every reduction loop along which a one-accumulation nest can be split in the reference's
    form (``names`` as for :func:`split_axes`). Whether the split is exact is
    :func:`reduction_split_exact`'s question."""
    from .scheduling import factorizable_reduction
    found = factorizable_reduction(nest)
    eq = _single_equation(nest)
    if found is None or eq is None or not _plain_distinct(eq.target) \
            or eq.target.scope in KERNEL_SCOPES:
        return []
    op, _, axes = found
    out = []
    for loop in axes:
        axis = loop.index
        if any(isinstance(x, Idx) and x.name == axis for x in walk(eq.value)):
            continue
        parts = _reference_parts(nest, _inputs_along(eq, axis), names, shapes)
        if parts is not None:
            out.append(SplitReduction(axis, *parts, op=op))
    return out


def reduction_split_exact(nest: LoopNest, plan: SplitReduction) -> bool:
    """Is the reference's split of ``nest`` along ``plan.axis`` exact, with every parallel
    claim still true?

    * The output is indexed by every loop but the axis, so a nest over the other loops visits
      each output element once and adds each partial result once (with a second reduction loop
      it would add them once per iteration of that loop).
    * Every copy is fixed by every P/V/B loop of the nest: a copy over a parallel loop its
      element does not use writes that element from several iterations, which breaks the
      loop's independence claim (the verifier's check), whatever value it writes."""
    eq = _single_equation(nest)
    if eq is None or not {l.index for l in nest.loops} - {plan.axis} <= index_names(eq.target):
        return False
    return plan.copies_keep_parallel_claims()


@dataclass(frozen=True)
class SplitAllLoops(ReferenceSplit):
    """The reference's split along an output loop ``axis``: everything runs over all the
    nest's loops (the rule cuts the axis). ``first`` and ``second`` copy each input whose reads
    mention the axis (compound subscripts such as a convolution window's ``d+h`` included) into
    its two parts, one equation per input, the second's sources shifted by the rule; the parts
    compute into ``out1`` and ``out2`` (``copies`` names them for the renaming, as in
    :class:`SplitAxis`), and two nests over all the loops copy them back into the output, the
    second at the offset. A P/V/B loop no copy uses runs once in the copy nests
    (:func:`_copy_loops`).

    ``B^{4}_{tx=0}L^{6}_{a=0}L^{3}_{h=0}[C_{tx,a}=C_{tx,a}+A_{tx,a+h};]`` along a cut after 4:
    ``[E_{tx,a+h}=A_{tx,a+h};]`` over ``L^{4}_{a}``, ``[F_{tx,a+h}=A_{tx,a+4+h};]`` over
    ``L^{2}_{a}``, the two accumulations into G and H, then ``C_{tx,a}=G_{tx,a}`` and
    ``C_{tx,a+4}=H_{tx,a}``, each over all three loops.

    Exact when the output starts from its identity (the dependency guard's Decouplable) and
    every copy is fixed by the nest's parallel loops (:func:`all_loops_split_exact`); a copy or
    copy-back over a serial loop its element does not use writes that element again with the
    same value."""


def split_all_loops_axes(nest: LoopNest, names: Sequence[str],
                         shapes: Mapping[str, tuple[int, ...]]) -> list[SplitAllLoops]:
    """Every output loop along which a one-equation nest can be split in the reference's
    all-loops form (``names`` as for :func:`split_axes`)."""
    eq, axes = _output_axes(nest)
    out = []
    for axis in axes:
        parts = _reference_parts(nest, _inputs_along(eq, axis, plain=False), names, shapes)
        if parts is not None:
            out.append(SplitAllLoops(axis, *parts))
    return out


def all_loops_split_exact(nest: LoopNest, plan: SplitAllLoops) -> bool:
    """Do the copies and the copy-backs of ``plan`` keep the nest's parallel claims? Each
    element they write must fix every P/V/B loop of the nest (a copy over a parallel loop its
    element does not use writes it from several iterations)."""
    eq = _single_equation(nest)
    if eq is None:
        return False
    parallel = {l.index for l in nest.loops if l.kind in "PVB"}
    return plan.copies_keep_parallel_claims() and parallel <= determined_loops(eq.target,
                                                                               nest.loops)


# ---------------------------------------------------------------- tensor concatenation

def read_pairing(first: Equation, second: Equation) -> dict[str, str] | None:
    """Pair the two equations' tensor accesses position by position (target first, then the
    reads in order): ``{name in first: name in second}``, or None when the accesses differ in
    number, dtype, scope or subscripts, or the pairing is not one to one."""
    a = [first.target] + [v for v in walk(first.value) if isinstance(v, Var)]
    b = [second.target] + [v for v in walk(second.value) if isinstance(v, Var)]
    if len(a) != len(b):
        return None
    pairing: dict[str, str] = {}
    back: dict[str, str] = {}
    for x, y in zip(a, b):
        if (x.dtype, x.scope, x.subscripts) != (y.dtype, y.scope, y.subscripts):
            return None
        if pairing.setdefault(x.name, y.name) != y.name or back.setdefault(y.name, x.name) != x.name:
            return None
    return pairing


def rename_tensors(node, mapping: dict[str, str]):
    """``node`` with every tensor access renamed by ``mapping``."""
    return rebuild(node, lambda n: replace(n, name=mapping[n.name])
                   if isinstance(n, Var) and n.name in mapping else None)


def same_operation(first: Equation, second: Equation) -> bool:
    """Is the second equation the first one on other tensors (same operators, literals,
    indices and subscripts)?"""
    pairing = read_pairing(first, second)
    return pairing is not None and rename_tensors(first, pairing) == second


@dataclass(frozen=True)
class ConcatAxis:
    """How to compute two similar nests as one along ``axis``: ``copies`` holds, for each input
    of the first nest read along the axis, one nest over the loops its read uses with two copy
    equations ``G_r=T_r; G_r=U_r`` into the concatenated tensor G from the first nest's tensor T
    and the second's U (the rule gives each its share of the axis and shifts the second's
    destination past the first); the joined output is ``joined``, copied back over
    ``out_loops``; ``fused`` is the first nest over both extents on the joined tensors.

    ``[D_{tx,a}=log(A_{tx,a});]`` and ``[E_{tx,a}=log(C_{tx,a});]`` along tx: copies
    ``B^{4}_{tx=0}L^{8}_{a=0}[F_{tx,a}=A_{tx,a};F_{tx,a}=C_{tx,a};]``, joined output G.
    (:func:`concat_axes` also gives the reference's form: the copies and the copy-back over
    all the nest's loops.)"""
    axis: str
    copies: tuple[LoopNest, ...]
    out_loops: tuple[Loop, ...]
    joined: str
    fused: LoopNest


def concat_axes(n1: LoopNest, n2: LoopNest, names: Sequence[str], implicit1: bool,
                implicit2: bool, shapes: Mapping[str, tuple[int, ...]]) -> list[ConcatAxis]:
    """Every axis along which the nests' inputs can be concatenated and their computations done
    once, following the first nest's equation (whether the second computes the same operation
    is a separate question, :func:`same_operation`). ``implicit1``/``implicit2``: whether each
    equation, if an accumulation, starts from its identity. ``names`` are fresh tensor names
    (inputs + 1 are used)."""
    e1, e2 = _single_equation(n1), _single_equation(n2)
    if e1 is None or e2 is None or len(n1.loops) != len(n2.loops):
        return []
    pairing = read_pairing(e1, e2)
    if pairing is None or not _plain_distinct(e1.target) or e1.target.scope in KERNEL_SCOPES:
        return []
    if not (self_contained(e1, implicit1) and self_contained(e2, implicit2)):
        return []
    if any((a.kind, a.index) != (b.kind, b.index) for a, b in zip(n1.loops, n2.loops)):
        return []
    differing = [k for k, (a, b) in enumerate(zip(n1.loops, n2.loops)) if a != b]
    if len(differing) > 1:
        return []
    axes = [n1.loops[k] for k in differing] if differing else list(n1.loops)
    out = []
    for loop in axes:
        axis, m1 = loop.index, loop.extent
        m2 = next(l.extent for l in n2.loops if l.index == axis)
        if IName(axis) not in e1.target.subscripts or any(
                isinstance(x, Idx) and x.name == axis for x in walk(e1.value)):
            continue
        inputs = _inputs_along(e1, axis)
        if inputs is None or len(names) < len(inputs) + 1:
            continue
        joined = {t: names[k] for k, t in enumerate(inputs)}
        h = names[len(inputs)]
        others = {v.name for v in walk(e1.value) if isinstance(v, Var)} - set(inputs) - {e1.target.name}
        if any(pairing[t] != t for t in others):
            continue  # a tensor that differs but is not read along the axis cannot be joined
        frames = {t: _copy_frame(n1.loops, v, shapes) for t, v in inputs.items()}
        if any(f is None for f in frames.values()) or not all(
                _copy_frame(n2.loops, _renamed(v, pairing[t]), shapes) for t, v in inputs.items()):
            continue
        fused = rename_tensors(replace(n1, loops=_resized(n1.loops, axis, m1 + m2)),
                               joined | {e1.target.name: h})
        # the copies over the loops their reads use, and in the reference's form over all the
        # nest's loops (a serial loop the copy does not use repeats the same copy; a P/V/B loop
        # it does not use runs once, _copy_loops)
        for frame_of, out_loops in (
                (frames.get, _frame(n1.loops, e1.target)),
                (lambda t: _copy_loops(n1.loops, [inputs[t]]),
                 _copy_loops(n1.loops, [e1.target]))):
            copies = tuple(LoopNest(frame_of(t), (Equation(_renamed(var, joined[t]), var),
                                                  Equation(_renamed(var, joined[t]),
                                                           _renamed(var, pairing[t]))))
                           for t, var in inputs.items())
            plan = ConcatAxis(axis, copies, out_loops, h, fused)
            if plan not in out:
                out.append(plan)
    return out
