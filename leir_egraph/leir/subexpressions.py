"""Compound sub-expressions of equations, and when one can be computed on its own.

Expression splitting and common-subexpression elimination compute a compound sub-expression
``e`` into a fresh intermediate ``F`` over e's own *frame* -- the loops whose indices e uses, in
the order of the nest, ``F`` subscripted by exactly those indices -- in a nest placed before the
nests using it, and read ``F`` where e was::

    B^{4}_{tx=0}L^{8}_{a=0}[E_{tx}=E_{tx}+exp(A_{tx,a}-D_{tx});];
    ->
    B^{4}_{tx=0}L^{8}_{a=0}[F_{tx,a}=exp(A_{tx,a}-D_{tx});];B^{4}_{tx=0}L^{8}_{a=0}[E_{tx}=E_{tx}+F_{tx,a};];

That keeps every value when

* every occurrence is evaluated in one dtype, the intermediate's: the target's for a value of
  an equation, the comparison's for an operand of a comparison (``abs(A-C)`` in
  ``if_then_else(abs(A-C)<1,...)`` is evaluated in the dtype of the tensors compared,
  ``leir.dtypes.comparison_dtype``; reading an intermediate of that dtype instead leaves the
  comparison's dtype as it was); a condition itself (a comparison, ``&``/``|``) is not stored;
* the tensors e reads hold, wherever e is replaced, the values they hold before the first nest
  using it (no nest from there to the last use writes them);
* e can be evaluated at every point of its frame: true when some occurrence is evaluated
  unconditionally (the original then evaluates e at every point), otherwise every read must
  be statically in range (a read guarded by an enclosing ``if_then_else`` may not be).

Only top-level nests without nested nests are considered, so that a frame is a set of the
nest's own loops.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from .analysis import index_names, index_range, refine, writes
from .dtypes import comparison_dtype
from .ast import (Bin, Call, Compare, Equation, IfThenElse, IName, Leir, Logic, Loop, LoopNest,
                  Neg, Num, Var)
from .signature import DTYPE_CODES_BY_NAME
from .traverse import walk

SCALAR_FRAME = (Loop("B", 1, "tx"),)
"""The frame of a sub-expression that uses no index: one iteration (as the reference
translator writes scalar nests)."""

KERNEL_SCOPES = frozenset("sl")
"""Scopes whose storage lives only inside one CUDA kernel (one top-level nest)."""


@dataclass(frozen=True)
class Occurrence:
    """Where a sub-expression occurs: the equation (index in the nest body), whether it is
    inside a condition (a comparison, ``&``/``|``, or an ``if_then_else`` condition), whether
    it is inside a branch of an ``if_then_else`` (evaluated only when taken), whether it is
    the equation's whole right-hand side, and -- inside a condition -- the dtype code of the
    comparison it is an operand of (None directly under ``&``/``|`` or a bare condition)."""
    equation: int
    in_condition: bool
    in_branch: bool
    whole: bool
    compared_in: str | None = None

    def dtype(self, nest: LoopNest) -> str | None:
        """The dtype code this occurrence is evaluated in (None: it cannot be stored)."""
        return self.compared_in if self.in_condition else nest.body[self.equation].target.dtype


def is_compound(expr) -> bool:
    """An expression worth computing on its own: arithmetic, an intrinsic or an
    ``if_then_else`` (not a read, a number, an index, a negative literal or a condition)."""
    if isinstance(expr, Neg):
        return not isinstance(expr.operand, Num)
    return isinstance(expr, (Bin, Call, IfThenElse))


def flat(nest: LoopNest) -> bool:
    """True when the nest's body holds only equations (no nested nests)."""
    return all(isinstance(item, Equation) for item in nest.body)


def occurrences(nest: LoopNest) -> dict:
    """Every compound sub-expression of the nest's equations (value positions) -> where it
    occurs, in order of first appearance."""
    found: dict = {}

    def visit(expr, eq: int, cond: bool, branch: bool, whole: bool, compared: str | None):
        if is_compound(expr):
            found.setdefault(expr, []).append(Occurrence(eq, cond, branch, whole, compared))
        if isinstance(expr, IfThenElse):
            visit(expr.cond, eq, True, branch, False, None)
            visit(expr.then, eq, cond, True, False, compared)
            visit(expr.otherwise, eq, cond, True, False, compared)
        elif isinstance(expr, Compare):
            dtype = DTYPE_CODES_BY_NAME[comparison_dtype(expr)]
            for part in expr.operands:
                visit(part, eq, True, branch, False, dtype)
        elif isinstance(expr, Logic):
            visit(expr.lhs, eq, True, branch, False, None)
            visit(expr.rhs, eq, True, branch, False, None)
        elif isinstance(expr, Bin):
            visit(expr.lhs, eq, cond, branch, False, compared)
            visit(expr.rhs, eq, cond, branch, False, compared)
        elif isinstance(expr, Neg):
            visit(expr.operand, eq, cond, branch, False, compared)
        elif isinstance(expr, Call):
            for arg in expr.args:
                visit(arg, eq, cond, branch, False, compared)

    for i, item in enumerate(nest.body):
        if isinstance(item, Equation):
            visit(item.value, i, False, False, True, None)
    return found


def frame(nest: LoopNest, expr) -> tuple[Loop, ...]:
    """The loops of ``nest`` whose indices ``expr`` uses, in nest order (one B^{1} loop when it
    uses none)."""
    used = index_names(expr)
    return tuple(loop for loop in nest.loops if loop.index in used) or SCALAR_FRAME


def frame_subscripts(loops: tuple[Loop, ...]) -> tuple[IName, ...]:
    """The subscript of an intermediate over a frame: its indices in order (none for the
    scalar frame)."""
    return () if loops == SCALAR_FRAME else tuple(IName(loop.index) for loop in loops)


def in_range_everywhere(expr, loops: tuple[Loop, ...], shapes: Mapping[str, tuple[int, ...]]) -> bool:
    """Is every tensor read of ``expr`` statically in range at every point of ``loops``?
    ``if_then_else`` conditions inside ``expr`` narrow the ranges of their branches; a read
    whose subscript cannot be bounded (a gather) is not."""
    env0 = {loop.index: (0, loop.extent - 1) for loop in loops if loop not in SCALAR_FRAME}

    def var_ok(var: Var, env) -> bool:
        shape = shapes.get(var.name)
        if shape is None or len(shape) != len(var.subscripts):
            return False
        for sub, size in zip(var.subscripts, shape):
            bounds = index_range(sub, env)
            if bounds is None or bounds[0] < 0 or bounds[1] > size - 1:
                return False
        return True

    def visit(e, env) -> bool:
        if isinstance(e, Var):
            return var_ok(e, env)
        if isinstance(e, IfThenElse):
            if not visit(e.cond, env):
                return False
            then_env, else_env = refine(env, e.cond, True), refine(env, e.cond, False)
            return ((then_env is None or visit(e.then, then_env))
                    and (else_env is None or visit(e.otherwise, else_env)))
        children = {Bin: lambda: (e.lhs, e.rhs), Logic: lambda: (e.lhs, e.rhs),
                    Neg: lambda: (e.operand,), Call: lambda: e.args,
                    Compare: lambda: e.operands}.get(type(e), lambda: ())()
        return all(visit(c, env) for c in children)

    return visit(expr, env0)


def tensors_read(expr) -> frozenset[str]:
    """Names of the tensors an expression reads (gathers in its subscripts included)."""
    return frozenset(n.name for n in walk(expr) if isinstance(n, Var))


def kernel_local_reads(expr) -> bool:
    """Does ``expr`` read a tensor of scope s or l (storage of one kernel only)?"""
    return any(isinstance(n, Var) and n.scope in KERNEL_SCOPES for n in walk(expr))


# ---------------------------------------------------------------- one nest: expression splitting

@dataclass(frozen=True)
class Subexpression:
    """A compound sub-expression of one nest that could be computed into an intermediate of
    dtype ``dtype`` over ``loops`` (subscripted by ``subscripts``): all its occurrences are
    evaluated in that one (non-bool) dtype -- as values of equations or operands of comparisons
    -- and none is a whole right-hand side."""
    expr: object
    loops: tuple[Loop, ...]
    subscripts: tuple[IName, ...]
    dtype: str


def _one_dtype(dtypes) -> str | None:
    """The one non-bool dtype code that occurrences are all evaluated in (their
    :meth:`Occurrence.dtype` values), or None: several, or one that cannot be stored."""
    dtypes = set(dtypes)
    if len(dtypes) != 1:
        return None
    (dtype,) = dtypes
    return None if dtype in (None, "bool") else dtype


def subexpressions(nest: LoopNest) -> list[Subexpression]:
    """The sub-expressions of a flat nest that expression splitting may compute on their own."""
    if not flat(nest):
        return []
    out = []
    for expr, occs in occurrences(nest).items():
        if any(o.whole for o in occs):
            continue
        dtype = _one_dtype(o.dtype(nest) for o in occs)
        if dtype is None:
            continue
        loops = frame(nest, expr)
        out.append(Subexpression(expr, loops, frame_subscripts(loops), dtype))
    return out


def index_condition(expr, occs) -> bool:
    """Is ``expr`` an expression of indices alone that occurs inside a condition? It stays
    there: such a condition is what keeps its branches' reads in range (a scan's
    ``if_then_else(a-1<0,0,C_{a-1})``); with ``a-1`` read from a tensor, ``D_{a}<0`` states no
    bound on the index, and the program no longer shows the read of ``C_{a-1}`` in range."""
    return not tensors_read(expr) and any(o.in_condition for o in occs)


def hoistable(nest: LoopNest, expr, shapes: Mapping[str, tuple[int, ...]]) -> bool:
    """May ``expr`` (a sub-expression of ``nest``) be computed, over its frame, in a nest placed
    right before ``nest``, with the value it has at each of its occurrences?

    It may not read a tensor the nest writes (an accumulator, a scan, an earlier equation's
    result), nor kernel-local storage (which another nest cannot see on CUDA), and must be
    evaluable at every point of its frame; nor be an :func:`index_condition`."""
    if tensors_read(expr) & writes(nest):
        return False
    if kernel_local_reads(expr):
        return False
    occs = occurrences(nest).get(expr, [])
    if index_condition(expr, occs):
        return False
    if occs and all(o.in_branch for o in occs):
        return in_range_everywhere(expr, frame(nest, expr), shapes)
    return True


# ---------------------------------------------------------------- across nests: CSE

@dataclass(frozen=True)
class CommonSubexpression:
    """A compound sub-expression occurring in top-level nest ``position`` (and possibly later),
    with the three facts common-subexpression elimination needs about the program suffix
    starting there:

    * ``repeated``: it occurs at least twice in the suffix;
    * ``shared_frame``: every nest of the suffix using it runs its indices over the same loops
      (same index, same extent) as nest ``position``, and evaluates it in the one non-bool
      dtype ``dtype`` (as a value of equations of that dtype, or an operand of comparisons in
      it; never directly as a condition);
    * ``unchanged``: no nest from ``position`` to its last use writes a tensor it reads, it
      reads no kernel-local storage, it is no :func:`index_condition` where it is used, and it
      can be evaluated at every point of its frame.
    """
    position: int
    expr: object
    loops: tuple[Loop, ...]
    subscripts: tuple[IName, ...]
    dtype: str
    repeated: bool
    shared_frame: bool
    unchanged: bool


def common_subexpressions(leir: Leir, shapes: Mapping[str, tuple[int, ...]]
                          ) -> list[CommonSubexpression]:
    """Every (top-level nest, compound sub-expression occurring in it) with its CSE facts."""
    nests = leir.nests
    occs = [occurrences(n) if flat(n) else None for n in nests]
    out = []
    for p, nest in enumerate(nests):
        if occs[p] is None:
            continue
        for expr in occs[p]:
            users = [q for q in range(p, len(nests))
                     if (expr in occs[q] if occs[q] is not None else expr in walk(nests[q]))]
            count = sum(len(occs[q][expr]) if occs[q] is not None else 2 for q in users)
            loops = frame(nest, expr)
            extents = {l.index: l.extent for l in nest.loops}
            shared = all(occs[q] is not None for q in users)
            dtype = None
            if shared:
                for q in users:
                    mine = {l.index: l.extent for l in nests[q].loops}
                    if any(mine.get(i) != extents[i] for i in index_names(expr)):
                        shared = False
                dtype = _one_dtype(o.dtype(nests[q]) for q in users for o in occs[q][expr])
                shared = shared and dtype is not None
            last = users[-1]
            read = tensors_read(expr)
            unchanged = not any(read & writes(nests[q]) for q in range(p, last + 1))
            unchanged = unchanged and not kernel_local_reads(expr)
            unchanged = unchanged and not any(index_condition(expr, occs[q][expr]) for q in users
                                              if occs[q] is not None)
            if unchanged and all(o.in_branch for q in users if occs[q] is not None
                                 for o in occs[q][expr]):
                unchanged = in_range_everywhere(expr, loops, shapes)
            out.append(CommonSubexpression(p, expr, loops, frame_subscripts(loops),
                                           dtype or nest.body[occs[p][expr][0].equation].target.dtype,
                                           count >= 2, shared, unchanged))
    return out
