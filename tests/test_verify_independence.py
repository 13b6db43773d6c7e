"""The static half of the Independent level: P/V/B loops whose iterations write distinct
elements pass, the others are named with a reason (pure Python, no TVM)."""

from __future__ import annotations

import pytest

from leir_egraph.leir import Program, Signature
from leir_egraph.verify import check_independent


def program(text: str, inputs, outputs) -> Program:
    return Program.parse(text, Signature.of(inputs, outputs))


def test_planted_parallel_loop_on_a_reduction_axis_is_flagged():
    p = program("L^{16}_{a=0}P^{8}_{c=0}[X^{f32,g}_{a}=X^{f32,g}_{a}+A^{f32,g}_{a,c};];",
                [("A", "f32", (16, 8))], [("X", "f32", (16,))])
    result = check_independent(p)
    assert not result
    assert "P^{8}_{c=0}" in result.reason and "does not depend on c" in result.reason


def test_legal_parallel_loop_passes():
    p = program("P^{16}_{a=0}L^{8}_{c=0}[X^{f32,g}_{a}=X^{f32,g}_{a}+A^{f32,g}_{a,c};];",
                [("A", "f32", (16, 8))], [("X", "f32", (16,))])
    result = check_independent(p)
    assert result.ok and result.reason is None


def test_reference_translator_binds_b_to_a_reduction_axis():
    # gold Hingeloss: every tx adds into the scalar H
    text = ("B^{128}_{tx=0}L^{1}_{a=0}[H^{f32,g}=H^{f32,g}+F^{f32,g}_{tx,a};];"
            "B^{1}_{tx=0}[G^{f32,g}=H^{f32,g}/128;];")
    result = check_independent(program(text, [("F", "f32", (128, 1))], [("G", "f32", ())]))
    assert not result and "writes the scalar H" in result.reason


@pytest.mark.parametrize("text,ok", [
    # tiled index: a*8+c with c < 8 never collides across a
    ("P^{16}_{a=0}L^{8}_{c=0}[X^{f32,g}_{a*8+c}=A^{f32,g}_{a,c};];", True),
    ("V^{16}_{a=0}L^{8}_{c=0}[X^{f32,g}_{a*8+c}=A^{f32,g}_{a,c};];", True),
    # c < 9 overlaps the next tile
    ("P^{16}_{a=0}L^{9}_{c=0}[X^{f32,g}_{a*8+c}=A^{f32,g}_{a,c%8};];", False),
    # // and % decided by enumeration
    ("P^{16}_{a=0}[X^{f32,g}_{a//8,a%8}=A^{f32,g}_{a,0};];", True),
    ("P^{16}_{a=0}[X^{f32,g}_{a//2,0}=A^{f32,g}_{a,0};];", False),
    # two equations writing disjoint halves of J
    ("P^{16}_{a=0}L^{8}_{c=0}[J^{f32,g}_{a,c}=A^{f32,g}_{a,c};J^{f32,g}_{a,c+8}=A^{f32,g}_{a,c};];"
     "L^{16}_{a=0}[X^{f32,g}_{a}=J^{f32,g}_{a,15};];", True),
    # ... and two equations where iteration a's second write hits iteration a+1's first
    ("P^{16}_{a=0}[J^{f32,g}_{a}=A^{f32,g}_{a,0};J^{f32,g}_{a+1}=A^{f32,g}_{a,1};];"
     "L^{16}_{a=0}[X^{f32,g}_{a}=J^{f32,g}_{a};];", False),
    # a parallel loop inside a nested nest, enclosing index shared by both iterations
    ("L^{4}_{d=0}[L^{4}_{a=0}[P^{8}_{c=0}[X^{f32,g}_{a*8+c}=A^{f32,g}_{a+d,c};];];];", True),
    # extent 1 claims nothing
    ("P^{1}_{a=0}L^{16}_{c=0}[X^{f32,g}_{0}=A^{f32,g}_{c,0};];", True),
    # the loop index only in a gather read, not in the write
    ("P^{16}_{a=0}[X^{f32,g}_{0}=A^{f32,g}_{a,0};];", False),
])
def test_write_disjointness(text, ok):
    p = program(text, [("A", "f32", (16, 8))], [("X", "f32", (144,)) if "X^{f32,g}_{a*8+c}" in text
                                                 else ("X", "f32", (2, 8)) if "a//8" in text
                                                 else ("X", "f32", (8, 1)) if "a//2" in text
                                                 else ("X", "f32", (16,))])
    result = check_independent(p)
    assert result.ok is ok, result.reason
    if not ok:
        assert result.reason


def test_enumeration_names_a_witness():
    p = program("P^{16}_{a=0}L^{9}_{c=0}[X^{f32,g}_{a*8+c}=A^{f32,g}_{a,c%8};];",
                [("A", "f32", (16, 8))], [("X", "f32", (129,))])
    reason = check_independent(p).reason
    assert "iterations a=0 and a=1" in reason and "X[8]" in reason


def test_gather_in_a_write_is_not_provable():
    p = program("P^{6}_{a=0}[X^{f32,g}_{G^{i64,g}_{a}}=A^{f32,g}_{a};];",
                [("A", "f32", (6,)), ("G", "i64", (6,))], [("X", "f32", (10,))])
    result = check_independent(p)
    assert not result and "gather" in result.reason


def test_golden_corpus_b_loops():
    from conftest import GOLDEN_DIR

    from leir_egraph.lower.golden import load_corpus
    wanted = {"softmax": True, "Matmul3D": True, "Hingeloss": False, "CrossEntropyLoss": False}
    entries = {e["name"]: e for e in load_corpus(GOLDEN_DIR)
               if e["dtype"] == "float32" and e["name"] in wanted}
    for name, expected in wanted.items():
        program_ = Program.parse(entries[name]["leir"], entries[name]["signature"])
        assert check_independent(program_).ok is expected, name
