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

``operand_range`` -- the value-range analysis of leir/ranges.py in its ``FLOAT`` domain: for
every tensor and sub-expression an interval over the extended reals plus a may-be-NaN flag, from
the inputs (any value, ±inf and NaN included; integer tensors their dtype's range) through every
equation to a fixpoint, widened for the rounding, overflow and underflow of each equation's
dtype, so a fact claimed for a value holds for the value the program computes. A sub-expression's
span covers every occurrence of it (a read inside the nest that writes the tensor included:
partial reductions and implicit initial values). From the spans: ``MathFinite`` (never ±inf),
``MathAboveNegInf`` (never -inf), ``MathNonZero``, ``MathNonNegative``, ``MathPositive``,
``MathNegative`` (NaN allowed in all six), ``MathExpArg`` (small enough that exp of it, of a sum or difference of two such, is a
normal number), ``MathConstFactor`` / ``MathConstTerm`` (closed constant expressions --
literals and intrinsics, no tensor and no index -- that are finite, never NaN, and non-zero for
a factor, in every float dtype of the program), ``MathNatural`` (literal texts of small
non-negative integers, exponents ``x**m`` may add), ``MathPowerOfTwo`` (a literal ``±2**k``,
a normal number in every float dtype of the program: scaling by it is exact) and
``MathTermsApart`` (a sum of terms of one sign, or a difference of terms of opposite signs:
it cannot cancel, so a factor distributed over it rounds at the scale of its result).

Everything here is a pure function of the program.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable

from ...leir.analysis import accumulation_op, equation_sites
from ...leir.ast import (Bin, Call, Compare, Equation, IfThenElse, Logic, Neg, Var)
from ...leir.program import Program
from ...leir.ranges import (FLOAT, FORMATS, Evaluator, Span, analyse, join, literal_value,
                            power_of_two, terms_apart, written_before)
from ...leir.traverse import value_children, walk_values
from ..encoding import Term, decode, encode_value, to_egglog
from ..facts import Fact, Relation
from ..guards import Guard, GuardExtension
from ..loaded import LoadedProgram

# The dtypes whose equations the math rules rewrite (see the module docstring for f16).
REWRITABLE = ("f32", "f64", "bf16")


@dataclass(frozen=True)
class RangeAnalysis:
    """Spans of every tensor, and of every value sub-expression (joined over occurrences)."""
    tensors: dict[str, Span]
    values: dict[Term, Span]
    formats: tuple[str, ...]  # float dtypes of the rewritable equations of the program


@lru_cache(maxsize=64)
def analyse_ranges(program: Program) -> RangeAnalysis:
    """The range analysis of a program in the FLOAT domain (leir.ranges), keyed by term."""
    ranges = analyse(program, FLOAT)
    values: dict[Term, Span] = {}
    for node, span in ranges.values.items():
        key = encode_value(node)
        values[key] = join(values[key], span) if key in values else span
    formats = {site.equation.target.dtype for site in equation_sites(program.leir)
               if site.equation.target.dtype in REWRITABLE}
    return RangeAnalysis(dict(ranges.held), values, tuple(sorted(formats)))


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


def _reads_own_element(eq: Equation) -> bool:
    return any(isinstance(x, Var) and x == eq.target for x in walk_values(eq.value))


@lru_cache(maxsize=64)
def rewrite_sites(program: Program) -> tuple[frozenset[Term], frozenset[Term]]:
    """``(sites, refused)``: the value sub-expressions every occurrence of which may be
    rewritten (see the module docstring), and those with an occurrence that may not."""
    ok: set[Term] = set()
    refused: set[Term] = set()
    sites = equation_sites(program.leir)
    earlier = written_before(sites)
    inputs = set(program.signature.input_names)
    for k, site in enumerate(sites):
        eq = site.equation
        fresh = eq.target.name not in earlier[k] and eq.target.name not in inputs
        held: set[int] = set()  # ids of nodes refused because they decide the initialisation
        whole = False
        if eq.target.dtype not in REWRITABLE:
            whole = True
        elif fresh and _reads_own_element(eq):
            if accumulation_op(eq) is None:
                whole = True
            else:
                held.add(id(eq.value))
                held.update(id(c) for c in value_children(eq.value) if c == eq.target)

        def visit(e, allowed: bool):
            key = encode_value(e)
            (ok if allowed and id(e) not in held else refused).add(key)
            for child in _value_children(e):
                visit(child, allowed)
            if isinstance(e, IfThenElse):
                for node in walk_values(e.cond):
                    refused.add(encode_value(node))
            elif isinstance(e, (Compare, Logic)):
                for child in value_children(e):
                    for node in walk_values(child):
                        refused.add(encode_value(node))

        visit(eq.value, not whole)
    return frozenset(ok - refused), frozenset(refused)


# ---------------------------------------------------------------- facts

def _closed(term: Term) -> bool:
    """A constant expression: no tensor read, no index value."""
    if term[0] in ("Read", "Idx"):
        return False
    return all(_closed(a) for a in term[1:] if isinstance(a, tuple))


def _constant_span(term: Term, dtype: str) -> Span:
    return Evaluator({}, {}, FLOAT, dtype)(decode(term))


def natural_literal(text: str) -> bool:
    """A literal whose value is a whole number 0..64 (``2``, ``3.0``): ``x**m*x**n`` is
    ``x**(m+n)`` for every x when m and n are such numbers."""
    try:
        value = float(text)
    except ValueError:
        return False
    return value == int(value) and 0 <= value <= 64 if math.isfinite(value) else False



def _signs(s: Span) -> tuple[bool, bool]:
    return s.nonnegative, s.nonpositive


def _power_of_two(term: Term, formats) -> bool:
    """A literal (or negated literal) ``±2**k`` that is a normal number in every float format
    of the program: multiplying or dividing a value by it is exact short of overflow or a
    subnormal result."""
    if term[0] not in ("Num", "Neg") or not formats:
        return False
    try:
        value = literal_value(decode(term))
    except ValueError:
        return False
    return power_of_two(value) and all(
        f.smallest_normal <= abs(value) <= f.largest for f in formats)


def _site_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    sites, _ = rewrite_sites(loaded.program)
    for term in sorted(sites, key=to_egglog):
        yield MATH_SITE(term)


def _range_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    analysis = analyse_ranges(loaded.program)
    formats = [FORMATS[d] for d in analysis.formats]
    naturals = set()
    for term, span in sorted(analysis.values.items(), key=lambda kv: to_egglog(kv[0])):
        if span.empty:
            continue
        if span.finite:
            yield MATH_FINITE(term)
        if not span.empty and (span.lo > -math.inf or span.lo_open):
            yield MATH_ABOVE_NEG_INF(term)
        if span.nonzero:
            yield MATH_NON_ZERO(term)
        if span.nonnegative:
            yield MATH_NON_NEGATIVE(term)
        if span.positive:
            yield MATH_POSITIVE(term)
        if span.negative:
            yield MATH_NEGATIVE(term)
        if formats and all(-f.exp_arg <= span.lo and span.hi <= f.exp_arg for f in formats):
            yield MATH_EXP_ARG(term)
        if term[0] == "Num" and natural_literal(term[1]):
            naturals.add(term[1])
        if _power_of_two(term, formats):
            yield MATH_POWER_OF_TWO(term)
        if term[0] in ("Add", "Sub") and all(a in analysis.values for a in term[1:]):
            left, right = (analysis.values[a] for a in term[1:])
            if terms_apart("+" if term[0] == "Add" else "-", _signs(left), _signs(right)):
                yield MATH_TERMS_APART(term)
        if _closed(term) and formats:
            spans = [_constant_span(term, d) for d in analysis.formats]
            if all(s.finite and not s.nan for s in spans):
                yield MATH_CONST_TERM(term)
                if all(s.nonzero for s in spans):
                    yield MATH_CONST_FACTOR(term)
    for text in sorted(naturals):
        yield MATH_NATURAL(text)
    yield from _created_facts(analysis)


# ---------------------------------------------------------------- what a rewrite creates

def _largest_finite(s: Span, clip: float) -> float:
    """The largest magnitude of a finite value of ``s`` (``clip``: the dtype's largest, for a
    span reaching ±inf)."""
    lo, hi = max(s.lo, -clip), min(s.hi, clip)
    return max(abs(lo), abs(hi))


def _smallest_nonzero(s: Span) -> float:
    """The smallest magnitude of a value of ``s`` (0 when it may be zero or come arbitrarily
    close to it)."""
    if s.positive:
        return max(s.lo, 0.0)
    if s.negative:
        return max(-s.hi, 0.0)
    return 0.0


def _log_sign(s: Span) -> int:
    """1 when ``log`` of every value of ``s`` is >= 0 (every value >= 1), -1 when it is <= 0
    (every value in [0, 1]), else 0."""
    if s.lo >= 1:
        return 1
    if s.lo >= 0 and s.hi <= 1:
        return -1
    return 0


def _bounds(analysis: RangeAnalysis):
    """(clip, overflow, normal): the largest finite value any float dtype of the program
    holds (to bound what an infinite span's finite values reach), the smallest largest value
    (what a created intermediate must stay within) and the largest smallest normal number."""
    formats = [FORMATS[d] for d in analysis.formats or ("f64",)]  # integers compute in f64
    return (max(f.largest for f in formats), min(f.largest for f in formats),
            max(f.smallest_normal for f in formats))


def _created_facts(analysis: RangeAnalysis) -> Iterable[Fact]:
    """Facts bounding the intermediates a rewrite creates or removes, for finite operands
    (the existing guards already settle ±inf, NaN and zero): every shape the math rules
    rewrite, over the spans of its operands, so that a rule can require that no intermediate
    of either side overflows (or, under a logarithm, underflows) where the other does not."""
    clip, top, normal = _bounds(analysis)
    values = analysis.values

    def big(t):
        return _largest_finite(values[t], clip) if t in values else math.inf

    def small(t):
        return _smallest_nonzero(values[t]) if t in values else 0.0

    def quotients(a, b, c) -> bool:   # a/c, b/c, a±b, (a±b)/c
        total = big(a) + big(b)
        return small(c) > 0 and total <= top and total / small(c) <= top

    def products(a, b, c) -> bool:    # b±c, a*b, a*c, a*(b±c), a*b±a*c
        total = big(b) + big(c)
        return total <= top and big(a) * total <= top

    def whole(a, b, c) -> bool:       # a*c, a*c+b, b/c, a+b/c
        return (small(c) > 0 and big(a) * big(c) + big(b) <= top
                and big(a) + big(b) / small(c) <= top)

    def log_split_normal(op, a, b) -> Fact | None:   # a*b (op Mul) or a/b (op Div) normal
        ok = small(a) > 0 and small(b) > 0 and (
            big(a) * big(b) <= top and small(a) * small(b) >= normal if op == "Mul"
            else big(a) / small(b) <= top and small(a) / big(b) >= normal)
        if not ok:
            return None
        return (MATH_PRODUCT_NORMAL if op == "Mul" else MATH_QUOTIENT_NORMAL)(a, b)

    def logs_apart(op, a, b) -> list[Fact]:   # log(a)±log(b) cannot cancel
        if a not in values or b not in values:
            return []
        sa, sb = _log_sign(values[a]), _log_sign(values[b])
        return [MATH_LOGS_APART(a, b)] if sa and sb and (sa == sb) == (op == "Mul") else []

    out: dict[Fact, None] = {}   # in the order found: deterministic, no duplicates
    factors = [t for t in values if _closed(t) and values[t].real and values[t].nonzero]
    for term in values:
        head, args = term[0], term[1:]
        if head in ("Add", "Sub") and all(isinstance(a, tuple) for a in args):
            (x, y) = args
            if x[0] == "Div" and y[0] == "Div" and x[2] == y[2] and quotients(x[1], y[1], x[2]):
                out[MATH_QUOTIENTS_IN_RANGE(x[1], y[1], x[2])] = None
            if head == "Add" and y[0] == "Div" and whole(x, y[1], y[2]):
                out[MATH_WHOLE_IN_RANGE(x, y[1], y[2])] = None
            if x[0] == "Log" and y[0] == "Log":   # logsimp: log(a)±log(b) -> log(a*b), log(a/b)
                op = "Mul" if head == "Add" else "Div"
                fact = log_split_normal(op, x[1], y[1])
                if fact is not None:
                    out[fact] = None
                out.update(dict.fromkeys(logs_apart(op, x[1], y[1])))
        if head == "Log" and isinstance(args[0], tuple) and args[0][0] in ("Mul", "Div"):
            # expand_log: log(a*b) -> log(a)+log(b), log(a/b) -> log(a)-log(b)
            op, a, b = args[0]
            fact = log_split_normal(op, a, b)
            if fact is not None:
                out[fact] = None
            out.update(dict.fromkeys(logs_apart(op, a, b)))
        if head == "Mul" and all(isinstance(a, tuple) for a in args):
            # a*(b±c) -> a*b±a*c (expand_factorization), (b±c)*a -> b*a±c*a (expand_collect)
            for a, s in (args, args[::-1]):
                if s[0] in ("Add", "Sub") and products(a, s[1], s[2]):
                    out[MATH_PRODUCTS_IN_RANGE(a, s[1], s[2])] = None
        if head == "Div" and isinstance(args[0], tuple):
            inner, c = args
            if inner[0] in ("Add", "Sub") and quotients(inner[1], inner[2], c):
                out[MATH_QUOTIENTS_IN_RANGE(inner[1], inner[2], c)] = None
            if inner[0] == "Add" and inner[1][0] == "Mul" and inner[1][2] == c and \
                    whole(inner[1][1], inner[2], c):
                out[MATH_WHOLE_IN_RANGE(inner[1][1], inner[2], c)] = None
            if inner[0] == "Mul" and inner[2] == c and big(inner[1]) * big(c) <= top:
                out[MATH_SCALE_IN_RANGE(inner[1], c)] = None
        if head in ("Num", "Idx") or _closed(term):
            continue
        for b in factors:   # a -> (a*b)/b
            if big(term) * big(b) <= top:
                out[MATH_SCALE_IN_RANGE(term, b)] = None
    yield from out


MATH_SITE = Relation(
    "MathSite", ("Expr",),
    "{0} is computed in float value arithmetic wherever it occurs, outside "
    "conditions and accumulation forms")

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
    relations=(MATH_SITE,),
    facts=_site_facts)

MATH_FINITE = Relation("MathFinite", ("Expr",), "{0} is never infinite")
MATH_ABOVE_NEG_INF = Relation("MathAboveNegInf", ("Expr",), "{0} is never -inf")
MATH_NON_ZERO = Relation("MathNonZero", ("Expr",), "{0} is never zero")
MATH_NON_NEGATIVE = Relation("MathNonNegative", ("Expr",), "{0} is never negative")
MATH_POSITIVE = Relation("MathPositive", ("Expr",), "{0} is always positive (or NaN)")
MATH_NEGATIVE = Relation("MathNegative", ("Expr",), "{0} is always negative (or NaN)")
MATH_EXP_ARG = Relation(
    "MathExpArg", ("Expr",),
    "{0} is small enough in magnitude that exp of it never overflows or "
    "underflows")
MATH_CONST_TERM = Relation("MathConstTerm", ("Expr",), "{0} is a finite constant, never NaN")
MATH_CONST_FACTOR = Relation(
    "MathConstFactor", ("Expr",), "{0} is a finite non-zero constant, never NaN")
MATH_NATURAL = Relation("MathNatural", ("String",), "{0} is a whole number from 0 to 64")
MATH_SCALE_IN_RANGE = Relation(
    "MathScaleInRange", ("Expr", "Expr"), "{0}*{1} never overflows for a finite {0}")
MATH_QUOTIENTS_IN_RANGE = Relation(
    "MathQuotientsInRange", ("Expr", "Expr", "Expr"),
    "for finite {0} and {1}, neither {0}±{1} nor {0}/{2}, {1}/{2} or their sum overflows")
MATH_PRODUCTS_IN_RANGE = Relation(
    "MathProductsInRange", ("Expr", "Expr", "Expr"),
    "for finite {0}, {1} and {2}, neither {1}±{2} nor {0}*{1}, {0}*{2} or their sum overflows")
MATH_POWER_OF_TWO = Relation(
    "MathPowerOfTwo", ("Expr",),
    "{0} is a power of two, so multiplying or dividing by it is exact (short of overflow)")
MATH_TERMS_APART = Relation(
    "MathTermsApart", ("Expr",),
    "the terms of {0} cannot cancel: of one sign where they are added, of opposite signs "
    "where one is subtracted, so {0} is at least as large as either term")
MATH_WHOLE_IN_RANGE = Relation(
    "MathWholeInRange", ("Expr", "Expr", "Expr"),
    "for finite {0} and {1}, neither {0}*{2}+{1} nor {0}+{1}/{2} overflows")
MATH_PRODUCT_NORMAL = Relation(
    "MathProductNormal", ("Expr", "Expr"),
    "{0}*{1} is a normal number (no overflow, no underflow) for finite {0} and {1}")
MATH_QUOTIENT_NORMAL = Relation(
    "MathQuotientNormal", ("Expr", "Expr"),
    "{0}/{1} is a normal number (no overflow, no underflow) for finite {0} and {1}")
MATH_LOGS_APART = Relation(
    "MathLogsApart", ("Expr", "Expr"),
    "log({0}) and log({1}) cannot cancel: of one sign where they are added, of opposite "
    "signs where one is subtracted from the other, so splitting or combining the logarithm "
    "keeps the digits of the result")

OPERAND_RANGE = Guard(
    "operand_range",
    "Extra soundness guard (not one of the paper's nine): a range analysis over the extended "
    "reals (inputs may hold any value, ±inf and NaN included; overflow and underflow of the "
    "dtype included) proves what the identity needs of its operands: finite, non-zero, "
    "non-negative, of one sign, small enough for exp, or a constant factor; and what its "
    "rewrite creates: no intermediate that overflows where the other side's does not, no "
    "factor distributed over terms that may cancel unless it is a power of two.",
    "an operand may be infinite, zero, negative, NaN or too large, where the identity would "
    "put NaN or inf where the program had none, or remove them; or the terms a factor would "
    "be distributed over may cancel, where the products would round at the scale of the "
    "terms rather than of their small sum",
    relations=(
        MATH_FINITE,
        MATH_ABOVE_NEG_INF,
        MATH_NON_ZERO,
        MATH_NON_NEGATIVE,
        MATH_POSITIVE,
        MATH_NEGATIVE,
        MATH_EXP_ARG,
        MATH_CONST_TERM,
        MATH_CONST_FACTOR,
        MATH_NATURAL,
        MATH_SCALE_IN_RANGE,
        MATH_QUOTIENTS_IN_RANGE,
        MATH_PRODUCTS_IN_RANGE,
        MATH_WHOLE_IN_RANGE,
        MATH_PRODUCT_NORMAL,
        MATH_QUOTIENT_NORMAL,
        MATH_LOGS_APART,
        MATH_POWER_OF_TWO,
        MATH_TERMS_APART,
    ),
    facts=_range_facts)

GUARD_EXTENSIONS = (
    GuardExtension(guard=FLOAT_ARITHMETIC.name, new_guard=FLOAT_ARITHMETIC),
    GuardExtension(guard=OPERAND_RANGE.name, new_guard=OPERAND_RANGE),
)
