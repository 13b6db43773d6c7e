"""Which values are provably finite, non-negative, positive or non-zero?

The split strategies rewrite ``x`` as ``(x/m)*m`` or ``(x-m)+m`` and ``exp(a)`` as
``exp(a-m)*exp(m)``. Those are identities of real numbers only when ``m`` is finite (and
non-zero for the division); a NaN, an infinity or a zero ``m`` would put NaN or inf where the
program had none. This module proves such facts about values.

The reasoning is over the real numbers under one stated assumption: **every input element is a
finite number** (no NaN, no inf). Rounding, overflow and underflow of floating-point arithmetic
are not modelled: the rewritten program agrees with the original up to rounding (the Equal
level's tolerance), not bit for bit.

Facts (every fact includes finiteness, so none holds for a NaN or an infinity):

    FINITE     a finite real number
    NONNEG     finite and >= 0
    POSITIVE   finite and > 0
    NONZERO    finite and != 0

``tensor_facts`` gives, per tensor, the facts that hold for every value a *later* nest can read
from it (a reduction is complete by then, so ``max(D, A)`` holds a finite value although it
started from -inf); ``value_facts`` gives the facts of an expression.
"""

from __future__ import annotations

from typing import Callable, Mapping

from .analysis import ACCUMULATION_IDENTITY, accumulation_op, equation_sites, intermediate_shapes
from .ast import Bin, Call, Compare, Expr, Idx, IfThenElse, Leir, Logic, Neg, Num, Var
from .memory import covers_shape
from .signature import is_float

FINITE, NONNEG, POSITIVE, NONZERO = "finite", "nonneg", "positive", "nonzero"
NOTHING: frozenset[str] = frozenset()
ALL = frozenset({FINITE, NONNEG, POSITIVE, NONZERO})


def _close(facts: set[str]) -> frozenset[str]:
    """Add the implied facts (positive -> non-negative and non-zero); drop all without
    finiteness."""
    if FINITE not in facts:
        return NOTHING
    if POSITIVE in facts:
        facts |= {NONNEG, NONZERO}
    return frozenset(facts)


def literal_facts(text: str) -> frozenset[str]:
    """Facts of a numeric literal (negative numbers are ``Neg`` of a literal)."""
    try:
        value = float(text)
    except ValueError:
        return NOTHING
    if value != value or value in (float("inf"), float("-inf")):
        return NOTHING
    return _close({FINITE, NONNEG} | ({POSITIVE} if value > 0 else set()))


def _literal_value(expr) -> float | None:
    if isinstance(expr, Num):
        try:
            return float(expr.text)
        except ValueError:
            return None
    if isinstance(expr, Neg) and isinstance(expr.operand, Num):
        inner = _literal_value(expr.operand)
        return None if inner is None else -inner
    return None


def value_facts(expr: Expr, tensor: Callable[[Var], frozenset[str]]) -> frozenset[str]:
    """Facts of an expression; ``tensor`` gives the facts of a tensor read.

    ``exp(A)`` with A finite -> positive; ``1+exp(A)`` -> positive; ``A/E`` needs a non-zero E
    to be finite; ``log(E)`` needs a positive E; ``if_then_else`` keeps what both branches have.
    """
    f = lambda e: value_facts(e, tensor)  # noqa: E731
    if isinstance(expr, Num):
        return literal_facts(expr.text)
    if isinstance(expr, Idx):
        return frozenset({FINITE, NONNEG})
    if isinstance(expr, Var):
        return tensor(expr)
    if isinstance(expr, (Compare, Logic)):
        return frozenset({FINITE, NONNEG})
    if isinstance(expr, Neg):
        a = f(expr.operand)
        return _close({FINITE} | ({NONZERO} if NONZERO in a else set())) if FINITE in a else NOTHING
    if isinstance(expr, IfThenElse):
        return f(expr.then) & f(expr.otherwise)
    if isinstance(expr, Call):
        return _call_facts(expr, [f(a) for a in expr.args])
    if isinstance(expr, Bin):
        return _bin_facts(expr, f(expr.lhs), f(expr.rhs))
    return NOTHING


def _call_facts(expr: Call, args: list[frozenset[str]]) -> frozenset[str]:
    a = args[0]
    if expr.fn == "exp":
        return ALL if FINITE in a else NOTHING
    if expr.fn == "log":
        return frozenset({FINITE}) if POSITIVE in a else NOTHING
    if expr.fn == "sqrt":
        if POSITIVE in a:
            return ALL
        return frozenset({FINITE, NONNEG}) if NONNEG in a else NOTHING
    if expr.fn == "abs":
        if NONZERO in a:
            return ALL
        return frozenset({FINITE, NONNEG}) if FINITE in a else NOTHING
    if expr.fn == "erf":
        return _close({FINITE} | ({NONZERO} & a)) if FINITE in a else NOTHING
    b = args[1]
    if not (FINITE in a and FINITE in b):
        return NOTHING
    if expr.fn == "max":
        return _close({FINITE} | ((a | b) & {NONNEG, POSITIVE}))
    if expr.fn == "min":
        return _close({FINITE} | (a & b & {NONNEG, POSITIVE}))
    return NOTHING


def _bin_facts(expr: Bin, a: frozenset[str], b: frozenset[str]) -> frozenset[str]:
    op = expr.op
    if op == "**":
        return _power_facts(a, _literal_value(expr.rhs))
    if op == "/":
        if not (FINITE in a and NONZERO in b):
            return NOTHING
        out = {FINITE}
        if NONZERO in a:
            out.add(NONZERO)
        if POSITIVE in b and NONNEG in a:
            out.add(NONNEG)
        if POSITIVE in a and POSITIVE in b:
            out.add(POSITIVE)
        return _close(out)
    if not (FINITE in a and FINITE in b):
        return NOTHING
    out = {FINITE}
    if op == "+":
        if NONNEG in a and NONNEG in b:
            out.add(NONNEG)
        if (POSITIVE in a and NONNEG in b) or (NONNEG in a and POSITIVE in b):
            out.add(POSITIVE)
    elif op == "*":
        square = expr.lhs == expr.rhs
        if (NONNEG in a and NONNEG in b) or square:
            out.add(NONNEG)
        if NONZERO in a and NONZERO in b:
            out.add(NONZERO)
        if (POSITIVE in a and POSITIVE in b) or (square and NONZERO in a):
            out.add(POSITIVE)
    return _close(out)


def _power_facts(a: frozenset[str], exponent: float | None) -> frozenset[str]:
    """``a ** k`` for a literal exponent ``k``; any other exponent proves nothing."""
    if exponent is None:
        return NOTHING
    if exponent == 0:
        return ALL
    if exponent == int(exponent):
        k = int(exponent)
        if k < 0 and NONZERO not in a:
            return NOTHING
        if FINITE not in a:
            return NOTHING
        out = {FINITE}
        if k % 2 == 0:
            out.add(NONNEG)
            if NONZERO in a:
                out.add(POSITIVE)
        else:
            out |= a & {NONNEG, POSITIVE}
        if NONZERO in a:
            out.add(NONZERO)
        return _close(out)
    # a fractional power is real only for a >= 0 (and finite at 0 only for k > 0)
    if POSITIVE in a:
        return ALL
    if exponent > 0 and NONNEG in a:
        return frozenset({FINITE, NONNEG})
    return NOTHING


# ---------------------------------------------------------------- tensors

_IDENTITY_FACTS = {text: literal_facts(text) for text in ACCUMULATION_IDENTITY.values()}


def _accumulated(op: str, prior: frozenset[str], e: frozenset[str]) -> frozenset[str]:
    """Facts of ``X op e`` from facts of the prior value of X and of e."""
    if op == "-":
        return _close({FINITE}) if FINITE in prior and FINITE in e else NOTHING
    if op in ("max", "min"):
        return _call_facts(Call(op, (Num("0"), Num("0"))), [prior, e])
    return _bin_facts(Bin(op, Num("0"), Num("1")), prior, e)


def tensor_facts(leir: Leir, inputs: Mapping[str, str],
                 shapes: Mapping[str, tuple[int, ...]] | None = None) -> dict[str, frozenset[str]]:
    """Facts that hold for every value a tensor holds when a nest that does not write it reads
    it. ``inputs`` maps input names to dtype codes (inputs are finite by assumption; a bool
    input is also non-negative). ``shapes`` are the known tensors' shapes.

    One pass in program order: an equation's value is judged with the facts of the tensors it
    reads at that point. A tensor the same nest writes proves nothing when read (it may hold a
    partial reduction or an initial identity). An accumulation with implicit initialisation is
    judged after its first update (every element of its write has had one once its nest
    ends); if the write does not provably cover the tensor's shape, the identity left in the
    other elements counts too. Integer and bool tensors keep only finiteness (their division
    truncates).
    """
    facts: dict[str, frozenset[str]] = {}
    for name, code in inputs.items():
        facts[name] = frozenset({FINITE, NONNEG}) if code == "bool" else frozenset({FINITE})
    all_shapes = dict(shapes or {})
    all_shapes.update(intermediate_shapes(leir, set(all_shapes) | set(inputs)))
    sites = equation_sites(leir)
    written_in: dict[int, set[str]] = {}
    for site in sites:
        written_in.setdefault(site.nest, set()).add(site.equation.target.name)
    written: set[str] = set()
    for site in sites:
        eq, target = site.equation, site.equation.target
        local = written_in[site.nest]

        def read(var: Var) -> frozenset[str]:
            return NOTHING if var.name in local else facts.get(var.name, NOTHING)

        op = accumulation_op(eq)
        if op is not None and target.name not in inputs:
            other = _other_operand(eq)
            e = value_facts(other, read)
            if target.name in written:
                value = _accumulated(op, facts.get(target.name, NOTHING), e)
            else:
                identity = _IDENTITY_FACTS[ACCUMULATION_IDENTITY[op]]
                value = _first_update(op, e)
                shape = all_shapes.get(target.name)
                if shape is None or not covers_shape(target, site.loops, shape):
                    value = value & identity
        else:
            value = value_facts(eq.value, read)
        if not is_float(target.dtype):
            value = value & {FINITE}
        facts[target.name] = value & facts[target.name] if target.name in written else value
        written.add(target.name)
    return facts


def _other_operand(eq) -> Expr:
    value, target = eq.value, eq.target
    if isinstance(value, Bin):
        return value.rhs if value.lhs == target else value.lhs
    return next(a for a in value.args if a != target)


def _first_update(op: str, e: frozenset[str]) -> frozenset[str]:
    """Facts of an implicitly initialised accumulation after at least one update, each update
    having facts ``e``: the sum, product, max or min of one or more such values (a difference
    ``0-e1-e2...`` only keeps finiteness)."""
    if FINITE not in e:
        return NOTHING
    if op == "-":
        return frozenset({FINITE})
    if op == "*":
        return _close({FINITE} | (e & {NONNEG, POSITIVE, NONZERO}))
    return _close({FINITE} | (e & {NONNEG, POSITIVE}))
