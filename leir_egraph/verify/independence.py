"""Static half of the Independent level (docs/LEIR.md §4): does every P/V/B loop keep its
promise that two different iterations never write the same element?

For a loop ``ℓ`` and a tensor written inside it, every pair of writes (one equation with
itself included) is compared dimension by dimension. A dimension proves two iterations
``i != i'`` disjoint when both subscripts are ``c*ℓ + rest`` with the same ``c`` and the range
of ``rest' - rest`` (inner loops independently, enclosing loops shared) contains no non-zero
multiple of ``c`` below ``c*extent``::

    P^{16}_{a=0}L^{8}_{c=0}[X_{a*8+c}=...]    rest' - rest in [-7, 7], c = 8  -> independent
    P^{16}_{a=0}L^{8}_{c=0}[X_{c}=...]         X does not depend on a           -> dependent
    B^{128}_{tx=0}L^{1}_{a=0}[H=H+F_{tx,a};]   scalar written by every tx       -> dependent

Subscripts the affine rule cannot decide (``//``, ``%``, products of indices) are decided by
enumerating the iteration space when it has at most ``ENUMERATION_LIMIT`` points; a write
through a gather cannot be decided and counts as not independent. Reads are left to the
dynamic check (reverse-order execution, see ``session.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..leir.analysis import affine, index_names
from ..leir.ast import Equation, Loop, LoopNest, Var
from ..leir.printer import to_text
from ..leir.program import Program
from .gathers import has_gather, index_values

ENUMERATION_LIMIT = 1 << 20


@dataclass(frozen=True)
class Independence:
    """Outcome of the static check: ``ok`` and one sentence per broken or undecidable claim."""
    ok: bool
    problems: tuple[str, ...] = field(default=())

    def __bool__(self) -> bool:
        return self.ok

    @property
    def reason(self) -> str | None:
        return "; ".join(self.problems) if self.problems else None


@dataclass(frozen=True)
class _Write:
    target: Var
    inner: tuple[Loop, ...]   # loops inside the parallel loop that enclose the equation
    outer: tuple[Loop, ...]   # loops enclosing the parallel loop


def check_independent(program: Program) -> Independence:
    """Statically check every P/V/B loop of ``program`` (pure Python, no TVM).

    >>> p = Program.parse("P^{4}_{a=0}L^{8}_{c=0}[X^{f32,g}_{c}=A^{f32,g}_{a,c};];", sig)  # doctest: +SKIP
    >>> check_independent(p).reason                                                     # doctest: +SKIP
    "every iteration of P^{4}_{a=0} writes X^{f32,g}_{c}: its subscript does not depend on a"
    """
    problems: list[str] = []
    for loop, writes in _parallel_loops(program.leir.nests):
        if loop.extent <= 1:
            continue
        by_tensor: dict[str, list[_Write]] = {}
        for w in writes:
            by_tensor.setdefault(w.target.name, []).append(w)
        for name, group in by_tensor.items():
            problem = _tensor_problem(loop, group)
            if problem:
                problems.append(problem)
    return Independence(not problems, tuple(problems))


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


def _tensor_problem(loop: Loop, writes: list[_Write]) -> str | None:
    """A sentence if iterations of ``loop`` may write a common element of this tensor."""
    target = writes[0].target
    if target.rank == 0:
        return f"every iteration of {_describe(loop)} writes the scalar {to_text(target)}"
    if all(loop.index not in index_names(w.target) for w in writes):
        shown = to_text(writes[0].target)
        return (f"every iteration of {_describe(loop)} writes {shown}: its subscript does not "
                f"depend on {loop.index}")
    if all(_pair_disjoint(loop, s, t) for k, s in enumerate(writes) for t in writes[k:]):
        return None
    verdict = _enumerate(loop, writes)
    if verdict is None:
        return None
    return verdict


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


# ---------------------------------------------------------------- enumeration fallback

def _enumerate(loop: Loop, writes: list[_Write]) -> str | None:
    """Decide by evaluating every write subscript over the whole iteration space."""
    for w in writes:
        if any(has_gather(sub) for sub in w.target.subscripts):
            return (f"cannot prove that iterations of {_describe(loop)} write distinct elements "
                    f"of {to_text(w.target)}: its subscript reads a tensor (gather)")
    points = sum(math.prod(l.extent for l in w.outer + (loop,) + w.inner) for w in writes)
    if points > ENUMERATION_LIMIT:
        return (f"cannot prove that iterations of {_describe(loop)} write distinct elements of "
                f"'{writes[0].target.name}' (subscripts not affine in {loop.index} and "
                f"{points} points is too many to enumerate)")
    rows, owners = [], []
    for w in writes:
        loops = w.outer + (loop,) + w.inner
        grids = np.meshgrid(*[np.arange(l.extent, dtype=np.int64) for l in loops], indexing="ij")
        env = {l.index: g.ravel() for l, g in zip(loops, grids)}
        size = env[loop.index].shape
        columns = [env[l.index] for l in w.outer]
        columns += [np.broadcast_to(index_values(sub, env), size)
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
    element = ",".join(str(int(v)) for v in keys[first][len(writes[0].outer):])
    return (f"iterations {loop.index}={int(low[clash[0]])} and {loop.index}={int(high[clash[0]])} "
            f"of {_describe(loop)} both write {writes[0].target.name}[{element}]")
