"""Pure analyses of LEIR programs: equation sites, reads/writes, reduction axes, accumulation
forms, index ranges (with if_then_else guards), intermediate shapes, and the nest dependency
graph.

All functions take AST values and return plain values; nothing here mutates or prints.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache, wraps
from typing import Callable, Iterator, Mapping

from .ast import (Bin, Call, Compare, Equation, Expr, IBin, IConst, Idx, IExpr, IfThenElse, IName,
                  Leir, Logic, Loop, LoopNest, Neg, Num, Var, evaluate_index)
from .printer import to_text
from .traverse import children, walk

Range = tuple[int, int]  # inclusive (lo, hi)


# ---------------------------------------------------------------- where equations are

@dataclass(frozen=True)
class EquationSite:
    """An equation with its context: top-level nest number, item path and enclosing loops."""
    nest: int
    path: tuple[int, ...]
    loops: tuple[Loop, ...]
    equation: Equation

    @property
    def loop_ranges(self) -> dict[str, Range]:
        return {loop.index: (0, loop.extent - 1) for loop in self.loops}


def equation_sites(leir: Leir) -> list[EquationSite]:
    """Every equation in execution (textual) order with its enclosing loops, outermost first."""
    out: list[EquationSite] = []
    # (item, top-level nest number, path, enclosing loops), popped in textual order
    stack: list = [(nest, n, (), ()) for n, nest in reversed(list(enumerate(leir.nests)))]
    while stack:
        item, top, path, loops = stack.pop()
        if isinstance(item, Equation):
            out.append(EquationSite(top, path, loops, item))
            continue
        inner = loops + item.loops
        stack.extend((child, top, path + (i,), inner)
                     for i, child in reversed(list(enumerate(item.body))))
    return out


def nest_loops(nest: LoopNest) -> Iterator[Loop]:
    """All loops of a nest including those of nested nests."""
    for node in walk(nest):
        if isinstance(node, Loop):
            yield node


# ---------------------------------------------------------------- reads and writes

def accesses(node) -> Iterator[Var]:
    """Every tensor access under ``node`` (gathers inside subscripts included)."""
    for sub in walk(node):
        if isinstance(sub, Var):
            yield sub


def empty_subscripts(node) -> tuple[bool, ...]:
    """Whether each access under ``node`` (in ``accesses``' order) is written ``A_{}``: the
    one thing equal nodes may differ in that their text and their egglog term keep. A memo
    keyed on a node whose answer holds its accesses adds this to its key."""
    return tuple(v.empty_subscript for v in accesses(node))


def memoized_as_spelled(maxsize: int) -> Callable:
    """``lru_cache(maxsize)`` for a function of one node whose answer holds the node's
    accesses (they go into facts or text): keyed by the node and its
    :func:`empty_subscripts`, so equal nodes spelled otherwise do not share an answer. The
    wrapper keeps ``cache_clear``."""
    def wrap(fn: Callable) -> Callable:
        cached = lru_cache(maxsize)(lambda node, spelling: fn(node))

        @wraps(fn)
        def call(node):
            return cached(node, empty_subscripts(node))
        call.cache_clear = cached.cache_clear
        return call
    return wrap


# The memos of :func:`exploration_memo`, one dict per open :func:`exploration_memos` scope.
_EXPLORATION_MEMOS: list[dict[str, dict]] = []
# At most this many keys per memo and answers per key: a scope holds a bounded memo.
MEMO_KEYS, MEMO_PER_KEY = 1 << 14, 8


@contextmanager
def exploration_memos():
    """A scope in which :func:`exploration_memo` keeps what it computes (an exploration opens
    one for its whole call, explore/explorer.py: its programs differ from their parents in a
    nest or two). Outside every scope nothing is kept: a program alone is computed whole."""
    _EXPLORATION_MEMOS.append({})
    try:
        yield
    finally:
        _EXPLORATION_MEMOS.pop()


def _spelled(answer):
    # an answer holding accesses is compared with their spelling (empty_subscripts)
    if isinstance(answer, (list, tuple)):
        return tuple((a, getattr(a, "empty_subscript", None)) for a in answer)
    return answer


def exploration_memo(memo: str, key, ask: Callable, compute: Callable):
    """``compute(ask)`` -- a deterministic function of ``key`` (a term: what it holds decides
    everything ``compute`` reads of it) and of the answers ``ask(question)`` gives it, with
    the spelling of the accesses they hold -- memoised in the innermost
    :func:`exploration_memos` scope under ``key`` **and the questions it asked with their
    answers**: a value is reused only where ``ask`` answers every question it asked the
    same, in order, so it is the value ``compute`` would give (it would ask the same
    questions and compute the same). Outside a scope, ``compute(ask)``."""
    if not _EXPLORATION_MEMOS:
        return compute(ask)
    table = _EXPLORATION_MEMOS[-1].setdefault(memo, {})
    entries = table.get(key)
    if entries is not None:
        for trace, value in entries:
            if all(_spelled(ask(q)) == a for q, a in trace):
                return value
    trace: list = []

    def recording(question):
        answer = ask(question)
        trace.append((question, _spelled(answer)))
        return answer
    value = compute(recording)
    if entries is None:
        if len(table) < MEMO_KEYS:
            table[key] = [(tuple(trace), value)]
    elif len(entries) < MEMO_PER_KEY:
        entries.append((tuple(trace), value))
    return value


def accesses_by_name(node) -> dict[str, list[Var]]:
    """``accesses(node)`` grouped by tensor name, each group in ``accesses``' order: one walk
    for what asking each tensor's accesses would walk the node once per tensor for."""
    out: dict[str, list[Var]] = {}
    for v in accesses(node):
        out.setdefault(v.name, []).append(v)
    return out


def equation_reads(eq: Equation) -> list[Var]:
    """Accesses the equation reads: the whole right side plus gathers in the target subscript."""
    reads = list(accesses(eq.value))
    for sub in eq.target.subscripts:
        reads.extend(accesses(sub))
    return reads


def reads(node) -> frozenset[str]:
    """Names of tensors read anywhere in ``node`` (a Leir, nest or equation)."""
    eqs = [node] if isinstance(node, Equation) else [n for n in walk(node) if isinstance(n, Equation)]
    return frozenset(v.name for eq in eqs for v in equation_reads(eq))


def writes(node) -> frozenset[str]:
    """Names of tensors written anywhere in ``node``."""
    eqs = [node] if isinstance(node, Equation) else [n for n in walk(node) if isinstance(n, Equation)]
    return frozenset(eq.target.name for eq in eqs)


@lru_cache(maxsize=1 << 14)
def inputs_and_writes(nest: LoopNest) -> tuple[frozenset[str], frozenset[str]]:
    """``(reads(nest) - writes(nest), writes(nest))``: what a nest reads without writing it
    itself, and what it writes. Memoized on the nest (structural key, its hash computed once;
    the entry holds the nest): providers ask it of every pair of a program's top-level nests,
    and programs that share a nest share the answer."""
    written = writes(nest)
    return reads(nest) - written, written


def changed_span(a, b, same=None) -> tuple[int, int, int, int]:
    """``(start_before, end_before, start_after, end_after)``: the half-open ranges of top-level
    nests that differ between the nest sequences ``a`` and ``b``, found by trimming equal ends
    (``same``: the equality to use, default ``==``).

        [N0, N1, N2] vs [N0, M1, M1', N2] -> (1, 2, 1, 3)
    """
    same = same or (lambda x, y: x == y)
    p = 0
    while p < min(len(a), len(b)) and same(a[p], b[p]):
        p += 1
    s = 0
    while s < min(len(a), len(b)) - p and same(a[len(a) - 1 - s], b[len(b) - 1 - s]):
        s += 1
    return p, len(a) - s, p, len(b) - s


def tensor_names(node) -> frozenset[str]:
    return frozenset(v.name for v in accesses(node))


def index_names(node) -> frozenset[str]:
    """Loop index names used in ``node`` (in subscripts or as values)."""
    return frozenset(n.name for n in walk(node) if isinstance(n, (IName, Idx)))


def subscript_indices(var: Var) -> frozenset[str]:
    """Index names appearing in a variable's own subscripts (not inside gathers' subscripts)."""
    found = set()
    for sub in var.subscripts:
        stack = [sub]
        while stack:
            s = stack.pop()
            if isinstance(s, IName):
                found.add(s.name)
            elif isinstance(s, IBin):
                stack.extend((s.lhs, s.rhs))
    return frozenset(found)


# ---------------------------------------------------------------- accumulation forms

ACCUMULATION_IDENTITY = {"+": "0", "-": "0", "*": "1", "max": "-inf", "min": "inf"}


def accumulation_op(eq: Equation) -> str | None:
    """The reduction operator if ``eq`` is ``X=X+e``, ``X=X-e``, ``X=X*e``, ``X=max(X,e)`` or
    ``X=min(X,e)`` with the same subscript on both sides (``+ * max min`` also with the operands
    swapped); otherwise ``None``."""
    target, value = eq.target, eq.value
    if isinstance(value, Bin) and value.op in ("+", "-", "*"):
        if value.lhs == target:
            return value.op
        if value.op != "-" and value.rhs == target:
            return value.op
    if isinstance(value, Call) and value.fn in ("max", "min") and target in value.args:
        return value.fn
    return None


def accumulated_operand(eq: Equation) -> Expr | None:
    """The operand ``e`` of an accumulation (``X=X op e``, ``X=e op X``, ``max(X,e)`` ...; see
    :func:`accumulation_op`), else ``None``. ``D_{tx}=D_{tx}+A_{tx,a}`` -> ``A_{tx,a}``."""
    if accumulation_op(eq) is None:
        return None
    value, target = eq.value, eq.target
    if isinstance(value, Bin):
        return value.rhs if value.lhs == target else value.lhs
    a, b = value.args
    return b if a == target else a


# ---------------------------------------------------------------- index ranges

def affine(expr) -> tuple[dict[str, int], int] | None:
    """``(coefficients, constant)`` if an index or value expression is affine in index names
    with integer constants, else ``None``.  ``c*3+f-2`` -> ``({'c': 3, 'f': 1}, -2)``."""
    # Post-order over an explicit stack (no recursion: subscripts can be deep); ``done`` holds
    # the forms of finished sub-expressions by id.
    done: dict[int, tuple[dict[str, int], int] | None] = {}
    stack = [(expr, False)]
    while stack:
        node, expanded = stack.pop()
        parts = _affine_parts(node)
        if parts and not expanded:
            stack.append((node, True))
            stack.extend((part, False) for part in parts)
            continue
        done[id(node)] = _affine_form(node, [done[id(part)] for part in parts])
    return done[id(expr)]


def _affine_parts(node) -> tuple:
    if isinstance(node, Neg):
        return (node.operand,)
    if isinstance(node, (IBin, Bin)) and node.op in ("+", "-", "*"):
        return (node.lhs, node.rhs)
    return ()


def _affine_form(node, parts: list) -> tuple[dict[str, int], int] | None:
    """The affine form of ``node`` from the forms of its ``_affine_parts``."""
    if isinstance(node, IConst):
        return {}, node.value
    if isinstance(node, Num):
        return ({}, int(node.text)) if node.is_integer_literal else None
    if isinstance(node, (IName, Idx)):
        return {node.name: 1}, 0
    if isinstance(node, Neg):
        inner = parts[0]
        return None if inner is None else ({k: -v for k, v in inner[0].items()}, -inner[1])
    if parts:
        a, b = parts
        if a is None or b is None:
            return None
        if node.op == "*":
            if a[0] and b[0]:
                return None
            (coef, const), k = (a, b[1]) if not b[0] else (b, a[1])
            return {n: c * k for n, c in coef.items() if c * k}, const * k
        sign = 1 if node.op == "+" else -1
        coef = dict(a[0])
        for n, c in b[0].items():
            coef[n] = coef.get(n, 0) + sign * c
        return {n: c for n, c in coef.items() if c}, a[1] + sign * b[1]
    return None


def _form_key(coef: dict[str, int]) -> tuple:
    """Key under which a guard's bound on the linear form sum(coef*x) is kept in an env."""
    return tuple(sorted(coef.items()))


def index_range(expr: IExpr, env: Mapping) -> Range | None:
    """Inclusive bounds of an index expression given index ranges; ``None`` when unknown
    (gathers, unbound names). ``env`` maps index names to ranges and may also hold guard bounds
    on multi-index linear forms (see :func:`refine`), which tighten an affine subscript with the
    same coefficients: under ``c*2+a-1>=0`` the read ``X_{c*2+a-1}`` is known to be >= 0."""
    lin = affine(expr)
    if lin is not None:
        coef, const = lin
        lo = hi = const
        for name, c in coef.items():
            if name not in env:
                return None
            a, b = env[name]
            lo += min(c * a, c * b)
            hi += max(c * a, c * b)
        bound = env.get(_form_key(coef)) if len(coef) > 1 else None
        if bound is None and len(coef) > 1:
            negated = env.get(_form_key({n: -c for n, c in coef.items()}))
            bound = None if negated is None else (-negated[1], -negated[0])
        if bound is not None:
            lo, hi = max(lo, bound[0] + const), min(hi, bound[1] + const)
        return lo, hi
    if isinstance(expr, IBin):
        a, b = index_range(expr.lhs, env), index_range(expr.rhs, env)
        if a is None or b is None:
            return None
        if expr.op == "*":
            products = [x * y for x in a for y in b]
            return min(products), max(products)
        if expr.op == "+":  # e.g. a//2*2+a%2, a fused loop's recomputed index
            return a[0] + b[0], a[1] + b[1]
        if expr.op == "-":
            return a[0] - b[1], a[1] - b[0]
        if expr.op in ("//", "%") and b[0] == b[1] and b[0] > 0:
            d = b[0]
            if expr.op == "//":
                return a[0] // d, a[1] // d
            return (a[0] % d, a[1] % d) if a[0] // d == a[1] // d else (0, d - 1)
    return None


_NEGATE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}


def refine(env: Mapping[str, Range], cond: Expr, truth: bool) -> dict[str, Range] | None:
    """Narrow index ranges under ``cond == truth``; ``None`` if that is impossible.

    Handles comparisons affine in one index (chains included), ``&`` when true and ``|`` when
    false; anything else leaves the ranges unchanged (a safe over-approximation).
    """
    env = dict(env)
    if isinstance(cond, Logic):
        if (cond.op == "&") == truth:
            for part in (cond.lhs, cond.rhs):
                env = refine(env, part, truth)
                if env is None:
                    return None
        return env
    if isinstance(cond, Compare):
        pairs = list(zip(cond.operands, cond.ops, cond.operands[1:]))
        if not truth and len(pairs) > 1:
            return env
        for lhs, op, rhs in pairs:
            env = _refine_pair(env, lhs, op if truth else _NEGATE[op], rhs)
            if env is None:
                return None
    return env


def _refine_pair(env: dict[str, Range], lhs: Expr, op: str, rhs: Expr) -> dict[str, Range] | None:
    a, b = affine(lhs), affine(rhs)
    if a is None or b is None:
        return env
    coef = dict(a[0])
    for n, c in b[0].items():
        coef[n] = coef.get(n, 0) - c
    coef = {n: c for n, c in coef.items() if c}
    const = a[1] - b[1]  # condition: sum(coef*x) + const  op  0
    if not coef:
        holds = {"<": const < 0, "<=": const <= 0, ">": const > 0, ">=": const >= 0,
                 "==": const == 0, "!=": const != 0}[op]
        return env if holds else None
    if op == "!=":
        return env
    if len(coef) > 1:
        return _refine_form(env, coef, const, op)
    ((name, c),) = coef.items()
    if name not in env:
        return env
    if c < 0:  # multiply by -1: flip the comparison
        c, const = -c, -const
        op = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "=="}[op]
    # c*x + const op 0  with c > 0
    lo, hi = env[name]
    if op in ("<", "<="):
        bound = -const - (1 if op == "<" else 0)  # c*x <= bound
        hi = min(hi, bound // c)
    elif op in (">", ">="):
        bound = -const + (1 if op == ">" else 0)  # c*x >= bound
        lo = max(lo, -((-bound) // c))
    else:  # ==
        if (-const) % c:
            return None
        lo, hi = max(lo, -const // c), min(hi, -const // c)
    if lo > hi:
        return None
    env[name] = (lo, hi)
    return env


def _refine_form(env: dict, coef: dict[str, int], const: int, op: str) -> dict | None:
    """Record ``sum(coef*x) + const op 0`` as a bound on the linear form itself, kept with its
    first coefficient positive (``1<=d*2+c`` and ``d*2+c-1`` name the same form)."""
    if _form_key(coef)[0][1] < 0:
        coef, const = {n: -c for n, c in coef.items()}, -const
        op = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "=="}[op]
    key = _form_key(coef)
    lo, hi = env.get(key, (-(1 << 62), 1 << 62))
    if op == "<":
        hi = min(hi, -const - 1)
    elif op == "<=":
        hi = min(hi, -const)
    elif op == ">":
        lo = max(lo, -const + 1)
    elif op == ">=":
        lo = max(lo, -const)
    else:  # ==
        lo, hi = max(lo, -const), min(hi, -const)
    if lo > hi:
        return None
    env[key] = (lo, hi)
    return env


@dataclass(frozen=True)
class GuardedAccess:
    """A tensor access with the index ranges that hold where it executes."""
    var: Var
    env: Mapping[str, Range]
    is_write: bool


def guarded_accesses(site: EquationSite) -> list[GuardedAccess]:
    """The equation's accesses, each with ranges narrowed by enclosing if_then_else guards.
    Accesses in branches that can never run are omitted."""
    out: list[GuardedAccess] = []
    env0 = site.loop_ranges
    # Pre-order over an explicit stack (expressions can be deep): ("var", var, env, is_write)
    # records an access and then its gathers; ("expr", expr, env) visits a value expression.
    stack: list[tuple] = [("expr", site.equation.value, env0),
                          ("var", site.equation.target, env0, True)]
    while stack:
        task = stack.pop()
        if task[0] == "var":
            _, var, env, is_write = task
            out.append(GuardedAccess(var, env, is_write))
            gathers = [inner for sub in var.subscripts for inner in _top_level_vars(sub)]
            stack.extend(("var", inner, env, False) for inner in reversed(gathers))
            continue
        _, expr, env = task
        if isinstance(expr, Var):
            stack.append(("var", expr, env, False))
        elif isinstance(expr, IfThenElse):
            branches = [("expr", expr.cond, env)]
            then_env = refine(env, expr.cond, True)
            if then_env is not None:
                branches.append(("expr", expr.then, then_env))
            else_env = refine(env, expr.cond, False)
            if else_env is not None:
                branches.append(("expr", expr.otherwise, else_env))
            stack.extend(reversed(branches))
        else:
            stack.extend(("expr", child, env) for child in reversed(children(expr)))
    return out



def _top_level_vars(sub: IExpr) -> Iterator[Var]:
    """Gathers directly inside an index expression (not inside their own subscripts)."""
    stack = [sub]
    while stack:
        node = stack.pop()
        if isinstance(node, Var):
            yield node
        elif isinstance(node, IBin):
            stack.extend((node.rhs, node.lhs))


# ---------------------------------------------------------------- intermediates and shapes

def intermediates(leir: Leir, known: frozenset[str] | set[str]) -> tuple[str, ...]:
    """Tensor names that are not known (inputs/outputs), in order of first appearance."""
    seen: dict[str, None] = {}
    for var in accesses(leir):
        if var.name not in known:
            seen.setdefault(var.name, None)
    return tuple(seen)


def written_extent(leir: Leir, name: str) -> tuple[int, ...] | None:
    """Per-dimension (max written subscript + 1) of ``name`` over all its writes; ``None`` if a
    write subscript cannot be bounded (gathers)."""
    return written_extents(leir, {name}).get(name)


def written_extents(leir: Leir, names) -> dict[str, tuple[int, ...] | None]:
    """:func:`written_extent` of every written tensor among ``names``, in one pass over the
    program (networks have thousands of intermediates)."""
    names = set(names)
    shapes: dict[str, tuple[int, ...] | None] = {}
    for site in equation_sites(leir):
        target = site.equation.target
        if target.name in names:
            merge_extent(shapes, target.name, subscript_extent(target, site.loop_ranges))
    return shapes


def merge_extent(extents: dict, name: str, dims: tuple[int, ...] | None) -> None:
    """Fold one write's extent of ``name`` into ``extents``: the per-dimension maximum, and
    ``None`` (a write that cannot be bounded) stays ``None``.

        {X: (4, 2)} + X (3, 5) -> {X: (4, 5)};   {X: (4, 2)} + X None -> {X: None}
    """
    if name in extents and extents[name] is None:
        return
    old = extents.get(name)
    extents[name] = (None if dims is None else tuple(dims) if old is None
                     else tuple(max(a, b) for a, b in zip(old, dims)))


def subscript_extent(var: Var, env: Mapping) -> tuple[int, ...] | None:
    """Per dimension, the largest value ``var``'s subscript takes under the index ranges
    ``env``, plus one; ``None`` if a subscript cannot be bounded (gathers).

    ``X_{c*2+d}`` with c in 0..3, d in 0..1 -> ``(8,)``
    """
    dims = []
    for sub in var.subscripts:
        r = index_range(sub, env)
        if r is None:
            return None
        dims.append(r[1] + 1)
    return tuple(dims)


def intermediate_shapes(leir: Leir, known) -> dict[str, tuple[int, ...]]:
    """Shape of every intermediate: the per-dimension maximum written subscript plus one."""
    names = intermediates(leir, frozenset(known))
    extents = written_extents(leir, names)
    return {name: extents[name] for name in names if extents.get(name) is not None}


@lru_cache(maxsize=4)
def program_shapes(program) -> dict[str, tuple[int, ...]]:
    """Shape of every known tensor (signature) and intermediate (inferred from its writes) of a
    ``Program``."""
    shapes = {t.name: t.shape for t in program.signature.tensors}
    shapes.update(intermediate_shapes(program.leir, set(shapes)))
    return shapes


def single_equation(nest: LoopNest) -> Equation | None:
    """The nest's only body item, if it is one equation.

    ``L^{4}_{a=0}[D_{a}=A_{a};]`` -> ``D_{a}=A_{a}``; a nest of two items -> ``None``."""
    if len(nest.body) == 1 and isinstance(nest.body[0], Equation):
        return nest.body[0]
    return None


def picked_indices(subscripts, indices) -> list[str] | None:
    """The loop indices a written element is picked by, when every subscript is a distinct one
    of ``indices`` or the constant 0 (so the writes form a full box of elements); else ``None``.

    ``D_{tx,0,a}`` over loops ``tx, a, c`` -> ``['tx', 'a']``; ``D_{tx,tx}`` or ``D_{a+1}`` ->
    ``None``."""
    picked: list[str] = []
    for sub in subscripts:
        if isinstance(sub, IName) and sub.name in indices and sub.name not in picked:
            picked.append(sub.name)
        elif not (isinstance(sub, IConst) and sub.value == 0):
            return None
    return picked


# ---------------------------------------------------------------- parallel loops' writes
#
# Does every P/V/B loop keep its promise that two different iterations never write the same
# element? For a loop ``ℓ`` and a tensor written inside it, every pair of writes (one equation
# with itself included) is compared dimension by dimension. A dimension proves two iterations
# ``i != i'`` disjoint when both subscripts are ``c*ℓ + rest`` with the same ``c`` and the range
# of ``rest' - rest`` (inner loops independently, enclosing loops shared) contains no non-zero
# multiple of ``c`` below ``c*extent``::
#
#     P^{16}_{a=0}L^{8}_{c=0}[X_{a*8+c}=...]    rest' - rest in [-7, 7], c = 8  -> independent
#     P^{16}_{a=0}L^{8}_{c=0}[X_{c}=...]         X does not depend on a           -> dependent
#     B^{128}_{tx=0}L^{1}_{a=0}[H=H+F_{tx,a};]   scalar written by every tx       -> dependent
#
# Subscripts the affine rule cannot decide (``//``, ``%``, products of indices) are decided by
# enumerating the iteration space when it has at most ``ENUMERATION_LIMIT`` points; a write
# through a gather cannot be decided and counts as a conflict. Reads are not looked at.

ENUMERATION_LIMIT = 1 << 20


@dataclass(frozen=True)
class _Write:
    target: Var
    inner: tuple[Loop, ...]   # loops inside the parallel loop that enclose the equation
    outer: tuple[Loop, ...]   # loops enclosing the parallel loop


def write_conflicts(leir: Leir, kinds: str = "PVB",
                    shared: Callable[[Loop, Var], bool] | None = None) -> list[str]:
    """One sentence per loop of a kind in ``kinds`` (P, V, B) two of whose iterations may write
    one element of a tensor, per tensor; empty when every such loop keeps its promise. The
    static half of the Independent level (``verify.check_independent``) and the CUDA
    lowering's race check (``kinds="B"``: a B loop's iterations are the GPU's threads).
    ``shared(loop, target)``: whether the iterations of ``loop`` write one copy of the tensor
    (not so for a per-thread tensor on the GPU); by default they do.

    >>> from leir_egraph.leir.parser import parse
    >>> write_conflicts(parse("P^{4}_{a=0}L^{8}_{c=0}[X^{f32,g}_{c}=A^{f32,g}_{a,c};];"))
    ['every iteration of P^{4}_{a=0} writes X^{f32,g}_{c}: its subscript does not depend on a']
    >>> write_conflicts(parse("B^{64}_{tx=0}[H^{f32,g}=H^{f32,g}+F^{f32,g}_{tx};];"), "B")
    ['every iteration of B^{64}_{tx=0} writes the scalar H^{f32,g}']
    """
    problems: list[str] = []
    for loop, written in _parallel_loops(leir.nests):
        if loop.extent <= 1 or loop.kind not in kinds:
            continue
        by_tensor: dict[str, list[_Write]] = {}
        for w in written:
            if shared is None or shared(loop, w.target):
                by_tensor.setdefault(w.target.name, []).append(w)
        for name, group in by_tensor.items():
            problem = _tensor_problem(loop, group)
            if problem:
                problems.append(problem)
    return problems


def _parallel_loops(nests, outer: tuple[Loop, ...] = ()):
    """(parallel loop, writes inside it) for every P/V/B loop, outermost first."""
    for nest in nests:
        yield from _nest_parallel_loops(nest, outer)


def _nest_parallel_loops(nest: LoopNest, outer: tuple[Loop, ...]):
    for i, loop in enumerate(nest.loops):
        if loop.kind in ("P", "V", "B"):
            enclosing = outer + nest.loops[:i]
            inner_loops = nest.loops[i + 1:]
            yield loop, list(_writes(nest.body, enclosing, inner_loops))
    for item in nest.body:
        if isinstance(item, LoopNest):
            yield from _nest_parallel_loops(item, outer + nest.loops)


def _writes(body, outer: tuple[Loop, ...], inner: tuple[Loop, ...]):
    for item in body:
        if isinstance(item, Equation):
            yield _Write(item.target, inner, outer)
        else:
            yield from _writes(item.body, outer, inner + item.loops)


def _describe(loop: Loop) -> str:
    return to_text(loop)


def _tensor_problem(loop: Loop, written: list[_Write]) -> str | None:
    """A sentence if iterations of ``loop`` may write a common element of this tensor."""
    target = written[0].target
    if target.rank == 0:
        return f"every iteration of {_describe(loop)} writes the scalar {to_text(target)}"
    if all(loop.index not in index_names(w.target) for w in written):
        shown = to_text(written[0].target)
        return (f"every iteration of {_describe(loop)} writes {shown}: its subscript does not "
                f"depend on {loop.index}")
    if all(_pair_disjoint(loop, s, t) for k, s in enumerate(written) for t in written[k:]):
        return None
    return _enumerate(loop, written)


def _pair_disjoint(loop: Loop, s: _Write, t: _Write) -> bool:
    """True when some dimension proves iterations i != i' of ``loop`` never let write ``s`` at
    i and write ``t`` at i' hit the same element."""
    outer_env = {l.index: (0, l.extent - 1) for l in s.outer}
    for sub_s, sub_t in zip(s.target.subscripts, t.target.subscripts):
        a, b = affine(sub_s), affine(sub_t)
        if a is None or b is None:
            continue
        c = a[0].get(loop.index, 0)
        if c == 0 or b[0].get(loop.index, 0) != c:
            continue
        # c*i + rest_s == c*i' + rest_t  <=>  c*(i - i') == rest_t - rest_s
        diff = _difference_range(a, b, loop.index, s, t, outer_env)
        if diff is None:
            continue
        lo, hi = diff
        step = abs(c)
        m_lo, m_hi = -((-lo) // step), hi // step  # multiples m with step*m in [lo, hi]
        limit = loop.extent - 1
        m_lo, m_hi = max(m_lo, -limit), min(m_hi, limit)
        if m_lo > m_hi or (m_lo == 0 and m_hi == 0):
            return True
    return False


def _difference_range(a, b, index: str, s: _Write, t: _Write, outer_env):
    """Range of rest_t - rest_s: inner loops of each write vary independently, enclosing loops
    take the same value in both."""
    lo = hi = b[1] - a[1]
    inner_s = {l.index: (0, l.extent - 1) for l in s.inner}
    inner_t = {l.index: (0, l.extent - 1) for l in t.inner}
    outer_coef: dict[str, int] = {}
    for name, coef in b[0].items():
        if name == index:
            continue
        if name in inner_t:
            r = inner_t[name]
            lo, hi = lo + min(coef * r[0], coef * r[1]), hi + max(coef * r[0], coef * r[1])
        elif name in outer_env:
            outer_coef[name] = outer_coef.get(name, 0) + coef
        else:
            return None
    for name, coef in a[0].items():
        if name == index:
            continue
        if name in inner_s:
            r = inner_s[name]
            lo, hi = lo - max(coef * r[0], coef * r[1]), hi - min(coef * r[0], coef * r[1])
        elif name in outer_env:
            outer_coef[name] = outer_coef.get(name, 0) - coef
        else:
            return None
    for name, coef in outer_coef.items():
        r = outer_env[name]
        lo, hi = lo + min(coef * r[0], coef * r[1]), hi + max(coef * r[0], coef * r[1])
    return lo, hi


def has_gather(sub) -> bool:
    """Whether an index expression reads a tensor."""
    return any(isinstance(node, Var) for node in walk(sub))


def index_array(sub, env: Mapping, gathered: Callable[[Var], object] | None = None):
    """``evaluate_index`` of a subscript over numpy int64 arrays of index values (``env``:
    index name -> array); a gather (a tensor read inside it) is ``gathered(var)``'s value, a
    KeyError without ``gathered``."""
    import numpy as np

    def leaf(node):
        if isinstance(node, IConst):
            return np.int64(node.value)
        if isinstance(node, IName):
            return np.asarray(env[node.name], dtype=np.int64)
        if gathered is None:
            raise KeyError(node.name)
        return gathered(node)
    return evaluate_index(sub, leaf)


# enumeration fallback

def _enumerate(loop: Loop, written: list[_Write]) -> str | None:
    """Decide by evaluating every write subscript over the whole iteration space."""
    import numpy as np
    for w in written:
        if any(has_gather(sub) for sub in w.target.subscripts):
            return (f"cannot prove that iterations of {_describe(loop)} write distinct elements "
                    f"of {to_text(w.target)}: its subscript reads a tensor (gather)")
    points = sum(math.prod(l.extent for l in w.outer + (loop,) + w.inner) for w in written)
    if points > ENUMERATION_LIMIT:
        return (f"cannot prove that iterations of {_describe(loop)} write distinct elements of "
                f"'{written[0].target.name}' (subscripts not affine in {loop.index} and "
                f"{points} points is too many to enumerate)")
    rows, owners = [], []
    for w in written:
        loops = w.outer + (loop,) + w.inner
        grids = np.meshgrid(*[np.arange(l.extent, dtype=np.int64) for l in loops], indexing="ij")
        env = {l.index: g.ravel() for l, g in zip(loops, grids)}
        size = env[loop.index].shape
        columns = [env[l.index] for l in w.outer]
        columns += [np.broadcast_to(index_array(sub, env), size)
                    for sub in w.target.subscripts]
        rows.append(np.stack(columns, axis=1) if columns else np.zeros(size + (0,), np.int64))
        owners.append(env[loop.index])
    keys, owner = np.concatenate(rows), np.concatenate(owners)
    _, group = np.unique(keys, axis=0, return_inverse=True)
    group = group.ravel()
    low = np.full(group.max() + 1, np.iinfo(np.int64).max)
    high = np.full(group.max() + 1, np.iinfo(np.int64).min)
    np.minimum.at(low, group, owner)
    np.maximum.at(high, group, owner)
    clash = np.nonzero(low != high)[0]
    if clash.size == 0:
        return None
    first = int(np.nonzero(group == clash[0])[0][0])
    element = ",".join(str(int(v)) for v in keys[first][len(written[0].outer):])
    return (f"iterations {loop.index}={int(low[clash[0]])} and {loop.index}={int(high[clash[0]])} "
            f"of {_describe(loop)} both write {written[0].target.name}[{element}]")
