"""Value ranges: the one analysis of what every value of a LEIR program may be.

Every soundness guard that depends on values reads this module: the ``operand_range`` facts of
the algebraic math strategies (``MathFinite``, ``MathNonNegative``, ... in
``egraph/extensions/math_ranges.py``) and the ``finite_operand`` facts of the value splits
(``FiniteOperand``, ``NonZeroOperand``, ``ScalableOperand`` in
``egraph/extensions/memory_splits.py`` and ``neighbour_splits.py``). The egglog facts are
emitted there; this module is pure and knows nothing of egglog.

**A range** is a :class:`Span`: an interval ``[lo, hi]`` of the extended reals whose ends are
closed (the value may be that end, ``±inf`` included) or open (it never is: an open ``0`` end
means "never zero", an open ``inf`` end "finite, but without a bound"), plus a flag saying
whether the value may be NaN; an empty interval with the flag is a value that is always NaN.
Comparisons are IEEE comparisons: ``-0`` counts as ``0`` (the sign of a zero is not tracked),
so a non-negative value may be ``-0``.

**The contract is a domain**, an explicit argument of :func:`analyse`: a fact the analysis
gives holds for every input the domain allows.

* :data:`FLOAT` -- every element of a float input may be any value of its dtype, ``±inf`` and
  NaN included; integer and bool inputs hold any value of their dtype. Values are computed in
  floating point: each operation is evaluated exactly on the interval ends, then
  :meth:`FloatFormat.fit` widens the result for the equation's dtype -- rounding (8 units in
  the last place), overflow (a bound beyond a quarter of the largest value becomes infinite),
  underflow (a bound nearer to zero than four times the smallest normal becomes zero) -- and
  closes every end (rounding may reach it). So a fact holds for the value the program
  computes, bit-level special values included. The algebraic math strategies use it: their
  identities must hold for every input a caller may pass, and are only rewrites where they do.
* :data:`FINITE` -- every element of every input is a finite number, and values are the exact
  real numbers the program's expressions denote (rounding, overflow and underflow are not
  modelled). A fact holds for that real value. Values are tracked up to their sign class
  (:func:`sign_class`: a positive, non-negative, negative or any finite number, or unknown),
  whose ends -- 0 and ±inf -- every operation computes without rounding. The value splits use
  it: they rewrite ``x`` as ``(x-m)+m`` or ``(x/m)*m`` and ``exp(a)`` as ``exp(a-m)*exp(m)``,
  identities of real numbers whenever ``m`` is finite (and non-zero where it divides), so on
  finite inputs the rewritten program computes the same real function and agrees with the
  original up to rounding (the Equal level's tolerance). They need the stronger assumption:
  under ``FLOAT`` no value read from an input is ever finite, so nothing could be split. (With
  finite bounds instead of sign classes the splits would know more -- a clamped value, a
  sigmoid, a divisor made of loop indices -- at the price of rounding every bound outward; not
  done, and it would add transitions.)

**Two views of a tensor.** :func:`analyse` gives, per tensor, ``held`` -- every value it holds
at any moment (partial reductions and the implicit initial value of an accumulation included),
a flow-insensitive fixpoint over all equations -- and ``after`` -- every value a nest that does
not write it can read: the tensor once each nest writing it has completed (an implicitly
initialised reduction has had at least one update per element by then, so ``max(D, A)`` no
longer holds the initial ``-inf`` unless its write leaves elements out), computed in one pass
in program order. A fact keyed by a term alone (``MathFinite e``: the same read may also occur
inside the nest that writes the tensor) must use ``held``; a fact keyed by a nest and a term
(``FiniteOperand n m``) uses ``after``, with a tensor the nest itself writes unknown.
``values`` gives the span of every value sub-expression, joined over its occurrences, from the
``held`` spans of what it reads.

Everything here is a pure function of the program.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache
from typing import Mapping

from .analysis import accumulated_operand, accumulation_op, equation_sites, intermediate_shapes
from .ast import Bin, Call, Compare, Expr, Idx, IfThenElse, Logic, Neg, Num, Var
from .memory import covers_shape
from .program import Program

INF = math.inf


# ---------------------------------------------------------------- spans

@dataclass(frozen=True)
class Span:
    """The values an expression may take: ``[lo, hi]`` over the extended reals, each end closed
    unless marked open, plus whether it may be NaN (see the module docstring)."""
    lo: float
    hi: float
    nan: bool = False
    lo_open: bool = False
    hi_open: bool = False

    @property
    def empty(self) -> bool:
        return self.lo > self.hi or (self.lo == self.hi and (self.lo_open or self.hi_open))

    @property
    def finite(self) -> bool:
        """Never ±inf (NaN allowed)."""
        return (not self.empty and (self.lo > -INF or self.lo_open)
                and (self.hi < INF or self.hi_open))

    @property
    def real(self) -> bool:
        """Always a finite number: never ±inf and never NaN."""
        return self.finite and not self.nan

    @property
    def nonzero(self) -> bool:
        """Never zero (NaN allowed)."""
        return not self.empty and (self.positive or self.negative)

    @property
    def nonnegative(self) -> bool:
        """Never below zero (NaN allowed)."""
        return not self.empty and self.lo >= 0

    @property
    def positive(self) -> bool:
        """Always above zero (NaN allowed)."""
        return not self.empty and (self.lo > 0 or (self.lo == 0 and self.lo_open))

    @property
    def negative(self) -> bool:
        """Always below zero (NaN allowed)."""
        return not self.empty and (self.hi < 0 or (self.hi == 0 and self.hi_open))

    @property
    def nonpositive(self) -> bool:
        """Never above zero (NaN allowed)."""
        return not self.empty and self.hi <= 0

    def contains_zero(self) -> bool:
        return not self.empty and not self.nonzero and self.lo <= 0 <= self.hi

    def has_inf(self) -> bool:
        """May be +inf or -inf."""
        return not self.empty and not self.finite

    def closed(self) -> "Span":
        return replace(self, lo_open=False, hi_open=False)


EMPTY = Span(INF, -INF)
ANY = Span(-INF, INF, True)
REALS = Span(-INF, INF, False, True, True)  # any finite number
CONDITION_SPAN = Span(0.0, 1.0)


def point(value: float) -> Span:
    return Span(value, value)


def _lower(a: tuple[float, bool], b: tuple[float, bool], tie_open) -> tuple[float, bool]:
    """The smaller of two ends ``(value, open)``; ``tie_open`` combines the flags of equal
    values."""
    if a[0] != b[0]:
        return min(a, b)
    return a[0], tie_open(a[1], b[1])


def _upper(a: tuple[float, bool], b: tuple[float, bool], tie_open) -> tuple[float, bool]:
    if a[0] != b[0]:
        return max(a, b)
    return a[0], tie_open(a[1], b[1])


def _and(x: bool, y: bool) -> bool:
    return x and y


def _or(x: bool, y: bool) -> bool:
    return x or y


def _make(lo: tuple[float, bool], hi: tuple[float, bool], nan: bool) -> Span:
    return Span(lo[0], hi[0], nan, lo[1], hi[1])


def join(a: Span, b: Span) -> Span:
    """Every value of either."""
    if a.empty:
        return replace(b, nan=a.nan or b.nan)
    if b.empty:
        return replace(a, nan=a.nan or b.nan)
    return _make(_lower((a.lo, a.lo_open), (b.lo, b.lo_open), _and),
                 _upper((a.hi, a.hi_open), (b.hi, b.hi_open), _and), a.nan or b.nan)


def _none(a: Span, b: Span) -> Span:
    return Span(INF, -INF, a.nan or b.nan)


# ---------------------------------------------------------------- float formats

@dataclass(frozen=True)
class FloatFormat:
    """What the range analysis needs of a float dtype."""
    largest: float
    smallest_normal: float
    epsilon: float
    exp_arg: float  # |x| <= exp_arg keeps exp(x), exp(x)*exp(y) and exp(x)/exp(y) normal

    def fit(self, s: Span) -> Span:
        """Widen a span exactly computed on its ends to cover the dtype's rounding, overflow
        and underflow; every end becomes closed (rounding may reach it)."""
        if s.empty:
            return s.closed()
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
# Integer (and bool) dtypes: a stored value is bounded by the dtype (a float converted to an
# integer type is some integer of it); right-hand sides are evaluated like float values.
INTEGER_RANGES = {
    "i8": (-2.0 ** 7, 2.0 ** 7 - 1), "i16": (-2.0 ** 15, 2.0 ** 15 - 1),
    "i32": (-2.0 ** 31, 2.0 ** 31 - 1), "i64": (-2.0 ** 63, 2.0 ** 63 - 1),
    "u8": (0.0, 2.0 ** 8 - 1), "u16": (0.0, 2.0 ** 16 - 1), "u32": (0.0, 2.0 ** 32 - 1),
    "u64": (0.0, 2.0 ** 64 - 1), "bool": (0.0, 1.0),
}


def format_of(dtype: str) -> FloatFormat:
    """The float format an equation with a ``dtype`` target computes in (f64 for integers)."""
    return FORMATS.get(dtype, FORMATS["f64"])


# ---------------------------------------------------------------- domains

def sign_class(s: Span) -> Span:
    """The smallest sign class containing ``s``: a positive, non-negative, negative or any
    finite number, or anything (``ANY``) when ``s`` may be infinite or NaN."""
    if s.empty:
        return s
    if not s.real:
        return ANY
    if s.positive:
        return Span(0.0, INF, False, True, True)
    if s.nonnegative:
        return Span(0.0, INF, False, False, True)
    if s.negative:
        return Span(-INF, 0.0, False, True, True)
    return REALS


@dataclass(frozen=True)
class Domain:
    """What inputs may hold, how values are computed and how precisely they are tracked (see
    the module docstring)."""
    name: str
    finite_inputs: bool   # float inputs hold finite numbers only (else ±inf and NaN too)
    exact: bool           # exact real arithmetic (else the dtype's rounding, overflow, underflow)
    signs: bool = False   # track only the sign class of each value (sign_class), not its bounds

    def __post_init__(self):
        # Exact arithmetic is only implemented on sign classes: their ends (0, ±inf, and the 1
        # of exp(0) or erf(inf) on the way) are computed without rounding, where finite bounds
        # would need every operation rounded outward.
        if self.exact and not self.signs:
            raise ValueError("a domain with exact arithmetic tracks sign classes only")

    def input_span(self, dtype: str) -> Span:
        if dtype in INTEGER_RANGES:
            return self.fit(dtype, Span(*INTEGER_RANGES[dtype]))
        return REALS if self.finite_inputs else ANY

    def fit(self, dtype: str, s: Span) -> Span:
        """A span computed exactly on its ends, as the domain tracks the value of an equation
        with a ``dtype`` target: widened for the dtype's rounding (unless exact), and to its
        sign class (if signs)."""
        if not self.exact:
            s = format_of(dtype).fit(s)
        return sign_class(s) if self.signs else s

    def stored(self, dtype: str, s: Span) -> Span:
        """A value as stored in a tensor of ``dtype``."""
        if dtype in INTEGER_RANGES:
            return self.fit(dtype, Span(*INTEGER_RANGES[dtype]))
        return self.fit(dtype, s)


FLOAT = Domain("float", finite_inputs=False, exact=False)
FINITE = Domain("finite", finite_inputs=True, exact=True, signs=True)


# ---------------------------------------------------------------- arithmetic on spans

def _sum(x: float, y: float, default: float) -> float:
    """x + y on the extended reals; ``default`` where it is inf-inf (those results are NaN and
    are carried by the NaN flag, the bound must stay conservative)."""
    s = x + y
    return default if s != s else s


def _open_where(x: float, xo: bool, y: float, yo: bool, special) -> bool:
    """Whether an extreme result (an infinity, or a zero) is never reached: at least one
    operand end is ``special`` and every such end is open. Otherwise the extreme comes from
    closed ends, or from finite ends overflowing or underflowing, and is reached."""
    ends = [o for v, o in ((x, xo), (y, yo)) if special(v)]
    return bool(ends) and all(ends)


def _sum_end(x: float, xo: bool, y: float, yo: bool, default: float) -> tuple[float, bool]:
    s = _sum(x, y, default)
    if s != x + y:
        return s, False  # inf-inf: the conservative default is reached
    if math.isinf(s):
        # an infinite end is never reached when it comes from open infinite ends (finite values
        # without a bound); a closed infinity, or an overflow of finite ends, reaches it
        return s, _open_where(x, xo, y, yo, math.isinf)
    return s, xo or yo


def add(a: Span, b: Span) -> Span:
    if a.empty or b.empty:
        return _none(a, b)
    nan = (a.nan or b.nan or (a.hi == INF and not a.hi_open and b.lo == -INF and not b.lo_open)
           or (a.lo == -INF and not a.lo_open and b.hi == INF and not b.hi_open))
    return _make(_sum_end(a.lo, a.lo_open, b.lo, b.lo_open, -INF),
                 _sum_end(a.hi, a.hi_open, b.hi, b.hi_open, INF), nan)


def negate(a: Span) -> Span:
    return Span(-a.hi, -a.lo, a.nan, a.hi_open, a.lo_open)


def _product(x: float, y: float) -> float:
    """x * y with 0 * inf taken as 0: interval ends, the NaN itself is flagged separately."""
    if x == 0 or y == 0:
        return 0.0
    return x * y


def _corner(x: float, xo: bool, y: float, yo: bool) -> tuple[float, bool]:
    """The product of two ends, and whether it is never reached (an underflow to zero or an
    overflow of finite ends is)."""
    v = _product(x, y)
    if v == 0:
        return v, _open_where(x, xo, y, yo, lambda e: e == 0)
    if math.isinf(v):
        return v, _open_where(x, xo, y, yo, math.isinf)
    return v, xo or yo


def mul(a: Span, b: Span) -> Span:
    if a.empty or b.empty:
        return _none(a, b)
    nan = (a.nan or b.nan or (a.contains_zero() and b.has_inf())
           or (b.contains_zero() and a.has_inf()))
    corners = [_corner(x, xo, y, yo) for x, xo in ((a.lo, a.lo_open), (a.hi, a.hi_open))
               for y, yo in ((b.lo, b.lo_open), (b.hi, b.hi_open))]
    lo, hi = min(v for v, _ in corners), max(v for v, _ in corners)
    return Span(lo, hi, nan, all(o for v, o in corners if v == lo),
                all(o for v, o in corners if v == hi))


def _inverse(x: float, xo: bool, at_zero: float) -> tuple[float, bool]:
    """1/x of an end; ``at_zero`` is where an open zero end goes."""
    if math.isinf(x):
        return 0.0, xo
    if x == 0:
        return at_zero, True
    return 1 / x, xo


def div(a: Span, b: Span) -> Span:
    if a.empty or b.empty:
        return _none(a, b)
    nan = (a.nan or b.nan or (a.contains_zero() and b.contains_zero())
           or (a.has_inf() and b.has_inf()))
    if b.contains_zero():
        return Span(-INF, INF, nan)  # x/±0 is ±inf, the sign of a zero is not tracked
    lo = _inverse(b.hi, b.hi_open, -INF)
    hi = _inverse(b.lo, b.lo_open, INF)
    q = mul(a, _make(lo, hi, False))
    return replace(q, nan=nan or q.nan)


def _lift(fn, x: float) -> float:
    try:
        return fn(x)
    except OverflowError:
        return INF


def _monotone(fn, x: float, xo: bool) -> tuple[float, bool]:
    """``fn`` of an end of a strictly monotone function: an open end stays open, unless a
    finite end overflowed to an infinity (reached)."""
    v = _lift(fn, x)
    return v, xo and not (math.isinf(v) and not math.isinf(x))


def _odd_power(x: float, n: int) -> float:
    if math.isinf(x):
        return x
    return math.copysign(_lift(lambda v: v ** n, abs(x)), x)


def literal_value(e) -> float | None:
    """The exact value of a literal (or a negated literal), else None."""
    if isinstance(e, Num):
        return float(e.text)
    if isinstance(e, Neg) and isinstance(e.operand, Num):
        return -float(e.operand.text)
    return None


def power_of_two(value: float | None) -> bool:
    """``value`` is ``±2**k``: multiplying or dividing by it only moves the exponent, so the
    result is exact unless it overflows or becomes subnormal."""
    return value is not None and math.isfinite(value) and value != 0 and \
        math.frexp(abs(value))[0] == 0.5


def terms_apart(op: str, left: tuple[bool, bool], right: tuple[bool, bool]) -> bool:
    """``l op r`` (``op`` is ``+`` or ``-``) cannot cancel, from what is known of each term's
    sign as ``(never negative, never positive)``: a sum of terms of one sign, or a difference
    of terms of opposite signs (zeros allowed), is at least as large as its larger term, so
    it keeps its terms' digits -- and a factor distributed over it rounds at the scale of the
    result, not of terms that cancel."""
    if op == "-":
        right = (right[1], right[0])
    return (left[0] and right[0]) or (left[1] and right[1])


def power(a: Span, b: Span, exponent: float | None = None) -> Span:
    """C99 pow, as TVM lowers ``**`` for floats; ``exponent`` is the exact value of a literal
    exponent (its span is widened by rounding). A zero base may be ``-0``, and ``pow(-0, k)``
    is ``-inf`` for a negative odd integer ``k``."""
    if exponent == 0:
        return point(1.0)  # pow(x, 0) is 1 for every x, NaN included
    if a.empty or b.empty:
        # pow(NaN, 0) and pow(1, NaN) are 1
        one = (a.empty and not b.empty and b.lo <= 0 <= b.hi) or (
            b.empty and not a.empty and a.lo <= 1 <= a.hi)
        return Span(1.0, 1.0, True) if one else _none(a, b)
    zero_pole = a.contains_zero()  # pow(-0, k) = -inf for a negative odd k
    if exponent is not None and math.isfinite(exponent):
        k = exponent
        if k == int(k) and abs(k) <= 64 and k > 0:
            n = int(k)
            if n % 2 == 0:
                mags = sorted(((abs(a.lo), a.lo_open), (abs(a.hi), a.hi_open)))
                small = (0.0, False) if a.contains_zero() else mags[0]
                big = _upper(*mags, _and)
                return _make(_monotone(lambda v: v ** n, *small),
                             _monotone(lambda v: v ** n, *big), a.nan)
            return _make(_monotone(lambda v: _odd_power(v, n), a.lo, a.lo_open),
                         _monotone(lambda v: _odd_power(v, n), a.hi, a.hi_open), a.nan)
        if a.lo >= 0:  # x**k for x >= 0 is monotone in x
            def end(x: float, xo: bool) -> tuple[float, bool]:
                if x == 0 and k < 0:
                    return INF, xo
                return _monotone(lambda v: math.pow(v, k), x, xo)
            ends = sorted((end(a.lo, a.lo_open), end(a.hi, a.hi_open)), key=lambda e: e[0])
            s = _make(ends[0], ends[1], a.nan)
            odd = k < 0 and k == int(k) and int(k) % 2 == 1
            return join(s, point(-INF)) if odd and zero_pole else s
    if a.lo >= 0:  # -inf only from pow(-0, k) with k <= -1
        return Span(-INF if zero_pole and b.lo <= -1 else 0.0, INF, True)
    return ANY


def unary(fn: str, a: Span) -> Span:
    if a.empty:
        return a
    if fn in ("exp", "erf"):
        f = math.exp if fn == "exp" else math.erf
        return _make(_monotone(f, a.lo, a.lo_open), _monotone(f, a.hi, a.hi_open),
                     a.nan)
    if fn == "abs":
        if a.lo >= 0:
            return a
        if a.hi <= 0:
            return negate(a)
        return _make((0.0, False), _upper((-a.lo, a.lo_open), (a.hi, a.hi_open), _and), a.nan)
    if fn in ("log", "sqrt"):
        nan = a.nan or a.lo < 0
        if a.hi < 0 or (a.hi == 0 and a.hi_open):
            return Span(INF, -INF, True)
        lo = (a.lo, a.lo_open) if a.lo >= 0 else (0.0, False)

        def end(x: float, xo: bool) -> tuple[float, bool]:
            if fn == "log" and x == 0:
                return -INF, xo  # log(0) is -inf, never reached from an open zero
            return _monotone(math.sqrt if fn == "sqrt" else math.log, x, xo)
        return _make(end(*lo), end(a.hi, a.hi_open), nan)
    raise ValueError(fn)


def extremum(fn: str, a: Span, b: Span) -> Span:
    """max/min as lowered: NaN in either operand gives NaN."""
    if a.empty or b.empty:
        return _none(a, b)
    x_lo, y_lo = (a.lo, a.lo_open), (b.lo, b.lo_open)
    x_hi, y_hi = (a.hi, a.hi_open), (b.hi, b.hi_open)
    if fn == "max":  # max(x, y) > c when x > c; it reaches the larger upper end if either does
        return _make(_upper(x_lo, y_lo, _or), _upper(x_hi, y_hi, _and), a.nan or b.nan)
    return _make(_lower(x_lo, y_lo, _and), _lower(x_hi, y_hi, _or), a.nan or b.nan)


# ---------------------------------------------------------------- expressions

class Evaluator:
    """Spans of the sub-expressions of one equation with a ``dtype`` target, in ``domain``,
    given tensor spans (a tensor missing from ``tensors`` may hold anything) and loop ranges.

    ``record`` is called with every sub-expression and its span."""

    def __init__(self, tensors: Mapping[str, Span], loops: Mapping[str, tuple[int, int]],
                 domain: Domain, dtype: str, record=None):
        self.tensors, self.loops, self.record = tensors, loops, record
        self.domain, self.dtype = domain, dtype

    def __call__(self, e) -> Span:
        s = self.domain.fit(self.dtype, self._span(e))
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
                if e.lhs == e.rhs:  # a square is x**2: never negative
                    return power(a, b, 2.0)
                return mul(a, b)
            if e.op == "/":
                return div(a, b)
            return power(a, b, literal_value(e.rhs))
        if isinstance(e, Call):
            if e.fn in ("max", "min"):
                return extremum(e.fn, self(e.args[0]), self(e.args[1]))
            return unary(e.fn, self(e.args[0]))
        if isinstance(e, IfThenElse):
            self(e.cond)
            return join(self(e.then), self(e.otherwise))
        if isinstance(e, (Compare, Logic)):
            # a 0/1 value; the operands are evaluated only to record their spans
            for operand in (e.operands if isinstance(e, Compare) else (e.lhs, e.rhs)):
                self(operand)
            return CONDITION_SPAN
        raise TypeError(f"not a value expression: {e!r}")


def expression_range(expr: Expr, tensors: Mapping[str, Span],
                     loops: Mapping[str, tuple[int, int]], domain: Domain,
                     dtype: str = "f64") -> Span:
    """The span of one expression computed in an equation with a ``dtype`` target."""
    return Evaluator(tensors, loops, domain, dtype)(expr)


# ---------------------------------------------------------------- accumulations

IDENTITY = {"+": 0.0, "-": 0.0, "*": 1.0, "max": -INF, "min": INF}


def accumulate(op: str, start: Span, e: Span, count: int, exact: bool) -> Span:
    """What ``X`` may hold after ``X = X op e`` ran between 0 and ``count`` times from
    ``start``; ``exact``: in real arithmetic (no overflow or underflow of repeated products)."""
    if op in ("+", "-"):
        if op == "-":
            e = negate(e)
        low = _corner(count, False, e.lo, e.lo_open) if e.lo < 0 else (0.0, False)
        high = _corner(count, False, e.hi, e.hi_open) if e.hi > 0 else (0.0, False)
        total = _make(low, high, e.nan or (e.lo == -INF and not e.lo_open
                                           and e.hi == INF and not e.hi_open))
        return join(start, add(start, total))
    if op == "*":
        if e.lo >= 0 and e.hi <= 1:
            factor = Span(0.0, 1.0, e.nan, exact and e.positive)
        elif e.lo >= -1 and e.hi <= 1:
            factor = Span(-1.0, 1.0, e.nan)
        elif e.lo >= 0:
            factor = Span(0.0, INF, e.nan or e.contains_zero(), exact and e.positive,
                          exact and e.finite)
        else:
            factor = ANY
        return join(start, mul(start, factor))
    return join(start, extremum(op, start, e))


# ---------------------------------------------------------------- programs

class Ranges:
    """The range analysis of one program in one domain (see the module docstring). Each view is
    computed when first read (``held`` and ``values`` by one fixpoint, ``after`` by one pass):
    the value splits read only ``after`` of FINITE, the math ranges only ``held`` and
    ``values`` of FLOAT."""

    def __init__(self, program: Program, domain: Domain):
        self.program, self.domain = program, domain

    @cached_property
    def _sites(self):
        return equation_sites(self.program.leir)

    @cached_property
    def _held_values(self) -> tuple[dict[str, Span], dict[Expr, Span]]:
        values: dict[Expr, Span] = {}

        def record(e, s: Span):
            values[e] = join(values[e], s) if e in values else s

        return dict(_held(self.program, self.domain, self._sites, record)), values

    @property
    def held(self) -> dict[str, Span]:
        """Every value a tensor holds at any moment."""
        return self._held_values[0]

    @property
    def values(self) -> dict[Expr, Span]:
        """Every value sub-expression's span, joined over its occurrences."""
        return self._held_values[1]

    @cached_property
    def after(self) -> dict[str, Span]:
        """Every value a nest that does not write the tensor can read."""
        return _after(self.program, self.domain, self._sites)

    def reads_outside(self, written, among=None) -> dict[str, Span]:
        """``after`` spans for reads in a nest that writes ``written``: those are unknown.
        With ``among`` (the tensors the nest accesses), only theirs, in name order."""
        if among is None:
            return {name: s for name, s in self.after.items() if name not in written}
        return {name: self.after[name] for name in sorted(among)
                if name not in written and name in self.after}


def _widen(old: Span, new: Span) -> Span:
    return Span(-INF if new.lo < old.lo else new.lo, INF if new.hi > old.hi else new.hi,
                new.nan, new.lo_open and new.lo >= old.lo, new.hi_open and new.hi <= old.hi)


def written_before(sites) -> list[frozenset[str]]:
    """For each equation site in order, the tensors earlier sites write."""
    out, seen = [], set()
    for site in sites:
        out.append(frozenset(seen))
        seen.add(site.equation.target.name)
    return out


def _held(program: Program, domain: Domain, sites, record=None) -> dict[str, Span]:
    """The flow-insensitive fixpoint: every value each tensor holds at any moment."""
    tensors = {spec.name: domain.input_span(spec.code) for spec in program.signature.inputs}
    inputs = set(tensors)
    writers: dict[str, int] = {}
    for site in sites:
        writers[site.equation.target.name] = writers.get(site.equation.target.name, 0) + 1
    for name in writers:
        tensors.setdefault(name, EMPTY)
    earlier = written_before(sites)

    def equation_span(k: int, site, record=None) -> Span:
        eq = site.equation
        ev = Evaluator(tensors, site.loop_ranges, domain, eq.target.dtype, record)
        op = accumulation_op(eq)
        if op is None:
            return ev(eq.value)
        e = ev(accumulated_operand(eq))
        if record is not None:
            ev(eq.value)  # record the spans of the whole right-hand side as well
        target = eq.target.name
        fresh = target not in earlier[k] and target not in inputs
        if fresh and writers[target] == 1:
            start = point(IDENTITY[op])
        elif fresh:
            start = join(point(IDENTITY[op]), tensors[target])
        else:
            start = tensors[target]
        count = math.prod(l.extent for l in site.loops)
        return accumulate(op, start, e, count, domain.exact)

    changed = True
    for rounds in range(64):
        changed = False
        for k, site in enumerate(sites):
            target = site.equation.target
            old = tensors[target.name]
            new = join(old, domain.stored(target.dtype, equation_span(k, site)))
            if rounds >= 4 and not old.empty:
                new = _widen(old, new)
            if new != old:
                tensors[target.name] = new
                changed = True
        if not changed:
            break
    if changed:  # widening bounds every tensor's growth, so this is a guard, never expected
        tensors.update({name: ANY for name in writers})
    if record is not None:
        for k, site in enumerate(sites):
            equation_span(k, site, record)
    return tensors


def _after(program: Program, domain: Domain, sites) -> dict[str, Span]:
    """One pass in program order: what each tensor holds once the nests writing it completed.

    An equation's value is judged with the spans of the tensors it reads at that point; a
    tensor the same nest writes may hold anything there (a partial reduction, an initial
    identity). An accumulation with implicit initialisation has had between one and the loop
    count updates per element once its nest ends; if its write does not provably cover the
    tensor's shape, the identity left in the other elements counts too."""
    sig = program.signature
    spans: dict[str, Span] = {t.name: domain.input_span(t.code) for t in sig.inputs}
    inputs = set(spans)
    shapes = {t.name: t.shape for t in sig.tensors}
    shapes.update(intermediate_shapes(program.leir, set(shapes)))
    written_in: dict[int, set[str]] = {}
    for site in sites:
        written_in.setdefault(site.nest, set()).add(site.equation.target.name)
    written: set[str] = set()
    for site in sites:
        eq, target = site.equation, site.equation.target
        local = written_in[site.nest]
        reads = {name: s for name, s in spans.items() if name not in local}
        ev = Evaluator(reads, site.loop_ranges, domain, target.dtype)
        op = accumulation_op(eq)
        if op is not None and target.name not in inputs:
            e = ev(accumulated_operand(eq))
            count = math.prod(l.extent for l in site.loops)
            if target.name in written:
                value = accumulate(op, spans[target.name], e, count, domain.exact)
            else:
                first = negate(e) if op == "-" else e
                value = accumulate(op, first, e, count - 1, domain.exact)
                shape = shapes.get(target.name)
                if shape is None or not covers_shape(target, site.loops, shape):
                    value = join(value, point(IDENTITY[op]))
        else:
            value = ev(eq.value)
        value = domain.stored(target.dtype, value)
        spans[target.name] = join(spans[target.name], value) if target.name in written else value
        written.add(target.name)
    return spans


@lru_cache(maxsize=64)
def analyse(program: Program, domain: Domain = FLOAT) -> Ranges:
    """The range analysis of a program in a domain (see the module docstring)."""
    return Ranges(program, domain)
