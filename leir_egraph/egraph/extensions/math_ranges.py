"""Facts for the algebraic math strategies (rules/math/): where a value may be rewritten, and
what is known about the range of every value.

An algebraic identity is only a program rewrite when it holds for every input, ±inf and NaN
included, in the arithmetic the program really uses. Two extra guards supply what the rules
of rules/math/ need to know for that:

``float_arithmetic`` -- ``(MathSite e)``: every occurrence of the sub-expression ``e`` is
computed in f32, f64 or bf16 value arithmetic. Refused are: equations with an integer or bool
target (``/`` truncates there, and ``a/c+b/c`` is not ``(a+b)/c``); f16 targets (with a
largest value of 65504, an intermediate such as ``a*b`` or ``b+c`` overflows for ordinary
inputs, so distributing or combining terms changes results); everything inside a condition
(comparisons are evaluated in their operands' own dtype, and a rounding difference flips
them); and the parts of an equation that decide its implicit initialisation (docs/LEIR.md §3):
for an accumulation ``X=X op e`` that may start from the identity, the whole right-hand side
and the self-read ``X`` itself (rewriting them could turn the accumulation into a plain
assignment, or change ``op`` and so the initial value); an equation that reads its own target
element without being such an accumulation reads an element nobody wrote and is left alone.

``operand_range`` -- a range analysis: for every tensor and sub-expression an interval over
the extended reals plus a may-be-NaN flag, from the inputs (any value, ±inf and NaN included;
integer tensors their dtype's range) through every equation to a fixpoint. Each operation is
evaluated exactly on the interval ends, then widened by a few units in the last place of the
equation's dtype; a bound beyond a quarter of the dtype's largest value becomes infinite
(overflow) and a bound nearer to zero than four times the smallest normal becomes zero
(underflow), so a fact claimed for a value holds for the value the program computes. From the
intervals: ``MathFinite`` (never ±inf), ``MathNonZero``, ``MathNonNegative``, ``MathPositive``,
``MathNegative`` (NaN allowed in all five), ``MathExpArg`` (small enough that exp of it, of a
sum or difference of two such, is a normal number), ``MathConstFactor`` / ``MathConstTerm``
(closed constant expressions -- literals and intrinsics, no tensor and no index -- that are
finite, never NaN, and non-zero for a factor, in every float dtype of the program), and
``MathNatural`` (literal texts of small non-negative integers, exponents ``x**m`` may add).

Everything here is a pure function of the program.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Iterator

from ...leir.analysis import accumulated_operand, accumulation_op, equation_sites
from ...leir.ast import (Bin, Call, Compare, Equation, Idx, IfThenElse, Logic, Neg, Num, Var)
from ...leir.program import Program
from ..encoding import Term, decode, encode_value, quoted, to_egglog
from ..facts import LoadedProgram
from ..guards import Guard, GuardExtension, Relation

INF = math.inf


# ---------------------------------------------------------------- intervals

@dataclass(frozen=True)
class Span:
    """The values an expression may take: a closed interval ``[lo, hi]`` of the extended reals
    (empty when ``lo > hi``) plus whether it may be NaN."""
    lo: float
    hi: float
    nan: bool = False

    @property
    def empty(self) -> bool:
        return self.lo > self.hi

    @property
    def finite(self) -> bool:
        return not self.empty and -INF < self.lo and self.hi < INF

    @property
    def nonzero(self) -> bool:
        return not self.empty and (self.lo > 0 or self.hi < 0)

    def contains_zero(self) -> bool:
        return not self.empty and self.lo <= 0 <= self.hi

    def has_inf(self) -> bool:
        return not self.empty and (self.lo == -INF or self.hi == INF)


EMPTY = Span(INF, -INF)
ANY = Span(-INF, INF, True)


def point(value: float) -> Span:
    return Span(value, value)


def join(a: Span, b: Span) -> Span:
    return Span(min(a.lo, b.lo), max(a.hi, b.hi), a.nan or b.nan)


@dataclass(frozen=True)
class FloatFormat:
    """What the range analysis needs of a float dtype."""
    largest: float
    smallest_normal: float
    epsilon: float
    exp_arg: float  # |x| <= exp_arg keeps exp(x), exp(x)*exp(y) and exp(x)/exp(y) normal

    def fit(self, s: Span) -> Span:
        """Widen a span exactly computed on its ends to cover the dtype's rounding, overflow
        and underflow."""
        if s.empty:
            return s
        lo, hi = s.lo, s.hi
        if math.isfinite(lo):
            lo -= abs(lo) * 8 * self.epsilon
        if math.isfinite(hi):
            hi += abs(hi) * 8 * self.epsilon
        big, tiny = self.largest / 4, self.smallest_normal * 4
        if hi > big:
            hi = INF
        if lo < -big:
            lo = -INF
        lo = min(lo, big)
        hi = max(hi, -big)
        if 0 < lo < tiny:
            lo = 0.0
        if -tiny < hi < 0:
            hi = 0.0
        return Span(lo, hi, s.nan)


FORMATS = {
    "f32": FloatFormat(3.4028234663852886e38, 1.1754943508222875e-38, 2.0 ** -23, 40.0),
    "bf16": FloatFormat(3.3895313892515355e38, 1.1754943508222875e-38, 2.0 ** -7, 40.0),
    "f64": FloatFormat(1.7976931348623157e308, 2.2250738585072014e-308, 2.0 ** -52, 340.0),
    "f16": FloatFormat(65504.0, 6.103515625e-05, 2.0 ** -10, 4.0),
}
# Integer (and bool) targets: the analysis evaluates their right-hand sides in f64 only to bound
# what other equations read; their stored values are bounded by the dtype instead.
INTEGER_RANGES = {
    "i8": (-2.0 ** 7, 2.0 ** 7 - 1), "i16": (-2.0 ** 15, 2.0 ** 15 - 1),
    "i32": (-2.0 ** 31, 2.0 ** 31 - 1), "i64": (-2.0 ** 63, 2.0 ** 63 - 1),
    "u8": (0.0, 2.0 ** 8 - 1), "u16": (0.0, 2.0 ** 16 - 1), "u32": (0.0, 2.0 ** 32 - 1),
    "u64": (0.0, 2.0 ** 64 - 1), "bool": (0.0, 1.0),
}
# The dtypes whose equations the math rules rewrite (see the module docstring for f16).
REWRITABLE = ("f32", "f64", "bf16")


def format_of(dtype: str) -> FloatFormat:
    return FORMATS.get(dtype, FORMATS["f64"])


def _sum(x: float, y: float, default: float) -> float:
    """x + y on the extended reals; ``default`` where it is inf-inf (those results are NaN and
    are carried by the NaN flag, the bound must stay conservative)."""
    s = x + y
    return default if s != s else s


def _product(x: float, y: float) -> float:
    """x * y with 0 * inf taken as 0: interval ends, the NaN itself is flagged separately."""
    if x == 0 or y == 0:
        return 0.0
    return x * y


def _lift(fn, x: float) -> float:
    try:
        return fn(x)
    except OverflowError:
        return INF


def add(a: Span, b: Span) -> Span:
    if a.empty or b.empty:
        return Span(INF, -INF, a.nan or b.nan)
    nan = a.nan or b.nan or (a.hi == INF and b.lo == -INF) or (a.lo == -INF and b.hi == INF)
    return Span(_sum(a.lo, b.lo, -INF), _sum(a.hi, b.hi, INF), nan)


def negate(a: Span) -> Span:
    return Span(-a.hi, -a.lo, a.nan)


def mul(a: Span, b: Span) -> Span:
    if a.empty or b.empty:
        return Span(INF, -INF, a.nan or b.nan)
    nan = (a.nan or b.nan or (a.contains_zero() and b.has_inf())
           or (b.contains_zero() and a.has_inf()))
    ends = [_product(x, y) for x in (a.lo, a.hi) for y in (b.lo, b.hi)]
    return Span(min(ends), max(ends), nan)


def div(a: Span, b: Span) -> Span:
    if a.empty or b.empty:
        return Span(INF, -INF, a.nan or b.nan)
    nan = (a.nan or b.nan or (a.contains_zero() and b.contains_zero())
           or (a.has_inf() and b.has_inf()))
    if b.contains_zero():
        return Span(-INF, INF, nan)  # x/±0 is ±inf, the sign of a zero is not tracked
    reciprocal = Span(1 / b.hi if b.hi != INF and b.hi != -INF else 0.0,
                      1 / b.lo if b.lo != INF and b.lo != -INF else 0.0)
    q = mul(a, reciprocal)
    return Span(q.lo, q.hi, nan or q.nan)


def power(a: Span, b: Span, exponent: float | None = None) -> Span:
    """C99 pow, as TVM lowers ``**`` for floats; ``exponent`` is the exact value of a literal
    exponent (its span is widened by rounding)."""
    if a.empty or b.empty:
        return Span(INF, -INF, a.nan or b.nan)
    if exponent is not None and math.isfinite(exponent):
        k = exponent
        if k == 0:
            return point(1.0)  # pow(x, 0) is 1 for every x, NaN included
        if k == int(k) and abs(k) <= 64 and k > 0:
            n = int(k)
            big = max(abs(a.lo), abs(a.hi))
            if n % 2 == 0:
                small = 0.0 if a.contains_zero() else min(abs(a.lo), abs(a.hi))
                return Span(_lift(lambda v: v ** n, small), _lift(lambda v: v ** n, big), a.nan)
            return Span(_odd_power(a.lo, n), _odd_power(a.hi, n), a.nan)
        if a.lo >= 0:  # x**k for x >= 0 is monotone in x
            ends = sorted(_lift(lambda v: math.pow(v, k), x) if not (x == 0 and k < 0) else INF
                          for x in (a.lo, a.hi))
            return Span(ends[0], ends[1], a.nan)
    if a.lo >= 0:
        return Span(0.0, INF, True)
    return ANY


def _odd_power(x: float, n: int) -> float:
    if math.isinf(x):
        return x
    return math.copysign(_lift(lambda v: v ** n, abs(x)), x)


def unary(fn: str, a: Span) -> Span:
    if a.empty:
        return a
    if fn == "exp":
        return Span(_lift(math.exp, a.lo), _lift(math.exp, a.hi), a.nan)
    if fn == "erf":
        return Span(math.erf(a.lo), math.erf(a.hi), a.nan)
    if fn == "abs":
        low = 0.0 if a.contains_zero() else min(abs(a.lo), abs(a.hi))
        return Span(low, max(abs(a.lo), abs(a.hi)), a.nan)
    if fn in ("log", "sqrt"):
        nan = a.nan or a.lo < 0
        if a.hi < 0:
            return Span(INF, -INF, True)
        lo = max(a.lo, 0.0)
        if fn == "sqrt":
            return Span(math.sqrt(lo), math.sqrt(a.hi) if a.hi != INF else INF, nan)
        return Span(math.log(lo) if lo > 0 else -INF, math.log(a.hi) if a.hi != INF else INF,
                    nan)
    raise ValueError(fn)


def extremum(fn: str, a: Span, b: Span) -> Span:
    """max/min as lowered: NaN in either operand gives NaN."""
    if a.empty or b.empty:
        return Span(INF, -INF, a.nan or b.nan)
    pick = max if fn == "max" else min
    return Span(pick(a.lo, b.lo), pick(a.hi, b.hi), a.nan or b.nan)


# ---------------------------------------------------------------- expressions

CONDITION_SPAN = Span(0.0, 1.0)


def _literal_value(e) -> float | None:
    """The exact value of a literal (or a negated literal), else None."""
    if isinstance(e, Num):
        return float(e.text)
    if isinstance(e, Neg) and isinstance(e.operand, Num):
        return -float(e.operand.text)
    return None


class Evaluator:
    """Spans of the sub-expressions of one equation, given tensor spans and loop ranges.

    ``record`` is called with every sub-expression and its span."""

    def __init__(self, tensors: dict[str, Span], loops: dict[str, tuple[int, int]],
                 fmt: FloatFormat, record=None):
        self.tensors, self.loops, self.fmt, self.record = tensors, loops, fmt, record

    def __call__(self, e) -> Span:
        s = self.fmt.fit(self._span(e))
        if self.record is not None:
            self.record(e, s)
        return s

    def _span(self, e) -> Span:
        if isinstance(e, Num):
            return point(float(e.text))
        if isinstance(e, Var):
            return self.tensors.get(e.name, ANY)
        if isinstance(e, Idx):
            lo, hi = self.loops.get(e.name, (-INF, INF))
            return Span(float(lo), float(hi))
        if isinstance(e, Neg):
            return negate(self(e.operand))
        if isinstance(e, Bin):
            a, b = self(e.lhs), self(e.rhs)
            if e.op == "+":
                return add(a, b)
            if e.op == "-":
                return add(a, negate(b))
            if e.op == "*":
                return mul(a, b)
            if e.op == "/":
                return div(a, b)
            return power(a, b, _literal_value(e.rhs))
        if isinstance(e, Call):
            if e.fn in ("max", "min"):
                return extremum(e.fn, self(e.args[0]), self(e.args[1]))
            return unary(e.fn, self(e.args[0]))
        if isinstance(e, IfThenElse):
            self(e.cond)
            return join(self(e.then), self(e.otherwise))
        if isinstance(e, (Compare, Logic)):
            # a 0/1 value; the operands are evaluated only to record their spans (a rule never
            # rewrites inside a condition, so the dtype they are compared in does not matter)
            for operand in (e.operands if isinstance(e, Compare) else (e.lhs, e.rhs)):
                self(operand)
            return CONDITION_SPAN
        raise TypeError(f"not a value expression: {e!r}")



IDENTITY = {"+": 0.0, "-": 0.0, "*": 1.0, "max": -INF, "min": INF}


def _accumulate(op: str, start: Span, e: Span, count: int) -> Span:
    """What ``X`` may hold after ``X = X op e`` ran at most ``count`` times from ``start``."""
    if op in ("+", "-"):
        if op == "-":
            e = negate(e)
        total = Span(min(0.0, _product(count, e.lo)), max(0.0, _product(count, e.hi)),
                     e.nan or (e.lo == -INF and e.hi == INF))
        return join(start, add(start, total))
    if op == "*":
        if e.lo >= 0 and e.hi <= 1:
            factor = Span(0.0, 1.0, e.nan)
        elif e.lo >= -1 and e.hi <= 1:
            factor = Span(-1.0, 1.0, e.nan)
        elif e.lo >= 0:
            factor = Span(0.0, INF, e.nan or e.contains_zero())
        else:
            factor = ANY
        return join(start, mul(start, factor))
    return join(start, extremum(op, start, e))


@dataclass(frozen=True)
class RangeAnalysis:
    """Spans of every tensor, and of every value sub-expression (joined over occurrences)."""
    tensors: dict[str, Span]
    values: dict[Term, Span]
    formats: tuple[str, ...]  # float dtypes of the rewritable equations of the program


def _input_span(dtype: str) -> Span:
    if dtype in INTEGER_RANGES:
        lo, hi = INTEGER_RANGES[dtype]
        return Span(lo, hi)
    return ANY


def _stored(dtype: str, s: Span) -> Span:
    """A value as stored in a tensor of ``dtype``."""
    if dtype in INTEGER_RANGES:
        lo, hi = INTEGER_RANGES[dtype]
        return Span(lo, hi)
    return format_of(dtype).fit(s)


def _widen(old: Span, new: Span) -> Span:
    return Span(-INF if new.lo < old.lo else new.lo, INF if new.hi > old.hi else new.hi,
                new.nan)


@lru_cache(maxsize=64)
def analyse_ranges(program: Program) -> RangeAnalysis:
    """The range analysis of a program (see the module docstring)."""
    sig = program.signature
    sites = equation_sites(program.leir)
    tensors: dict[str, Span] = {spec.name: _input_span(spec.code) for spec in sig.inputs}
    inputs = set(tensors)
    writers: dict[str, int] = {}
    for site in sites:
        writers[site.equation.target.name] = writers.get(site.equation.target.name, 0) + 1
    for name in writers:
        tensors.setdefault(name, EMPTY)
    written_before = _written_before(sites)

    def equation_span(k: int, site, record=None) -> Span:
        eq = site.equation
        ev = Evaluator(tensors, site.loop_ranges, format_of(eq.target.dtype), record)
        op = accumulation_op(eq)
        if op is None:
            return ev(eq.value)
        e = ev(accumulated_operand(eq))
        if record is not None:
            ev(eq.value)  # record the spans of the whole right-hand side as well
        target = eq.target.name
        fresh = target not in written_before[k] and target not in inputs
        if fresh and writers[target] == 1:
            start = point(IDENTITY[op])
        elif fresh:
            start = join(point(IDENTITY[op]), tensors[target])
        else:
            start = tensors[target]
        count = math.prod(l.extent for l in site.loops)
        return _accumulate(op, start, e, count)

    changed = True
    for rounds in range(64):
        changed = False
        for k, site in enumerate(sites):
            target = site.equation.target
            old = tensors[target.name]
            new = join(old, _stored(target.dtype, equation_span(k, site)))
            if rounds >= 4 and not old.empty:
                new = _widen(old, new)
            if new != old:
                tensors[target.name] = new
                changed = True
        if not changed:
            break
    if changed:  # widening bounds every tensor's growth, so this is a guard, never expected
        tensors.update({name: ANY for name in writers})

    values: dict[Term, Span] = {}

    def record(e, s: Span):
        key = encode_value(e)
        values[key] = join(values[key], s) if key in values else s

    formats = set()
    for k, site in enumerate(sites):
        equation_span(k, site, record)
        if site.equation.target.dtype in REWRITABLE:
            formats.add(site.equation.target.dtype)
    return RangeAnalysis(dict(tensors), values, tuple(sorted(formats)))


def _written_before(sites) -> list[frozenset[str]]:
    out, seen = [], set()
    for site in sites:
        out.append(frozenset(seen))
        seen.add(site.equation.target.name)
    return out


# ---------------------------------------------------------------- where rules may rewrite

def _value_children(e) -> tuple:
    """Children of a value expression that are themselves values (not conditions)."""
    if isinstance(e, (Bin,)):
        return (e.lhs, e.rhs)
    if isinstance(e, Neg):
        return (e.operand,)
    if isinstance(e, Call):
        return e.args
    if isinstance(e, IfThenElse):
        return (e.then, e.otherwise)
    return ()


def _all_children(e) -> tuple:
    if isinstance(e, IfThenElse):
        return (e.cond, e.then, e.otherwise)
    if isinstance(e, Compare):
        return e.operands
    if isinstance(e, Logic):
        return (e.lhs, e.rhs)
    return _value_children(e)


def _subexpressions(e) -> Iterator:
    yield e
    for child in _all_children(e):
        yield from _subexpressions(child)


def _reads_own_element(eq: Equation) -> bool:
    return any(isinstance(x, Var) and x == eq.target for x in _subexpressions(eq.value))


@lru_cache(maxsize=64)
def rewrite_sites(program: Program) -> tuple[frozenset[Term], frozenset[Term]]:
    """``(sites, refused)``: the value sub-expressions every occurrence of which may be
    rewritten (see the module docstring), and those with an occurrence that may not."""
    ok: set[Term] = set()
    refused: set[Term] = set()
    sites = equation_sites(program.leir)
    written_before = _written_before(sites)
    inputs = set(program.signature.input_names)
    for k, site in enumerate(sites):
        eq = site.equation
        fresh = eq.target.name not in written_before[k] and eq.target.name not in inputs
        held: set[int] = set()  # ids of nodes refused because they decide the initialisation
        whole = False
        if eq.target.dtype not in REWRITABLE:
            whole = True
        elif fresh and _reads_own_element(eq):
            if accumulation_op(eq) is None:
                whole = True
            else:
                held.add(id(eq.value))
                held.update(id(c) for c in _all_children(eq.value) if c == eq.target)

        def visit(e, allowed: bool):
            key = encode_value(e)
            (ok if allowed and id(e) not in held else refused).add(key)
            for child in _value_children(e):
                visit(child, allowed)
            if isinstance(e, IfThenElse):
                for node in _subexpressions(e.cond):
                    refused.add(encode_value(node))
            elif isinstance(e, (Compare, Logic)):
                for child in _all_children(e):
                    for node in _subexpressions(child):
                        refused.add(encode_value(node))

        visit(eq.value, not whole)
    return frozenset(ok - refused), frozenset(refused)


# ---------------------------------------------------------------- facts

def _closed(term: Term) -> bool:
    """A constant expression: no tensor read, no index value."""
    if term[0] in ("Read", "Idx"):
        return False
    return all(_closed(a) for a in term[1:] if isinstance(a, tuple))


def _constant_span(term: Term, fmt: FloatFormat) -> Span:
    return Evaluator({}, {}, fmt)(decode(term))


def natural_literal(text: str) -> bool:
    """A literal whose value is a whole number 0..64 (``2``, ``3.0``): ``x**m*x**n`` is
    ``x**(m+n)`` for every x when m and n are such numbers."""
    try:
        value = float(text)
    except ValueError:
        return False
    return value == int(value) and 0 <= value <= 64 if math.isfinite(value) else False



def _site_facts(loaded: LoadedProgram) -> Iterable[str]:
    sites, _ = rewrite_sites(loaded.program)
    for term in sorted(sites, key=to_egglog):
        yield f"(MathSite {to_egglog(term)})"


def _range_facts(loaded: LoadedProgram) -> Iterable[str]:
    analysis = analyse_ranges(loaded.program)
    formats = [FORMATS[d] for d in analysis.formats]
    naturals = set()
    for term, span in sorted(analysis.values.items(), key=lambda kv: to_egglog(kv[0])):
        text = to_egglog(term)
        if span.empty:
            continue
        if span.finite:
            yield f"(MathFinite {text})"
        if span.nonzero:
            yield f"(MathNonZero {text})"
        if span.lo >= 0:
            yield f"(MathNonNegative {text})"
        if span.lo > 0:
            yield f"(MathPositive {text})"
        if span.hi < 0:
            yield f"(MathNegative {text})"
        if formats and all(-f.exp_arg <= span.lo and span.hi <= f.exp_arg for f in formats):
            yield f"(MathExpArg {text})"
        if term[0] == "Num" and natural_literal(term[1]):
            naturals.add(term[1])
        if _closed(term) and formats:
            spans = [_constant_span(term, f) for f in formats]
            if all(s.finite and not s.nan for s in spans):
                yield f"(MathConstTerm {text})"
                if all(s.nonzero for s in spans):
                    yield f"(MathConstFactor {text})"
    for text in sorted(naturals):
        yield f"(MathNatural {quoted(text)})"


FLOAT_ARITHMETIC = Guard(
    "float_arithmetic",
    "Extra soundness guard (not one of the paper's nine): every occurrence of the rewritten "
    "sub-expression is computed in f32, f64 or bf16 value arithmetic -- not in an equation "
    "with an integer, bool (truncating division) or f16 target (overflow above 65504), not "
    "inside a condition (compared in its operands' own dtype, flipped by rounding), and not "
    "the right-hand side or self-read of an accumulation X=X op e that may start from its "
    "implicit initial value (docs/LEIR.md section 3).",
    "the sub-expression is computed in integer or f16 arithmetic, inside a condition, or "
    "decides an accumulation's implicit initialisation",
    relations=(Relation("MathSite", ("Expr",),
                        "{0} is computed in float value arithmetic wherever it occurs, outside "
                        "conditions and accumulation forms"),),
    facts=_site_facts)

OPERAND_RANGE = Guard(
    "operand_range",
    "Extra soundness guard (not one of the paper's nine): a range analysis over the extended "
    "reals (inputs may hold any value, ±inf and NaN included; overflow and underflow of the "
    "dtype included) proves what the identity needs of its operands: finite, non-zero, "
    "non-negative, of one sign, small enough for exp, or a constant factor.",
    "an operand may be infinite, zero, negative, NaN or too large, where the identity would "
    "put NaN or inf where the program had none, or remove them",
    relations=(
        Relation("MathFinite", ("Expr",), "{0} is never infinite"),
        Relation("MathNonZero", ("Expr",), "{0} is never zero"),
        Relation("MathNonNegative", ("Expr",), "{0} is never negative"),
        Relation("MathPositive", ("Expr",), "{0} is always positive (or NaN)"),
        Relation("MathNegative", ("Expr",), "{0} is always negative (or NaN)"),
        Relation("MathExpArg", ("Expr",),
                 "{0} is small enough in magnitude that exp of it never overflows or "
                 "underflows"),
        Relation("MathConstTerm", ("Expr",), "{0} is a finite constant, never NaN"),
        Relation("MathConstFactor", ("Expr",), "{0} is a finite non-zero constant, never NaN"),
        Relation("MathNatural", ("String",), "{0} is a whole number from 0 to 64"),
    ),
    facts=_range_facts)

GUARD_EXTENSIONS = (
    GuardExtension(guard=FLOAT_ARITHMETIC.name, new_guard=FLOAT_ARITHMETIC),
    GuardExtension(guard=OPERAND_RANGE.name, new_guard=OPERAND_RANGE),
)
