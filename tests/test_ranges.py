"""The value-range analysis (leir_egraph/leir/ranges.py) against numbers.

Every span the analysis gives must contain every value the expression takes on the inputs its
domain allows: a NaN only where the span may be NaN, an infinity only at a closed infinite end,
and a number inside the interval, never at an open end. Checked three ways:

1. Random expressions (hypothesis) in the FLOAT domain, evaluated with NumPy in f32 and f64 as
   the lowering computes them (reads, literals and indices in the equation's dtype, C pow,
   NaN-propagating max/min), on a grid of special inputs: ±inf, NaN, ±0, subnormals, values near
   overflow, ordinary values.
2. The same expressions in the FINITE domain, evaluated exactly with mpmath on finite inputs --
   the real values the domain speaks of.
3. Whole programs run on TVM: their outputs lie in the ``held`` and ``after`` spans of the
   analysis, in both domains.
"""

from __future__ import annotations

import itertools
import math

import mpmath
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leir_egraph.leir import Program, Signature, parse
from leir_egraph.leir.analysis import equation_sites
from leir_egraph.leir.ast import Bin, Call, Compare, Idx, IfThenElse, IName, Neg, Num, Var
from leir_egraph.leir.printer import to_text
from leir_egraph.leir.ranges import (ANY, FINITE, FLOAT, INF, REALS, Domain, Span, analyse, point,
                                     power, sign_class)
from leir_egraph.leir.traverse import value_children

EXTENT = 5


# ---------------------------------------------------------------- containment

def check(span: Span, value: float, where: str) -> None:
    """``value`` (a float or mpf) is one the span allows, and every property the span claims
    holds of it."""
    if value != value:
        assert span.nan, f"{where}: NaN outside {span}"
        return
    assert not span.empty, f"{where}: {value} in an empty span"
    if value == INF:
        assert span.hi == INF and not span.hi_open, f"{where}: +inf outside {span}"
    elif value == -INF:
        assert span.lo == -INF and not span.lo_open, f"{where}: -inf outside {span}"
    else:
        assert span.lo <= value <= span.hi, f"{where}: {value} outside {span}"
        assert not (span.lo_open and value == span.lo), f"{where}: {value} at open end {span}"
        assert not (span.hi_open and value == span.hi), f"{where}: {value} at open end {span}"
    if span.finite:
        assert value not in (INF, -INF), where
    if span.real:
        assert value == value and value not in (INF, -INF), where
    if span.nonzero:
        assert value != 0, where
    if span.nonnegative:
        assert value >= 0, where
    if span.positive:
        assert value > 0, where
    if span.negative:
        assert value < 0, where


# ---------------------------------------------------------------- random expressions

def _read(name: str, dtype: str) -> Var:
    return Var(name, dtype, "g", (IName("i"),))


LITERALS = ("0", "0.5", "1", "2", "3", "1e-05", "100", "inf")


def expressions(dtype: str):
    leaves = st.one_of(
        st.sampled_from([_read("A", dtype), _read("D", dtype), Idx("i")]),
        st.sampled_from(LITERALS).map(Num),
        st.sampled_from(LITERALS[1:4]).map(lambda t: Neg(Num(t))))

    def grow(children):
        exponent = st.one_of(st.sampled_from(["2", "3", "0.5"]).map(Num),
                             st.just(Neg(Num("1"))), children)
        return st.one_of(
            st.tuples(st.sampled_from("+-*/"), children, children).map(lambda t: Bin(*t)),
            st.tuples(children, exponent).map(lambda t: Bin("**", *t)),
            st.tuples(children).map(lambda t: Bin("*", t[0], t[0])),
            children.map(Neg),
            st.tuples(st.sampled_from(["exp", "log", "sqrt", "abs", "erf"]),
                      children).map(lambda t: Call(t[0], (t[1],))),
            st.tuples(st.sampled_from(["max", "min"]), children,
                      children).map(lambda t: Call(t[0], (t[1], t[2]))),
            st.tuples(children, children, children, children).map(
                lambda t: IfThenElse(Compare((t[0], t[1]), ("<",)), t[2], t[3])))

    return st.recursive(leaves, grow, max_leaves=6)


def one_equation(expr, dtype: str) -> Program:
    """``L^{5}_{i=0}[C_{i}=expr;]`` reading A and D; the expression as parsed back."""
    text = f"L^{{{EXTENT}}}_{{i=0}}[C^{{{dtype},g}}_{{i}}={to_text(expr)};];"
    return Program(parse(text), Signature.from_short(
        f"A:{dtype}[{EXTENT}] D:{dtype}[{EXTENT}] -> C:{dtype}[{EXTENT}]"))


def nodes(e):
    yield e
    for c in value_children(e):
        yield from nodes(c)


# ---------------------------------------------------------------- FLOAT: NumPy in the dtype

SPECIAL = {
    "f32": (-INF, -3e38, -1e20, -2.5, -1.0, -1e-40, -0.0, 0.0, 1e-40, 1e-30, 0.5, 1.0, 2.5, 87.0,
            1e20, 3e38, INF, math.nan),
    "f64": (-INF, -1.7e308, -1e200, -2.5, -1.0, -1e-310, -0.0, 0.0, 1e-310, 1e-300, 0.5, 1.0,
            2.5, 700.0, 1e200, 1.7e308, INF, math.nan),
}
_erf = np.vectorize(math.erf, otypes=[np.float64])


def np_eval(e, env, dtype, out):
    """Every sub-expression's values (NumPy arrays of ``dtype``), into ``out``."""
    t = np.float32 if dtype == "f32" else np.float64
    if isinstance(e, Num):
        v = np.full_like(env["i"], float(e.text))
    elif isinstance(e, Var):
        v = env[e.name]
    elif isinstance(e, Idx):
        v = env["i"]
    elif isinstance(e, Neg):
        v = -np_eval(e.operand, env, dtype, out)
    elif isinstance(e, Bin):
        a, b = np_eval(e.lhs, env, dtype, out), np_eval(e.rhs, env, dtype, out)
        v = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide,
             "**": np.power}[e.op](a, b)
    elif isinstance(e, Call):
        args = [np_eval(a, env, dtype, out) for a in e.args]
        if e.fn == "erf":
            v = _erf(args[0].astype(np.float64)).astype(t)
        else:
            v = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "abs": np.abs,
                 "max": np.maximum, "min": np.minimum}[e.fn](*args)
    elif isinstance(e, IfThenElse):
        c = np_eval(e.cond, env, dtype, out)
        v = np.where(c != 0, np_eval(e.then, env, dtype, out),
                     np_eval(e.otherwise, env, dtype, out))
    elif isinstance(e, Compare):
        a, b = (np_eval(x, env, dtype, out) for x in e.operands)
        v = (a < b).astype(t)
    else:
        raise TypeError(e)
    v = np.asarray(v, dtype=t)
    out.setdefault(e, []).append(v)
    return v


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_float_spans_contain_every_computed_value(dtype, data):
    expr = data.draw(expressions(dtype))
    p = one_equation(expr, dtype)
    parsed = equation_sites(p.leir)[0].equation.value
    ranges = analyse(p, FLOAT)
    t = np.float32 if dtype == "f32" else np.float64
    grid = np.array(list(itertools.product(SPECIAL[dtype], SPECIAL[dtype], (0, EXTENT - 1))))
    env = {"A": grid[:, 0].astype(t), "D": grid[:, 1].astype(t), "i": grid[:, 2].astype(t)}
    values: dict = {}
    with np.errstate(all="ignore"):
        np_eval(parsed, env, dtype, values)
    for node, arrays in values.items():
        span = ranges.values[node]
        for v in np.unique(np.concatenate(arrays)):
            check(span, float(v), f"{to_text(node)} in {to_text(parsed)}")


# ---------------------------------------------------------------- FINITE: exact reals

mpmath.mp.dps = 60
FINITE_INPUTS = (-1e6, -2.5, -1.0, -0.5, 0.0, 0.5, 1.0, 2.5, 1e6)
NAN = mpmath.mpf("nan")


def _mp(x):
    return x if isinstance(x, mpmath.mpf) else mpmath.mpf(x)


def _real(z):
    """An mpmath result as an extended real: a complex result is NaN (log, sqrt, pow of a
    negative)."""
    if isinstance(z, mpmath.mpc):
        return NAN if z.imag != 0 else z.real
    return z


def mp_div(a, b):
    if b == 0:
        return NAN if a == 0 or a != a else mpmath.inf * mpmath.sign(a)
    return a / b


class TooLarge(Exception):
    """A value whose exact magnitude is beyond what is worth computing (exp(exp(1e6)))."""


LIMIT = mpmath.mpf(10) ** 6


def mp_pow(a, b):
    """C pow on the extended reals, exactly."""
    if a != a or b != b:
        return mpmath.mpf(1) if b == 0 else NAN
    if b == 0 or a == 1:
        return mpmath.mpf(1)
    if mpmath.isinf(b):
        m = abs(a)
        return mpmath.mpf(1) if m == 1 else (mpmath.inf if (m > 1) == (b > 0) else mpmath.mpf(0))
    if a == 0:
        return mpmath.inf if b < 0 else mpmath.mpf(0)
    if a < 0 and b != int(b):
        return NAN
    if not mpmath.isinf(a) and abs(b * mpmath.log(abs(a))) > LIMIT:
        raise TooLarge
    return _real(mpmath.power(a, b))


def mp_eval(e, env, out):
    if isinstance(e, Num):
        v = _mp(float(e.text))
    elif isinstance(e, Var):
        v = env[e.name]
    elif isinstance(e, Idx):
        v = env["i"]
    elif isinstance(e, Neg):
        v = -mp_eval(e.operand, env, out)
    elif isinstance(e, Bin):
        a, b = mp_eval(e.lhs, env, out), mp_eval(e.rhs, env, out)
        v = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
             "/": lambda: mp_div(a, b), "**": lambda: mp_pow(a, b)}[e.op]()
    elif isinstance(e, Call):
        args = [mp_eval(a, env, out) for a in e.args]
        a = args[0]
        if e.fn in ("max", "min"):
            if any(x != x for x in args):
                v = NAN
            else:
                v = max(args) if e.fn == "max" else min(args)
        elif a != a:
            v = NAN
        elif e.fn == "log":
            v = NAN if a < 0 else (-mpmath.inf if a == 0 else mpmath.log(a))
        elif e.fn == "sqrt":
            v = NAN if a < 0 else mpmath.sqrt(a)
        else:
            if e.fn == "exp" and not mpmath.isinf(a) and a > LIMIT:
                raise TooLarge
            v = {"exp": mpmath.exp, "abs": abs, "erf": mpmath.erf}[e.fn](a)
    elif isinstance(e, IfThenElse):
        c = mp_eval(e.cond, env, out)
        then, otherwise = mp_eval(e.then, env, out), mp_eval(e.otherwise, env, out)
        v = then if c != 0 else otherwise
    elif isinstance(e, Compare):
        a, b = (mp_eval(x, env, out) for x in e.operands)
        v = mpmath.mpf(1 if a < b else 0)
    else:
        raise TypeError(e)
    out.setdefault(e, []).append(v)
    return v


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_finite_spans_contain_every_real_value(data):
    expr = data.draw(expressions("f64"))
    p = one_equation(expr, "f64")
    parsed = equation_sites(p.leir)[0].equation.value
    ranges = analyse(p, FINITE)
    values: dict = {}
    for a, b, i in itertools.product(FINITE_INPUTS, FINITE_INPUTS, (0, EXTENT - 1)):
        point: dict = {}
        try:
            mp_eval(parsed, {"A": _mp(a), "D": _mp(b), "i": _mp(i)}, point)
        except TooLarge:
            continue  # beyond 10**(10**6): not evaluated at this input
        for node, found in point.items():
            values.setdefault(node, []).extend(found)
    for node, found in values.items():
        span = ranges.values[node]
        for v in found:
            check(span, v, f"{to_text(node)} in {to_text(parsed)}")


# ---------------------------------------------------------------- tables

def test_sign_classes():
    assert sign_class(Span(2.0, 3.0)) == Span(0.0, INF, False, True, True)
    assert sign_class(Span(0.0, 3.0)) == Span(0.0, INF, False, False, True)
    assert sign_class(Span(-3.0, -1.0)) == Span(-INF, 0.0, False, True, True)
    assert sign_class(Span(-3.0, 1.0)) == REALS
    assert sign_class(Span(0.0, INF)) == ANY                  # may be infinite
    assert sign_class(Span(0.0, 1.0, True)) == ANY            # may be NaN


def test_powers_of_nan_and_of_a_negative_zero():
    """Two cases the random expressions found in the range analysis the math guards used:
    pow(NaN, 0) is 1 (an always-NaN base still gives 1 when the exponent may be 0), and a zero
    base may be -0, for which pow(-0, -1) is -inf."""
    nan_only = Span(INF, -INF, True)
    one = power(nan_only, ANY)
    assert one.lo <= 1 <= one.hi and one.nan
    with np.errstate(all="ignore"):
        assert np.power(np.float64(np.nan), 0.0) == 1.0
        assert np.power(np.float64(-0.0), -1.0) == -INF
    assert power(point(-0.0), point(-1.0), -1.0).lo == -INF
    assert power(Span(0.0, 4.0), point(-1.0), -1.0).lo == -INF
    assert power(Span(0.0, 4.0), point(-2.0), -2.0).lo > 0     # pow(-0, -2) is +inf
    assert power(Span(1.0, 4.0), point(-1.0), -1.0).lo > 0     # no zero, no pole
    assert power(Span(0.0, 4.0), Span(0.25, 0.75)).lo == 0     # no exponent <= -1


def spans_of(p: Program, domain: Domain) -> dict[str, Span]:
    return {to_text(k): v for k, v in analyse(p, domain).values.items()}


def program(text: str, sig: str) -> Program:
    return Program(parse(text), Signature.from_short(sig))


def test_exact_arithmetic_keeps_finite_values_finite():
    """Open ends: exp of a finite number is positive and finite; a sum of them too, even past
    the float range (a finite real number), and a quotient by one stays finite."""
    p = program("B^{4}_{tx=0}L^{8}_{a=0}[E^{f64,g}_{tx}=E^{f64,g}_{tx}+exp(A^{f64,g}_{tx,a});];"
                "B^{4}_{tx=0}[I^{f64,g}=I^{f64,g}+exp(E^{f64,g}_{tx});];"
                "B^{4}_{tx=0}L^{8}_{a=0}[C^{f64,g}_{tx,a}=A^{f64,g}_{tx,a}/E^{f64,g}_{tx}+I^{f64,g};];",
                "A:f64[4,8] -> C:f64[4,8]")
    after = analyse(p, FINITE).after
    assert after["E"].real and after["E"].positive
    assert after["I"].real and after["I"].positive
    assert after["C"].real
    after = analyse(p, FLOAT).after
    assert not after["E"].finite and after["E"].nonnegative   # exp(inf), and underflow to 0


def test_sign_classes_only_in_exact_arithmetic():
    """FINITE tracks sign classes: a divisor made of loop indices is non-zero in FLOAT, where
    bounds are kept, but only finite there; exact arithmetic on bounds is refused."""
    p = program("L^{16}_{c=0}[E^{f64,g}_{c}=A^{f64,g}_{c}/(min(3,63-c*4)+1);];",
                "A:f64[16] -> E:f64[16]")
    divisor = "min(3,63-c*4)+1"
    assert spans_of(p, FLOAT)[divisor].nonzero and spans_of(p, FLOAT)[divisor].lo > 3.9
    assert spans_of(p, FINITE)[divisor] == REALS
    with pytest.raises(ValueError):
        Domain("finite-bounds", finite_inputs=True, exact=True, signs=False)


# ---------------------------------------------------------------- whole programs on TVM

PROGRAMS = [
    # softmax statistics: a completed max, a sum of exponentials, the normalisation
    ("B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,a});];"
     "B^{4}_{tx=0}L^{8}_{a=0}[E^{f32,g}_{tx}=E^{f32,g}_{tx}+exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx});];"
     "B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx})/E^{f32,g}_{tx};];",
     "A:f32[4,8] -> C:f32[4,8] D:f32[4] E:f32[4]"),
    # a window with -inf outside, a sum of squares and its root
    ("B^{4}_{tx=0}L^{8}_{c=0}[D^{f32,g}_{tx,c}=if_then_else(1<=c<7,A^{f32,g}_{tx,c},-inf);];"
     "B^{4}_{tx=0}L^{8}_{a=0}[Q^{f32,g}_{tx}=Q^{f32,g}_{tx}+A^{f32,g}_{tx,a}*A^{f32,g}_{tx,a};];"
     "B^{4}_{tx=0}[S^{f32,g}_{tx}=sqrt(Q^{f32,g}_{tx}/8+1e-05);];",
     "A:f32[4,8] -> D:f32[4,8] Q:f32[4] S:f32[4]"),
    # an average with a divisor of loop indices, a clamp, a sigmoid, a product reduction
    ("L^{16}_{c=0}[E^{f64,g}_{c}=A^{f64,g}_{c}/(min(3,63-c*4)+1);"
     "F^{f64,g}_{c}=min(max(A^{f64,g}_{c},-10.0),10.0);"
     "G^{f64,g}_{c}=1/(1+exp(-A^{f64,g}_{c}));];"
     "L^{16}_{c=0}[R^{f64,g}=R^{f64,g}*(1+exp(A^{f64,g}_{c}));];",
     "A:f64[16] -> E:f64[16] F:f64[16] G:f64[16] R:f64[]"),
]


def _inputs(p: Program, rng, special: bool) -> dict[str, np.ndarray]:
    out = {}
    for spec in p.signature.inputs:
        values = rng.normal(0, 3, size=spec.shape)
        if special:
            pool = np.array([-INF, INF, math.nan, -0.0, 0.0, 1e30, -1e30, 1e-40])
            mask = rng.random(spec.shape) < 0.3
            values = np.where(mask, rng.choice(pool, size=spec.shape), values)
        out[spec.name] = values.astype(spec.dtype)
    return out


@pytest.mark.parametrize("text,sig", PROGRAMS)
def test_program_outputs_lie_in_their_spans(text, sig):
    from leir_egraph.lower.build import run

    p = program(text, sig)
    rng = np.random.default_rng(20261126)
    for domain, special in ((FLOAT, True), (FLOAT, False), (FINITE, False)):
        ranges = analyse(p, domain)
        for _ in range(3):
            with np.errstate(all="ignore"):
                outputs = run(p, _inputs(p, rng, special))
            for name, array in outputs.items():
                for v in np.unique(array.astype(np.float64)):
                    check(ranges.held[name], float(v), f"{domain.name} held {name}")
                    check(ranges.after[name], float(v), f"{domain.name} after {name}")


def test_what_the_split_guards_rely_on():
    p = program(*PROGRAMS[0])
    after = analyse(p, FINITE).after
    assert after["D"].real and not after["D"].nonzero     # a completed max
    assert after["E"].real and after["E"].positive        # a sum of exponentials
    assert not analyse(p, FINITE).held["D"].real          # -inf before the first update
    p = program(*PROGRAMS[1])
    after = analyse(p, FINITE).after
    assert not after["D"].real                            # -inf outside the window
    assert after["S"].real and after["S"].positive        # a square root of a sum of squares
