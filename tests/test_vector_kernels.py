"""Vector kernels on the CPU (issue 39): a V loop becomes SIMD code -- its exp and log too, as
calls to glibc's libmvec within a few ULP of the scalar routine (lower/vector_math.py) -- and
register_tiling turns a matrix product's scalar reduction into a vectorised, register-tiled
kernel that computes the same bits.

The assembly checks build with the timing target (the host CPU, ``lower.targets.cpu_target``)
and read TVM's generated assembly (``executable.mod.inspect_source("asm")``); a packed
arithmetic instruction on an ``xmm``/``ymm``/``zmm`` register is SIMD (``mulps``, ``vfmadd231ps``,
``vaddpd``: the ``p`` of ``ps``/``pd`` is "packed", scalar ones end in ``ss``/``sd``).
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leir_egraph.egraph import single_steps
from leir_egraph.leir import Program
from leir_egraph.verify.soundness import judge

from conftest import assert_verified

PACKED = re.compile(r"^\s*v?(?:add|sub|mul|fmadd\d*|fnmadd\d*|fmsub\d*)p[sd]\s+.*%[xyz]mm",
                    re.M)
MATMUL = "B^{8}_{tx=0}L^{32}_{a=0}L^{16}_{c=0}[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+A^{f32,g}_{tx,c}*C^{f32,g}_{c,a};];"
MATMUL_SIG = {"inputs": [{"name": "A", "dtype": "float32", "shape": [8, 16]},
                         {"name": "C", "dtype": "float32", "shape": [16, 32]}],
              "outputs": [{"name": "D", "dtype": "float32", "shape": [8, 32]}]}


def _asm(program: Program, target="llvm") -> str:
    """The assembly of ``program`` as ``lower.build`` compiles it (default: the timing target)."""
    from leir_egraph.lower import build
    return build(program, target).executable.mod.inspect_source("asm")


def _elementwise(fn: str, dtype: str, lanes: int, rows: int = 4, cols: int = 64) -> Program:
    """``C = fn(A)`` over rows x cols with the columns split into V^{lanes} vectors."""
    np_dtype = {"f16": "float16", "f32": "float32", "f64": "float64"}[dtype]
    sig = {"inputs": [{"name": "A", "dtype": np_dtype, "shape": [rows, cols]}],
           "outputs": [{"name": "C", "dtype": np_dtype, "shape": [rows, cols]}]}
    at = f"{{tx,d*{lanes}+a}}"
    return Program.parse(f"B^{{{rows}}}_{{tx=0}}L^{{{cols // lanes}}}_{{d=0}}V^{{{lanes}}}_{{a=0}}"
                         f"[C^{{{dtype},g}}_{at}={fn}(A^{{{dtype},g}}_{at});];", sig)


def _vector_math_here() -> bool:
    from leir_egraph.lower.targets import cpu_target
    from leir_egraph.lower.vector_math import applies
    return applies(cpu_target())


needs_vector_math = pytest.mark.skipif(not _vector_math_here(),
                                       reason="no AVX2 or no libmvec on this host")


def test_a_v_loop_lowers_to_packed_simd_arithmetic():
    sig = {"inputs": [{"name": "A", "dtype": "float32", "shape": [4, 64]}],
           "outputs": [{"name": "C", "dtype": "float32", "shape": [4, 64]}]}
    vector = Program.parse(
        "B^{4}_{tx=0}L^{8}_{d=0}V^{8}_{a=0}[C^{f32,g}_{tx,d*8+a}=A^{f32,g}_{tx,d*8+a}*3+1;];", sig)
    packed = PACKED.findall(_asm(vector))
    assert packed, "no packed arithmetic in the V loop's assembly"
    # an f64 V loop too (pd), whatever the vector width of the host
    sig64 = {"inputs": [{"name": "A", "dtype": "float64", "shape": [4, 64]}],
             "outputs": [{"name": "C", "dtype": "float64", "shape": [4, 64]}]}
    vector64 = Program.parse(vector.text.replace("f32", "f64"), sig64)
    assert any("pd" in line for line in PACKED.findall(_asm(vector64)))


COMPARE = re.compile(r"^\s*v(?:p?cmp\w*|max|min)p[sdh]\s+.*%[yz]mm", re.M)


@pytest.mark.parametrize("code", ["f16", "f32"])
def test_a_nan_keeping_max_pool_lowers_to_packed_compares(code):
    """Workload #38's 2x2 max pool, loops as the translator writes them (no V loop): its
    NaN-keeping max asks NaN of the bits (lower/expr.py ``_isnan``), so LLVM vectorises the
    pool -- packed compares on ymm/zmm registers; TVM's ``isnan`` made it scalar code
    (``vucomiss`` per element), 80x slower on float16."""
    dtype = {"f16": "float16", "f32": "float32"}[code]
    sig = {"inputs": [{"name": "A", "dtype": dtype, "shape": [4, 8, 32, 32]}],
           "outputs": [{"name": "C", "dtype": dtype, "shape": [4, 8, 16, 16]}]}
    pool = Program.parse(
        f"B^{{4}}_{{tx=0}}L^{{8}}_{{a=0}}L^{{16}}_{{c=0}}L^{{16}}_{{d=0}}L^{{2}}_{{f=0}}"
        f"L^{{2}}_{{g=0}}[C^{{{code},g}}_{{tx,a,c,d}}=max(C^{{{code},g}}_{{tx,a,c,d}},"
        f"A^{{{code},g}}_{{tx,a,c*2+f,d*2+g}});];", sig)
    assert COMPARE.findall(_asm(pool)), "no packed compare in the max pool's assembly"


CALL = re.compile(r"^\s*call[q]?\s+(\S+?)(?:@PLT)?$", re.M)


@needs_vector_math
@pytest.mark.parametrize("fn, dtype, lanes, cols", [
    ("exp", "f32", 8, 64),     # one AVX2 register: _ZGVdN8v_expf
    ("exp", "f32", 5, 60),     # 5 lanes padded to 8
    ("exp", "f32", 32, 64),    # cut into register-wide pieces
    ("log", "f32", 12, 48),    # 384 bits: three 128-bit calls
    ("exp", "f64", 4, 64),
    ("log", "f64", 3, 63),
    ("exp", "f16", 16, 64),    # widened to float32: _ZGVeN16v_expf (or two AVX2 calls)
    ("erf", "f32", 14, 56),    # TVM's vectoriser would scalarise erf: vector_math.ERF_CARRIER
    ("erf", "f64", 4, 64),
    ("erf", "f16", 16, 64),    # TVM computes float16's erf in float32
])
def test_a_v_loop_of_exp_log_or_erf_calls_libmvec_where_the_equality_build_does_not(
        fn, dtype, lanes, cols, monkeypatch):
    """The timing build of a V loop holding exp/log/erf calls libmvec's SIMD routine and never the
    scalar one; the build that judges equality (baseline x86-64, ``exact_target``) and a build
    with ``LEIR_VECTOR_MATH=0`` call the scalar routine per lane."""
    from leir_egraph.lower.targets import exact_target
    program = _elementwise(fn, dtype, lanes, cols=cols)
    scalar = fn + ("" if dtype == "f64" else "f")
    vector = re.compile(r"_ZGV[bde]N(\d+)v_" + scalar + "$")
    calls = CALL.findall(_asm(program))
    assert any(vector.match(c) for c in calls), calls
    assert scalar not in calls, calls
    for other in (_asm(program, exact_target()),):
        calls = CALL.findall(other)
        assert scalar in calls and not any(vector.match(c) for c in calls), calls
    monkeypatch.setenv("LEIR_VECTOR_MATH", "0")
    calls = CALL.findall(_asm(program))
    assert scalar in calls and not any(vector.match(c) for c in calls), calls


# The largest distance (ULP) from glibc's scalar routine measured over 2^20 inputs each (half
# random bit patterns, half uniform over the range with finite non-zero results): libmvec's
# bound here, and the figure lower/vector_math.py states.
LIBMVEC_ULPS = {("exp", "f32"): 2, ("exp", "f64"): 3, ("log", "f32"): 4, ("log", "f64"): 1,
                ("exp", "f16"): 0, ("log", "f16"): 1,   # float16: all 65,536 inputs
                ("erf", "f32"): 2, ("erf", "f64"): 2, ("erf", "f16"): 0}   # erf: 2^18 inputs


def _ulps(x, y) -> int:
    """The largest distance in units in the last place between ``x`` and ``y`` (same dtype)
    where neither is NaN; -0 and +0 are 1 apart."""
    import numpy as np
    it = {2: np.int16, 4: np.int32, 8: np.int64}[x.dtype.itemsize]
    def ordered(v):
        i = v.view(it).astype(np.int64)
        return np.where(i < 0, np.iinfo(it).min - i, i)
    d = np.abs(ordered(x) - ordered(y))
    d[np.isnan(x) | np.isnan(y)] = 0
    return int(d.max())


@needs_vector_math
@settings(max_examples=8, deadline=None, derandomize=True)
@given(data=st.data(), fn=st.sampled_from(["exp", "log", "erf"]),
       dtype=st.sampled_from(["f16", "f32", "f64"]))
def test_libmvec_stays_within_its_measured_ulps_of_the_scalar_routine(data, fn, dtype):
    """Any inputs (NaN, +-inf, +-0, subnormals, the largest finite values, anything between):
    the timing build's V loop gives NaN, inf and zero exactly where the scalar routine of the
    equality build does, and every other result within LIBMVEC_ULPS of it -- far inside
    Equal's tolerance (verify/compare.py: rtol 1e-4 in float32, 1e-9 in float64). float16 is
    computed in float32 both ways and rounded back."""
    import numpy as np

    from leir_egraph.lower import run
    from leir_egraph.lower.targets import exact_target
    width = {"f16": 16, "f32": 32, "f64": 64}[dtype]
    values = data.draw(st.lists(st.floats(width=width, allow_nan=True, allow_infinity=True),
                                min_size=64, max_size=64))
    a = np.array(values, dtype=f"float{width}").reshape(4, 16)
    program = _elementwise(fn, dtype, 4 if dtype == "f64" else 8, cols=16)
    fast, scalar = run(program, {"A": a})["C"], run(program, {"A": a}, exact_target())["C"]
    for test in (np.isnan, np.isposinf, np.isneginf, lambda v: v == 0):
        np.testing.assert_array_equal(test(fast), test(scalar))
    assert _ulps(fast, scalar) <= LIBMVEC_ULPS[fn, dtype]


def test_register_tiling_of_a_matrix_product_is_equal_and_vectorised(verifier):
    root = Program.parse(MATMUL, MATMUL_SIG)
    steps = single_steps(root, "register_tiling")
    assert {t.bindings["w"] for t in steps} == {"8", "16", "32"}   # the lane widths dividing 32
    # and 2-D tiles of 2 and 4 of the 8 rows (the ROW_TILES dividing 8)
    assert {t.bindings.get("rows") for t in steps} == {None, "2", "4"}
    for t in steps:
        assert_verified(verifier, root, t.after, "register_tiling")
        text = t.after.text
        # the reduction loop c now encloses the (rows and) lanes, which accumulate in a local
        # tile
        rows = r"U\^\{%s\}_\{f=0\}" % t.bindings["rows"] if "rows" in t.bindings else ""
        assert re.search(r"L\^\{16\}_\{c=0\}" + rows + r"V\^\{\d+\}_\{d=0\}\[E\^\{f32,l\}",
                         text), text
        assert PACKED.findall(_asm(t.after)), f"no packed arithmetic: {text}"
    # bitwise on every special-value family (inf, NaN, +-0, subnormals, near overflow)
    verdict = judge(verifier, root, steps[0].after, ulps=0, domain="float")
    assert verdict.skipped is None and verdict.ok and verdict.bitwise, verdict.failure


_TERMS = {
    "product": "A^{DT,g}_{tx,c}*C^{DT,g}_{c,a}",
    "shifted": "exp(A^{DT,g}_{tx,c})-C^{DT,g}_{c,a}*a",
    "guarded": "if_then_else(c<=a,A^{DT,g}_{tx,c},C^{DT,g}_{c,a})",
}


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(op=st.sampled_from(["+", "-", "*", "max", "min"]),
       dtype=st.sampled_from(["f16", "f32", "f64"]),
       term=st.sampled_from(sorted(_TERMS)), rows=st.integers(1, 4),
       width=st.sampled_from([8, 12, 16, 21]), depth=st.integers(2, 5))
def test_register_tiling_keeps_every_bit(verifier, op, dtype, term, rows, width, depth):
    """Any tileable accumulation (five operators, three dtypes, terms that read the output
    index as a value or under a condition) keeps every output bit on every special-value input
    set (NaN, inf, signed zeros: max and min keep NaN in the lowering as in PyTorch, and each
    element still meets the same operands in the same order): each element still takes its
    terms in the order of the reduction loop. Widths that are no multiple of the lanes
    exercise the remainder nest; 2 and 4 rows the 2-D tiles."""
    np_dtype = {"f16": "float16", "f32": "float32", "f64": "float64"}[dtype]
    e = _TERMS[term].replace("DT", dtype)
    acc = f"D^{{{dtype},g}}_{{tx,a}}"
    value = (f"{op}({acc},{e})" if op in ("max", "min") else
             f"{acc}{op}({e})" if op != "*" else f"{acc}*({e})")
    text = f"B^{{{rows}}}_{{tx=0}}L^{{{width}}}_{{a=0}}L^{{{depth}}}_{{c=0}}[{acc}={value};];"
    sig = {"inputs": [{"name": "A", "dtype": np_dtype, "shape": [rows, depth]},
                      {"name": "C", "dtype": np_dtype, "shape": [depth, width]}],
           "outputs": [{"name": "D", "dtype": np_dtype, "shape": [rows, width]}]}
    root = Program.parse(text, sig)
    steps = single_steps(root, "register_tiling")
    assert {int(t.bindings["w"]) for t in steps} == {w for w in (8, 16, 32, 64) if w <= width}
    tiled_rows = {int(t.bindings["rows"]) for t in steps if "rows" in t.bindings}
    assert tiled_rows == ({r for r in (2, 4) if rows % r == 0} if width % 8 == 0 else set())
    for t in steps:
        verdict = judge(verifier, root, t.after, ulps=0, domain="float")
        assert verdict.skipped is None and verdict.ok and verdict.bitwise, verdict.failure


@pytest.mark.parametrize("text, why", [
    ("B^{4}_{tx=0}L^{16}_{a=0}L^{5}_{c=0}[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+A^{f32,g}_{tx,c}*D^{f32,g}_{tx,a};];",
     "the term reads the accumulated tensor"),
    ("B^{4}_{tx=0}L^{16}_{a=0}L^{5}_{c=0}[D^{f32,g}_{tx,15-a}=D^{f32,g}_{tx,15-a}+A^{f32,g}_{tx,c};];",
     "the output loop is not the last subscript on its own"),
    ("B^{4}_{tx=0}L^{7}_{a=0}L^{5}_{c=0}[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+A^{f32,g}_{tx,c};];",
     "7 output columns hold no tile of 8 lanes"),
    ("B^{4}_{tx=0}L^{16}_{a=0}L^{5}_{c=0}[D^{f32,g}_{a,tx}=D^{f32,g}_{a,tx}+A^{f32,g}_{tx,c};];",
     "the loop outside the reduction indexes a strided dimension"),
])
def test_register_tiling_refuses(text, why):
    sig = {"inputs": [{"name": "A", "dtype": "float32", "shape": [4, 5]}],
           "outputs": [{"name": "D", "dtype": "float32",
                        "shape": [16, 4] if "D^{f32,g}_{a,tx}" in text else
                        [4, 7] if "L^{7}" in text else [4, 16]}]}
    assert single_steps(Program.parse(text, sig), "register_tiling") == [], why


@pytest.mark.slow   # builds the root and its six tiles
def test_a_max_tile_keeps_nan_as_torch_amax_does():
    """The max tile computes what PyTorch's ``amax`` does on NaN and infinities: the lowering's
    max keeps NaN (TVM's own would drop it) and the tile starts from -inf."""
    import numpy as np
    import torch

    from leir_egraph.lower import run
    sig = {"inputs": [{"name": "A", "dtype": "float32", "shape": [4, 3, 16]}],
           "outputs": [{"name": "D", "dtype": "float32", "shape": [4, 16]}]}
    root = Program.parse("B^{4}_{tx=0}L^{16}_{a=0}L^{3}_{c=0}"
                         "[D^{f32,g}_{tx,a}=max(D^{f32,g}_{tx,a},A^{f32,g}_{tx,c,a});];", sig)
    a = np.random.default_rng(0).standard_normal((4, 3, 16)).astype(np.float32)
    a[0, 1, 3] = a[1, 0, 0] = a[3, 2, 15] = np.nan
    a[2, :, 5] = -np.inf
    a[2, 0, 6] = np.inf
    expected = torch.amax(torch.from_numpy(a), dim=1).numpy()
    steps = single_steps(root, "register_tiling")
    assert {t.bindings.get("rows") for t in steps} == {None, "2", "4"}
    for program in [root] + [t.after for t in steps]:
        np.testing.assert_array_equal(run(program, {"A": a})["D"], expected)
