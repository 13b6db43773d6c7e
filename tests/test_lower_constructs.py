"""One hand-written LEIR program per construct, lowered to TVM (llvm), run, and checked
against NumPy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leir_egraph.leir import Program, Signature
from leir_egraph.lower import LoweringError, lower, run

RNG = np.random.default_rng(1234)


def program(text: str, inputs, outputs, values=None) -> Program:
    return Program.parse(text, Signature.of(inputs, outputs), values=values or {})


def normal(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


def run_one(p: Program, inputs, **options) -> np.ndarray:
    (out,) = run(p, inputs, **options).values()
    return out


def assert_close(got, want, rtol=1e-5, atol=1e-6):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape
    assert np.array_equal(np.isnan(got.astype(np.float64)), np.isnan(want.astype(np.float64)))
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                               atol=atol, equal_nan=True)


# ---------------------------------------------------------------- loop kinds

ELEMENTWISE = "{k1}^{{8}}_{{{i}=0}}{k2}^{{{n}}}_{{{j}=0}}[C^{{f32,g}}_{{{i},{j}}}=A^{{f32,g}}_{{{i},{j}}}*2+1;];"


@pytest.mark.parametrize("k1,i,k2,j", [
    ("L", "a", "L", "c"), ("P", "a", "L", "c"), ("L", "a", "P", "c"), ("P", "a", "P", "c"),
    ("V", "a", "L", "c"), ("L", "a", "V", "c"), ("V", "a", "V", "c"), ("P", "a", "V", "c"),
    ("U", "a", "U", "c"), ("B", "tx", "L", "c"), ("B", "tx", "B", "bya"), ("U", "a", "P", "c"),
])
def test_every_loop_kind_and_nesting_computes_the_same(k1, i, k2, j):
    p = program(ELEMENTWISE.format(k1=k1, i=i, k2=k2, j=j, n=40), [("A", "f32", (8, 40))],
                [("C", "f32", (8, 40))])
    a = normal(8, 40)
    assert_close(run_one(p, {"A": a}), a * 2 + 1)


def test_loop_kinds_map_to_tvm_loop_kinds():
    text = ("P^{4}_{a=0}V^{8}_{c=0}[C^{f32,g}_{a,c}=A^{f32,g}_{a,c};];"
            "U^{4}_{a=0}L^{8}_{c=0}[D^{f32,g}_{a,c}=A^{f32,g}_{a,c};];"
            "B^{4}_{tx=0}U^{300}_{d=0}[E^{f32,g}_{tx,d}=A^{f32,g}_{tx,0};];")
    p = program(text, [("A", "f32", (4, 8))],
                [("C", "f32", (4, 8)), ("D", "f32", (4, 8)), ("E", "f32", (4, 300))])
    script = lower(p).script()
    assert "T.parallel(4)" in script and "T.vectorized(8)" in script and "T.unroll(4)" in script
    assert "T.unroll(300)" not in script          # U over 256 is emitted serial
    assert "thread_binding" not in script          # B is serial on the CPU
    a = normal(4, 8)
    out = run(p, {"A": a})
    assert_close(out["E"], np.repeat(a[:, :1], 300, axis=1))


def test_nested_parallel_loops_run_with_the_outer_one_parallel():
    text = "P^{4}_{a=0}[P^{8}_{c=0}[C^{f32,g}_{a,c}=A^{f32,g}_{a,c}+1;];];"
    p = program(text, [("A", "f32", (4, 8))], [("C", "f32", (4, 8))])
    script = lower(p).script()
    assert script.count("T.parallel") == 1
    a = normal(4, 8)
    assert_close(run_one(p, {"A": a}), a + 1)


def test_binding_names_tx_bya_tza_are_serial_loops_on_cpu():
    text = "B^{4}_{tx=0}B^{3}_{bya=0}B^{2}_{tza=0}[C^{f32,g}_{tx,bya,tza}=A^{f32,g}_{tx,bya}*tza;];"
    p = program(text, [("A", "f32", (4, 3))], [("C", "f32", (4, 3, 2))])
    a = normal(4, 3)
    assert_close(run_one(p, {"A": a}), a[:, :, None] * np.arange(2)[None, None, :])


# ---------------------------------------------------------------- tensors

def test_scalars_in_and_out():
    text = ("L^{8}_{a=0}[S^{f32,g}=S^{f32,g}+A^{f32,g}_{a};];"
            "B^{1}_{tx=0}[C^{f32,g}=S^{f32,g}*K^{f32,g};];")
    p = program(text, [("A", "f32", (8,)), ("K", "f32", ())], [("C", "f32", ())])
    a = normal(8)
    out = run_one(p, {"A": a, "K": np.float32(3.0)})
    assert out.shape == ()
    assert_close(out, a.sum() * 3)


def test_gathers_including_an_offset_and_a_gather_inside_a_write_subscript():
    text = ("B^{6}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{G^{i64,g}_{tx}}+A^{f32,g}_{G^{i64,g}_{tx}+1};];"
            "B^{6}_{tx=0}[D^{f32,g}_{G^{i64,g}_{tx}}=A^{f32,g}_{tx};];")
    p = program(text, [("A", "f32", (10,)), ("G", "i64", (6,))],
                [("C", "f32", (6,)), ("D", "f32", (10,))])
    a = normal(10)
    g = np.array([8, 0, 3, 3, 5, 1], dtype=np.int64)
    out = run(p, {"A": a, "G": g})
    assert_close(out["C"], a[g] + a[g + 1])
    d = np.full(10, np.nan, np.float32)
    for tx in range(6):
        d[g[tx]] = a[tx]
    assert_close(out["D"], d)  # unwritten elements of an output stay NaN


def test_nested_nest_with_equations_before_and_after_it():
    text = ("L^{4}_{a=0}[X^{f32,g}_{a}=1;L^{8}_{c=0}[X^{f32,g}_{a}=X^{f32,g}_{a}+A^{f32,g}_{a,c};];"
            "C^{f32,g}_{a}=X^{f32,g}_{a}*2;];")
    p = program(text, [("A", "f32", (4, 8))], [("C", "f32", (4,))])
    a = normal(4, 8)
    assert_close(run_one(p, {"A": a}), (1 + a.sum(1)) * 2)


def test_several_equations_per_body_argmax():
    text = ("B^{4}_{tx=0}L^{5}_{a=0}L^{3}_{c=0}[D^{f32,g}_{tx,c}=max(D^{f32,g}_{tx,c},A^{f32,g}_{tx,a,c});"
            "C^{i64,g}_{tx,c}=0;];B^{4}_{tx=0}L^{5}_{a=0}L^{3}_{c=0}[C^{i64,g}_{tx,c}="
            "if_then_else(A^{f32,g}_{tx,a,c}>=D^{f32,g}_{tx,c},a,C^{i64,g}_{tx,c});];")
    p = program(text, [("A", "f32", (4, 5, 3))], [("C", "i64", (4, 3))])
    a = normal(4, 5, 3)
    out = run_one(p, {"A": a})
    assert out.dtype == np.int64
    # the comparison is in f32 (the operands' dtype), not i64 (the target's)
    np.testing.assert_array_equal(out, a.shape[1] - 1 - np.argmax(a[:, ::-1, :], axis=1))


# ---------------------------------------------------------------- implicit initialisation

@pytest.mark.parametrize("rhs,reduce", [
    ("X^{f32,g}_{a}+A^{f32,g}_{a,c}", lambda a: a.sum(1)),
    ("A^{f32,g}_{a,c}+X^{f32,g}_{a}", lambda a: a.sum(1)),               # operands swapped
    ("X^{f32,g}_{a}-A^{f32,g}_{a,c}", lambda a: -a.sum(1)),
    ("X^{f32,g}_{a}*A^{f32,g}_{a,c}", lambda a: a.prod(1)),
    ("max(X^{f32,g}_{a},A^{f32,g}_{a,c})", lambda a: a.max(1)),
    ("min(A^{f32,g}_{a,c},X^{f32,g}_{a})", lambda a: a.min(1)),
])
def test_each_implicit_initialisation(rhs, reduce):
    p = program(f"L^{{4}}_{{a=0}}L^{{6}}_{{c=0}}[X^{{f32,g}}_{{a}}={rhs};];",
                [("A", "f32", (4, 6))], [("X", "f32", (4,))])
    a = normal(4, 6)
    assert_close(run_one(p, {"A": a}), reduce(a.astype(np.float64)))


@pytest.mark.parametrize("fn,reduce", [("max", np.max), ("min", np.min)])
def test_integer_max_min_start_from_the_dtype_extremes(fn, reduce):
    p = program(f"L^{{3}}_{{a=0}}L^{{5}}_{{c=0}}[X^{{i32,g}}_{{a}}={fn}(X^{{i32,g}}_{{a}},A^{{i32,g}}_{{a,c}});];",
                [("A", "i32", (3, 5))], [("X", "i32", (3,))])
    a = RNG.integers(-2**31, 2**31 - 1, (3, 5)).astype(np.int32)
    a[0] = np.iinfo(np.int32).min if fn == "max" else np.iinfo(np.int32).max
    np.testing.assert_array_equal(run_one(p, {"A": a}), reduce(a, axis=1))


def test_initialisation_is_over_the_whole_shape_before_the_top_level_nest():
    # the nest writes X only for c < 2, yet all of X starts at 0 (not NaN)
    text = ("L^{3}_{a=0}L^{2}_{c=0}[X^{f32,g}_{a,c}=X^{f32,g}_{a,c}+A^{f32,g}_{a};];"
            "L^{3}_{a=0}L^{4}_{c=0}[X^{f32,g}_{a,c+1}=X^{f32,g}_{a,c+1}+1;];"
            "L^{3}_{a=0}L^{5}_{c=0}[C^{f32,g}_{a,c}=X^{f32,g}_{a,c};];")
    p = program(text, [("A", "f32", (3,))], [("C", "f32", (3, 5))])
    a = normal(3)
    want = np.zeros((3, 5))
    want[:, :2] += a[:, None]
    want[:, 1:5] += 1          # the second nest accumulates onto what the first wrote
    assert_close(run_one(p, {"A": a}), want)


def test_accumulate_after_write_matmul_then_bias():
    text = ("B^{4}_{tx=0}L^{3}_{a=0}L^{5}_{c=0}[C^{f32,g}_{tx,a}=C^{f32,g}_{tx,a}+A^{f32,g}_{tx,c}*W^{f32,g}_{a,c};];"
            "B^{4}_{tx=0}L^{3}_{a=0}[C^{f32,g}_{tx,a}=C^{f32,g}_{tx,a}+Ab^{f32,g}_{a};];")
    p = program(text, [("A", "f32", (4, 5)), ("W", "f32", (3, 5)), ("Ab", "f32", (3,))],
                [("C", "f32", (4, 3))])
    a, w, b = normal(4, 5), normal(3, 5), normal(3)
    assert_close(run_one(p, {"A": a, "W": w, "Ab": b}), a @ w.T + b)


def test_written_output_is_not_reinitialised():
    text = ("L^{4}_{a=0}[C^{f32,g}_{a}=A^{f32,g}_{a};];"
            "L^{4}_{a=0}L^{3}_{c=0}[C^{f32,g}_{a}=max(C^{f32,g}_{a},A^{f32,g}_{c}*0);];")
    p = program(text, [("A", "f32", (4,))], [("C", "f32", (4,))])
    a = normal(4)
    assert_close(run_one(p, {"A": a}), np.maximum(a, 0 * a[:3].max()))


# ---------------------------------------------------------------- scans

def test_scan_cumulative_product_and_prefix_max():
    text = ("L^{7}_{a=0}[F^{f32,g}_{a}=if_then_else(a-1<0,1,F^{f32,g}_{a-1})*A^{f32,g}_{a};];"
            "L^{7}_{a=0}[M^{f32,g}_{a}=max(if_then_else(a<1,-inf,M^{f32,g}_{a-1}),A^{f32,g}_{a});];")
    p = program(text, [("A", "f32", (7,))], [("F", "f32", (7,)), ("M", "f32", (7,))])
    a = normal(7)
    out = run(p, {"A": a})
    assert_close(out["F"], np.cumprod(a.astype(np.float64)))
    assert_close(out["M"], np.maximum.accumulate(a))


def test_cumsum_with_index_comparison():
    text = "B^{3}_{tx=0}L^{6}_{a=0}L^{6}_{c=0}[C^{f32,g}_{tx,a}=C^{f32,g}_{tx,a}+if_then_else(c<=a,A^{f32,g}_{tx,c},0);];"
    p = program(text, [("A", "f32", (3, 6))], [("C", "f32", (3, 6))])
    a = normal(3, 6)
    assert_close(run_one(p, {"A": a}), np.cumsum(a, axis=1))


# ---------------------------------------------------------------- conditions

def test_if_then_else_guards_reads_with_chains_and_logic():
    # padding: the guarded read A_{c-2,d-1} is out of range where the guard is false and must
    # never execute (lazy if_then_else)
    text = ("L^{8}_{c=0}L^{6}_{d=0}[C^{f32,g}_{c,d}=if_then_else(2<=c<6&1<=d<5,A^{f32,g}_{c-2,d-1},0);];"
            "L^{8}_{c=0}L^{6}_{d=0}[D^{f32,g}_{c,d}=if_then_else(c<1|d>=5|A^{f32,g}_{0,0}>100,-1,c*d);];")
    p = program(text, [("A", "f32", (4, 4))], [("C", "f32", (8, 6)), ("D", "f32", (8, 6))])
    a = normal(4, 4)
    out = run(p, {"A": a})
    want = np.zeros((8, 6))
    want[2:6, 1:5] = a
    assert_close(out["C"], want)
    c, d = np.meshgrid(np.arange(8), np.arange(6), indexing="ij")
    assert_close(out["D"], np.where((c < 1) | (d >= 5), -1, c * d))


def test_bool_tensor_as_condition_and_as_value():
    text = ("L^{5}_{a=0}[M^{bool,g}_{a}=A^{f32,g}_{a}>0;];"
            "L^{5}_{a=0}[C^{f32,g}_{a}=if_then_else(M^{bool,g}_{a},A^{f32,g}_{a},0)+K^{bool,g}_{a}*10;];")
    p = program(text, [("A", "f32", (5,)), ("K", "bool", (5,))],
                [("C", "f32", (5,)), ("M", "bool", (5,))])
    a = np.array([1, -2, 3, -4, 0], np.float32)
    k = np.array([True, False, False, True, True])
    out = run(p, {"A": a, "K": k})
    np.testing.assert_array_equal(out["M"], a > 0)
    assert_close(out["C"], np.where(a > 0, a, 0) + k * 10)


# ---------------------------------------------------------------- arithmetic

def test_power_float_and_integer():
    text = ("L^{6}_{a=0}[C^{f32,g}_{a}=A^{f32,g}_{a}**2+A^{f32,g}_{a}**0.5;];"
            "L^{6}_{a=0}[D^{i32,g}_{a}=N^{i32,g}_{a}**3;];")
    p = program(text, [("A", "f32", (6,)), ("N", "i32", (6,))],
                [("C", "f32", (6,)), ("D", "i32", (6,))])
    a = np.array([4, -1, 0, 2.25, -3, 9], np.float32)
    n = np.array([-3, -1, 0, 2, 5, 7], np.int32)
    with np.errstate(invalid="ignore"):
        want = a.astype(np.float64) ** 2 + np.sqrt(a.astype(np.float64))
    out = run(p, {"A": a, "N": n})
    assert_close(out["C"], want)  # NaN for negative bases under ** 0.5
    np.testing.assert_array_equal(out["D"], n ** 3)


def test_index_as_value_in_float_and_integer_targets():
    text = ("L^{3}_{a=0}L^{4}_{c=0}[C^{f32,g}_{a,c}=a*10+c/2;];"
            "L^{3}_{a=0}L^{4}_{c=0}[D^{i64,g}_{a,c}=a*10+c/2;];")
    p = program(text, [], [("C", "f32", (3, 4)), ("D", "i64", (3, 4))])
    out = run(p, {})
    a, c = np.meshgrid(np.arange(3), np.arange(4), indexing="ij")
    assert_close(out["C"], a * 10 + c / 2)               # true division in f32
    np.testing.assert_array_equal(out["D"], a * 10 + c // 2)  # truncating in i64


def test_integer_division_truncates_toward_zero():
    p = program("L^{6}_{a=0}[C^{i32,g}_{a}=A^{i32,g}_{a}/2;];", [("A", "i32", (6,))],
                [("C", "i32", (6,))])
    a = np.array([-5, -4, -1, 1, 4, 5], np.int32)
    np.testing.assert_array_equal(run_one(p, {"A": a}), np.trunc(a / 2).astype(np.int32))


def test_intrinsics_and_mixed_dtype_reads():
    text = ("L^{6}_{a=0}[C^{f64,g}_{a}=exp(A^{f32,g}_{a})+log(abs(A^{f32,g}_{a}))+sqrt(abs(A^{f32,g}_{a}))"
            "+erf(A^{f32,g}_{a})+N^{i64,g}_{a}/4;];")
    p = program(text, [("A", "f32", (6,)), ("N", "i64", (6,))], [("C", "f64", (6,))])
    a, n = normal(6), np.arange(6, dtype=np.int64)
    x = a.astype(np.float64)
    erf = np.array([math.erf(v) for v in x])
    assert_close(run_one(p, {"A": a, "N": n}),
                 np.exp(x) + np.log(np.abs(x)) + np.sqrt(np.abs(x)) + erf + n / 4, rtol=1e-12)


SPECIAL = [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 6e-8, 1e-40, 65504.0, -65504.0,
           3.4e38, -2.5]


@settings(max_examples=12, deadline=None)
@given(code=st.sampled_from(["f16", "bf16", "f32", "f64"]), fn=st.sampled_from(["max", "min"]),
       pairs=st.lists(st.tuples(st.sampled_from(SPECIAL) | st.floats(width=32),
                                st.sampled_from(SPECIAL) | st.floats(width=32)),
                      min_size=1, max_size=40))
def test_max_and_min_propagate_nan_like_pytorch(code, fn, pairs):
    """Float max/min give NaN when either operand is NaN (PyTorch's maximum/minimum, max
    pooling, relu), otherwise ``a > b ? a : b`` (``<`` for min) to the bit: ties, +0 against -0
    included, give the second operand; in every float dtype, and through a reduction (the
    accumulator is the first operand)."""
    import ml_dtypes
    dtype = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32,
             "f64": np.float64}[code]
    n = len(pairs)
    with np.errstate(over="ignore"):
        a = np.array([x for x, _ in pairs]).astype(dtype)
        d = np.array([y for _, y in pairs]).astype(dtype)
    p = program(f"L^{{{n}}}_{{i=0}}[C^{{{code},g}}_{{i}}={fn}(A^{{{code},g}}_{{i}},"
                f"D^{{{code},g}}_{{i}});];", [("A", code, (n,)), ("D", code, (n,))],
                [("C", code, (n,))])
    got = run_one(p, {"A": a, "D": d})
    wide_a, wide_d = a.astype(np.float64), d.astype(np.float64)
    keep = wide_a > wide_d if fn == "max" else wide_a < wide_d
    want = np.where(keep, a, d)
    nan = np.isnan(wide_a) | np.isnan(wide_d)
    np.testing.assert_array_equal(np.isnan(got.astype(np.float64)), nan)
    assert got[~nan].tobytes() == want[~nan].tobytes()
    # a reduction over the pairs: NaN anywhere makes the result NaN, else the extreme value
    r = program(f"L^{{{n}}}_{{i=0}}[C^{{{code},g}}_{{0}}={fn}(C^{{{code},g}}_{{0}},"
                f"A^{{{code},g}}_{{i}});];", [("A", code, (n,))], [("C", code, (1,))])
    (reduced,) = run_one(r, {"A": a}).astype(np.float64)
    if np.isnan(wide_a).any():
        assert np.isnan(reduced)
    else:
        assert reduced == (wide_a.max() if fn == "max" else wide_a.min())


# ---------------------------------------------------------------- dtypes

@pytest.mark.parametrize("code,dtype,rtol", [
    ("f16", "float16", 2e-3), ("f32", "float32", 1e-6), ("f64", "float64", 1e-13),
    ("i32", "int32", 0), ("i64", "int64", 0),
])
def test_dtypes(code, dtype, rtol):
    text = (f"L^{{4}}_{{a=0}}L^{{5}}_{{c=0}}[C^{{{code},g}}_{{a}}=C^{{{code},g}}_{{a}}"
            f"+(A^{{{code},g}}_{{a,c}}*3-1);];")
    p = program(text, [("A", code, (4, 5))], [("C", code, (4,))])
    a = (RNG.standard_normal((4, 5)) * 4).astype(dtype)
    out = run_one(p, {"A": a})
    assert out.dtype == np.dtype(dtype)
    want = (a.astype(np.float64) * 3 - 1).sum(1)
    if rtol:
        assert_close(out, want, rtol=rtol, atol=rtol)
    else:
        np.testing.assert_array_equal(out, want.astype(dtype))


def test_f16_erf_and_pow_are_computed():
    p = program("L^{5}_{a=0}[C^{f16,g}_{a}=erf(A^{f16,g}_{a})+A^{f16,g}_{a}**2;];",
                [("A", "f16", (5,))], [("C", "f16", (5,))])
    a = np.array([-1, -0.5, 0, 0.5, 2], np.float16)
    want = np.array([math.erf(v) for v in a.astype(float)]) + a.astype(float) ** 2
    assert_close(run_one(p, {"A": a}), want, rtol=2e-3, atol=2e-3)


def test_bf16_runs_through_ml_dtypes():
    import ml_dtypes
    p = program("L^{4}_{a=0}[C^{bf16,g}_{a}=A^{bf16,g}_{a}*2+exp(A^{bf16,g}_{a});];",
                [("A", "bf16", (4,))], [("C", "bf16", (4,))])
    a = np.array([0, 1, -1, 0.5], dtype=ml_dtypes.bfloat16)
    out = run_one(p, {"A": a})
    x = a.astype(np.float64)
    assert_close(out.astype(np.float64), x * 2 + np.exp(x), rtol=2e-2, atol=2e-2)


# ---------------------------------------------------------------- options and arguments

def test_reverse_parallel_runs_parallel_loops_backwards():
    # a false P claim: iteration a reads what iteration a-1 wrote, so order matters
    text = "P^{5}_{a=0}[F^{f32,g}_{a}=if_then_else(a<1,1,F^{f32,g}_{a-1})*2;];"
    p = program(text, [], [("F", "f32", (5,))])
    forward = run_one(p, {}, serial=True)
    backward = run_one(p, {}, reverse_parallel=True)
    assert_close(forward, 2.0 ** np.arange(1, 6))
    assert np.isnan(backward[1:]).all()   # reads elements not written yet: the NaN fill shows
    assert "4 - a" in lower(p, reverse_parallel=True).script()


def test_the_reverse_order_check_compiles_once_and_still_sees_order():
    """The verifier's two runs (P/V/B serial in order, and reversed, both poisoned) come from
    one directed build whose direction is a run-time argument: one compilation, and the
    reversed run still shows a false P claim."""
    from leir_egraph.lower.build import build_counts
    from leir_egraph.verify.session import equal_target, reverse_order_check
    text = "P^{6}_{a=0}[F^{f32,g}_{a}=if_then_else(a<1,1,F^{f32,g}_{a-1})*3;];"
    p = program(text, [], [("F", "f32", (6,))])
    before = build_counts()["compiled"]
    forward = run_one(p, {}, target=equal_target(), serial=True, poison=True)
    backward = run_one(p, {}, target=equal_target(), reverse_parallel=True, poison=True)
    assert build_counts()["compiled"] - before == 1
    assert_close(forward, 3.0 ** np.arange(1, 7))
    assert np.isnan(backward[1:]).all()
    problem = reverse_order_check(p, {})
    assert problem is not None and "changes F at 5 of 6" in problem
    assert "leir_reverse" in lower(p, directed=True, poison=True).script()


def test_poison_shows_reads_of_unwritten_intermediate_elements():
    text = ("L^{3}_{a=0}[X^{f32,g}_{a*2}=A^{f32,g}_{a};];"
            "L^{5}_{a=0}[C^{f32,g}_{a}=X^{f32,g}_{a};];")
    p = program(text, [("A", "f32", (3,))], [("C", "f32", (5,))])
    a = normal(3)
    out = run_one(p, {"A": a}, poison=True)
    assert_close(out[::2], a)
    assert np.isnan(out[1::2]).all()


def test_stored_values_fill_missing_inputs_and_errors_name_the_input():
    p = program("L^{3}_{a=0}[C^{f32,g}_{a}=A^{f32,g}_{a}*W^{f32,g}_{a};];",
                [("A", "f32", (3,)), ("W", "f32", (3,))], [("C", "f32", (3,))],
                values={"W": np.array([1, 2, 3], np.float32)})
    assert_close(run_one(p, {"A": np.ones(3, np.float32)}), [1, 2, 3])
    with pytest.raises(ValueError, match="missing input 'A'"):
        run(p, {})
    with pytest.raises(ValueError, match="input 'A' has shape \\[4\\]"):
        run(p, {"A": np.ones(4, np.float32)})
    with pytest.raises(ValueError, match="unexpected input"):
        run(p, {"A": np.ones(3, np.float32), "Z": np.ones(3)})


def test_invalid_program_is_refused_before_tvm():
    from leir_egraph.leir import LeirValidationError
    p = program("L^{4}_{a=0}[C^{f32,g}_{a}=A^{f32,g}_{a+1};];", [("A", "f32", (4,))],
                [("C", "f32", (4,))])
    with pytest.raises(LeirValidationError, match="reads index 1..4"):
        lower(p)
    assert issubclass(LoweringError, ValueError)


def test_literals_are_cast_to_the_target_dtype():
    # 524288 is beyond float16 (the reference's f16 MSELoss divides by it): it becomes inf;
    # 300 wraps in int8 as a C cast does
    text = ("L^{3}_{a=0}[C^{f16,g}_{a}=A^{f16,g}_{a}/524288;];"
            "L^{3}_{a=0}[D^{i8,g}_{a}=N^{i8,g}_{a}+300;];")
    p = program(text, [("A", "f16", (3,)), ("N", "i8", (3,))],
                [("C", "f16", (3,)), ("D", "i8", (3,))])
    out = run(p, {"A": np.array([1, -2, 3], np.float16), "N": np.array([1, 2, -3], np.int8)})
    np.testing.assert_array_equal(out["C"], np.float16(1) / np.float16(np.inf) * np.array([1, -2, 3]))
    np.testing.assert_array_equal(out["D"], np.array([45, 46, 41], np.int8))


# ---------------------------------------------------------------- the host CPU target

def test_host_cpu_target_and_the_exact_target(monkeypatch):
    """The llvm target names the host CPU (float16 converts in hardware, not through software
    calls); ``LEIR_LLVM_MCPU=generic`` leaves it out. The host CPU contracts a*b+c into FMA;
    the exact target that judges equality does not: on a float16 matmul it gives the same bits
    as the portable baseline, and exactly a loop that rounds every product and sum to float16."""
    from leir_egraph.lower.targets import cpu_target, exact_target, host_cpu
    p = program("L^{9}_{i=0}L^{7}_{j=0}L^{13}_{k=0}"
                "[C^{f16,g}_{i,j}=C^{f16,g}_{i,j}+A^{f16,g}_{i,k}*D^{f16,g}_{k,j};];",
                [("A", "f16", (9, 13)), ("D", "f16", (13, 7))], [("C", "f16", (9, 7))])
    a, d = normal(9, 13, dtype="float16"), normal(13, 7, dtype="float16")
    inputs = {"A": a, "D": d}
    host_cpu.cache_clear()
    monkeypatch.setenv("LEIR_LLVM_MCPU", "generic")
    try:
        assert "mcpu" not in cpu_target()
    finally:
        monkeypatch.delenv("LEIR_LLVM_MCPU")
        host_cpu.cache_clear()
    assert cpu_target().get("mcpu") == host_cpu()
    per_op = np.zeros((9, 7), np.float16)
    for k in range(13):
        per_op = (per_op + (a[:, k:k + 1] * d[k:k + 1, :])).astype(np.float16)
    portable = {"kind": "llvm", "opt-level": 0}
    for target in (exact_target(**{"opt-level": 0}), portable):
        assert np.array_equal(run_one(p, inputs, target=target).view(np.uint16),
                              per_op.view(np.uint16))
    fast = run_one(p, inputs, target=cpu_target())
    assert_close(fast, a.astype(np.float64) @ d.astype(np.float64), rtol=2e-2, atol=2e-2)
