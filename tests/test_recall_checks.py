"""The checks benchmarks/reference_recall.py adds to the verifier before it counts a reference
transition as a sound move we owe: CUDA validity, inputs with zeros, inputs x100 (and where the
last one decides), and which guard of ours refuses a move. Real programs, real TVM runs."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from reference_recall import (cuda_failure, finite_domain, refusing_guard,  # noqa: E402
                              stress_failure)

from leir_egraph.leir import Program  # noqa: E402

SIG = {"inputs": [{"name": "A", "shape": [4, 8], "dtype": "float32"},
                  {"name": "C", "shape": [4, 8], "dtype": "float32"}],
       "outputs": [{"name": "D", "shape": [4, 8], "dtype": "float32"}]}
NEST = "B^{4}_{tx=0}L^{8}_{a=0}"


def prog(body: str) -> Program:
    return Program.parse(f"{NEST}[D^{{f32,g}}_{{tx,a}}={body};];", SIG)


def test_a_division_by_a_value_that_may_be_zero_fails_on_zero_inputs():
    before = prog("A^{f32,g}_{tx,a}+C^{f32,g}_{tx,a}")
    split = f"{NEST}[D^{{f32,g}}_{{tx,a}}=A^{{f32,g}}_{{tx,a}}/C^{{f32,g}}_{{tx,a}}*C^{{f32,g}}_{{tx,a}}+C^{{f32,g}}_{{tx,a}};];"
    assert stress_failure(before, split, 0) == "zeros"
    swapped = f"{NEST}[D^{{f32,g}}_{{tx,a}}=C^{{f32,g}}_{{tx,a}}+A^{{f32,g}}_{{tx,a}};];"
    assert stress_failure(before, swapped, 0) is None


def test_an_exponential_split_overflows_on_large_inputs():
    before = prog("exp(A^{f32,g}_{tx,a})")
    split = f"{NEST}[D^{{f32,g}}_{{tx,a}}=exp(A^{{f32,g}}_{{tx,a}}-C^{{f32,g}}_{{tx,a}})*exp(C^{{f32,g}}_{{tx,a}});];"
    assert stress_failure(before, split, 0) == "overflow"
    # exp(A) alone overflows too where A is large: only elements the original keeps finite count
    assert stress_failure(before, f"{NEST}[D^{{f32,g}}_{{tx,a}}=exp(A^{{f32,g}}_{{tx,a}})*1;];", 0) is None


def test_the_overflow_check_decides_only_outside_the_value_splits_domain():
    assert finite_domain("exponential_split") and finite_domain("multiplicative_split")
    assert finite_domain("additive_split")
    assert not finite_domain("factorization") and not finite_domain("loop_reorder")


def test_local_memory_shared_by_two_kernels_is_no_cuda_program():
    before = prog("A^{f32,g}_{tx,a}+C^{f32,g}_{tx,a}")
    staged = (f"{NEST}[E^{{f32,l}}_{{tx,a}}=A^{{f32,g}}_{{tx,a}}+C^{{f32,g}}_{{tx,a}};];"
              f"{NEST}[D^{{f32,g}}_{{tx,a}}=E^{{f32,l}}_{{tx,a}};];")
    assert "does not outlive a kernel" in cuda_failure(before, staged)
    kept = (f"{NEST}[E^{{f32,l}}_{{tx,a}}=A^{{f32,g}}_{{tx,a}}+C^{{f32,g}}_{{tx,a}};"
            f"D^{{f32,g}}_{{tx,a}}=E^{{f32,l}}_{{tx,a}};];")
    assert cuda_failure(before, kept) is None


def test_the_guard_that_refuses_a_reference_move_is_named():
    """sympy's sqf splits softmax's exp(x-max) into exp(-max)*exp(x): defined_values refuses
    it (a new exponential); a move none of our rules makes at all names no guard."""
    row = {"signature": SIG, "name": "softmax-like"}
    before = prog("exp(A^{f32,g}_{tx,a}-C^{f32,g}_{tx,a})")
    split = f"{NEST}[D^{{f32,g}}_{{tx,a}}=exp(-C^{{f32,g}}_{{tx,a}})*exp(A^{{f32,g}}_{{tx,a}});];"
    assert refusing_guard("factorization", row, before, split) == "defined_values"
    other = f"{NEST}[D^{{f32,g}}_{{tx,a}}=exp(A^{{f32,g}}_{{tx,a}}-C^{{f32,g}}_{{tx,a}})+0;];"
    assert refusing_guard("factorization", row, before, other) is None


def test_the_references_online_softmax_fails_at_an_attention_masks_minus_inf():
    """The reference's online sum of exponentials starts each row from exp(-inf - I_0): NaN when
    the row's first element is -inf (I_0 = -inf), where the two-pass sum is finite."""
    sig = {"inputs": [{"name": "A", "shape": [4, 8], "dtype": "float32"}],
           "outputs": [{"name": "E", "shape": [4], "dtype": "float32"}]}
    before = Program.parse(
        "B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,a});];"
        "B^{4}_{tx=0}L^{8}_{a=0}[E^{f32,g}_{tx}=E^{f32,g}_{tx}+exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx});];",
        sig)
    online = ("B^{4}_{tx=0}L^{8}_{a=0}[I^{f32,g}_{tx,a}=max(if_then_else(a-1<0,-inf,"
              "I^{f32,g}_{tx,a-1}),A^{f32,g}_{tx,a});M^{f32,g}_{tx,a}=if_then_else(a-1<0,1,"
              "M^{f32,g}_{tx,a-1})*exp(if_then_else(a-1<0,-inf,I^{f32,g}_{tx,a-1})-I^{f32,g}_{tx,a})"
              "+exp(A^{f32,g}_{tx,a}-I^{f32,g}_{tx,a});];B^{4}_{tx=0}[E^{f32,g}_{tx}=M^{f32,g}_{tx,7};];")
    assert stress_failure(before, online, 0) == "masked"


def test_the_loose_key_is_the_same_for_a_program_and_its_exact_canonical_form(golden_rows):
    """loose() filters which of our outputs need the exact canonical form: it must forget at
    least what that form forgets (names, order, signs, products with one, literal spelling)."""
    from reference_recall import loose

    from conftest import golden_program
    from leir_egraph.leir.canonical import exact_canonical_text
    rows = [r for r in golden_rows if r["dtype"] == "float32" and r["name"] != "add_add"]
    for r in rows[::5]:
        program = golden_program(r)
        for text in (program.text, program.text.replace("+1)", "+1.0*1)")):
            variant = Program.parse(text, program.signature)
            assert loose(text) == loose(exact_canonical_text(variant)), r["id"]
