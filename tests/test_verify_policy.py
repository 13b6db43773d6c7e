"""Random inputs (ranges inferred from the program) and the tolerance policy of Equal."""

from __future__ import annotations

import numpy as np

from leir_egraph.leir import Program, Signature
from leir_egraph.verify import compare, integer_ranges, random_inputs
from leir_egraph.verify.compare import TOLERANCE


def program(text: str, inputs, outputs, values=None) -> Program:
    return Program.parse(text, Signature.of(inputs, outputs), values=values or {})


def test_gather_subscripts_are_drawn_within_the_indexed_dimension():
    p = program("B^{32}_{tx=0}[D^{f32,g}_{tx}=A^{f32,g}_{tx,C^{i64,g}_{tx}}+H^{f32,g}_{C^{i64,g}_{tx}+2};];",
                [("A", "f32", (32, 10)), ("H", "f32", (9,)), ("C", "i64", (32,))],
                [("D", "f32", (32,))])
    assert integer_ranges(p) == {"C": (0, 6)}    # both uses: 0..9 and 0..(9-1-2)
    for trial in range(3):
        c = random_inputs(p, seed=0, trial=trial)["C"]
        assert c.dtype == np.int64 and c.min() >= 0 and c.max() <= 6


def test_integers_compared_with_an_index_take_its_range_and_others_are_small_nonzero():
    p = program("L^{5}_{a=0}L^{7}_{c=0}[D^{f32,g}_{a,c}=if_then_else(c==K^{i32,g}_{a},1,0)"
                "+N^{i32,g}_{a}+Q^{u8,g}_{a};];",
                [("K", "i32", (5,)), ("N", "i32", (5,)), ("Q", "u8", (5,))],
                [("D", "f32", (5, 7))])
    assert integer_ranges(p) == {"K": (0, 6)}
    x = random_inputs(p, seed=3, trial=0)
    assert x["K"].min() >= 0 and x["K"].max() <= 6
    assert np.all(x["N"] != 0) and np.all(np.abs(x["N"]) <= 4)
    assert np.all(x["Q"] >= 1) and x["Q"].dtype == np.uint8


def test_trials_differ_seeds_repeat_and_stored_values_are_kept():
    w = np.arange(4, dtype=np.float32)
    p = program("L^{4}_{a=0}[C^{f32,g}_{a}=A^{f32,g}_{a}*W^{f32,g}_{a}+M^{bool,g}_{a};];",
                [("A", "f32", (4,)), ("W", "f32", (4,)), ("M", "bool", (4,))],
                [("C", "f32", (4,))], values={"W": w})
    t0, t1 = random_inputs(p, 7, 0), random_inputs(p, 7, 1)
    assert not np.array_equal(t0["A"], t1["A"])
    assert np.array_equal(t0["A"], random_inputs(p, 7, 0)["A"])
    assert t0["A"].dtype == np.float32 and t0["M"].dtype == np.bool_
    assert t0["W"] is w or np.array_equal(t0["W"], w)


def test_tolerance_policy_per_dtype():
    b = np.array([1.0, -2.0, 100.0], np.float32)
    assert compare(b, b * (1 + 5e-5)).equal                     # within rtol 1e-4
    assert not compare(b, b * (1 + 5e-3)).equal
    # the absolute part follows the output's magnitude: a cancelled element near 0
    big = np.array([1e4, 1e-3], np.float32)
    assert compare(big, big + np.float32(0.05)).equal            # 0.05 <= 1e-5 * 1e4 + ...
    assert not compare(big, big + np.float32(0.5)).equal
    h = np.array([1.0, 3.0], np.float16)
    assert compare(h, (h * 1.004).astype(np.float16)).equal
    assert TOLERANCE["float64"][0] < TOLERANCE["float32"][0] < TOLERANCE["float16"][0]


def test_special_values_must_sit_at_the_same_positions():
    b = np.array([np.nan, np.inf, -np.inf, 1.0])
    assert compare(b, b.copy()).equal
    c = compare(b, np.array([np.nan, np.inf, np.inf, 1.0]))
    assert not c.equal and "+inf at different positions" in c.problem
    c = compare(b, np.array([0.0, np.inf, -np.inf, 1.0]))
    assert not c.equal and "NaN" in c.problem


def test_integers_and_bools_are_exact_and_blank_outputs_are_not_informative():
    assert not compare(np.array([1, 2], np.int64), np.array([1, 3], np.int64)).equal
    assert compare(np.array([True, False]), np.array([True, False])).equal
    assert not compare(np.zeros(3, np.float32), np.zeros(3, np.float32)).informative
    assert compare(np.array([0.0, 2.0]), np.array([0.0, 2.0])).informative
    c = compare(np.zeros((2, 2)), np.zeros((2, 3)))
    assert not c.equal and "shape" in c.problem
