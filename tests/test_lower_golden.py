"""The lowering reproduces PyTorch on a seeded sample of the golden corpus (real reference
translator LEIR with real inputs and PyTorch outputs)."""

from __future__ import annotations

import random

import pytest

from leir_egraph.lower.golden import DEFAULT_DIR, check_entry, load_corpus

SAMPLE_SIZE = 60
REQUIRED_RATE = 0.95

# Entries that do not match PyTorch at the corpus tolerance, and why. None is a lowering bug:
# each is a difference between the translator's LEIR and the PyTorch module it came from, or
# float32 rounding in PyTorch's own result.
KNOWN_FAILING = {
    "gold-0102": "SELU f64: the translator wrote the SELU constants rounded to float32 "
                 "(1.0507010221481323), PyTorch uses the exact double; relative error 3e-8",
    "gold-0164": "TripletMarginLoss f64: the LEIR omits pairwise_distance's eps=1e-6; "
                 "relative error 3e-8",
    "gold-0189": "Conv2d_Add_Scale_Sigmoid_GroupNorm f32: PyTorch's float32 output itself is "
                 "2.9e-5 from the exact value (the LEIR evaluated in f64 agrees with ours)",
    "gold-0195": "BMM_InstanceNorm_Sum_ResidualAdd_Multiply f32: PyTorch's float32 output is "
                 "5.8e-5 from the exact value",
    "gold-0247": "Gemm_BiasAdd_Hardtanh_Mish_GroupNorm f32: group norm over 3 elements; "
                 "PyTorch's float32 output is 1.5e-5 from the exact value",
}

pytestmark = pytest.mark.skipif(not (DEFAULT_DIR / "golden_corpus.jsonl").exists(),
                                reason="golden corpus not present")


@pytest.fixture(scope="module")
def corpus():
    return load_corpus()


def test_golden_sample_matches_pytorch(corpus):
    sample = random.Random(20261122).sample(corpus, SAMPLE_SIZE)
    outcomes = [check_entry(entry) for entry in sample]
    invalid = [o for o in outcomes if o.status == "invalid"]
    ran = [o for o in outcomes if o.status != "invalid"]
    failing = [o for o in ran if o.status != "equal"]
    unexpected = [f"{o.id} {o.name}: {o.status}: {o.detail}" for o in failing
                  if o.id not in KNOWN_FAILING]
    assert not unexpected, "unexpected golden failures:\n" + "\n".join(unexpected)
    rate = 1 - len(failing) / len(ran)
    assert rate >= REQUIRED_RATE, f"equal rate {rate:.1%} over {len(ran)} programs"
    assert {o.dtype for o in ran} == {"float32", "float64"}
    assert all(o.name == "add_add" for o in invalid)  # the translator's empty-subscript bug


def test_known_failing_entries_still_fail_for_the_stated_reason(corpus):
    by_id = {entry["id"]: entry for entry in corpus}
    for ident in ("gold-0102", "gold-0164"):  # literal/eps differences: small, not zero
        outcome = check_entry(by_id[ident])
        assert outcome.status == "mismatch"
        assert outcome.max_abs_err < 1e-6


def test_invalid_entries_are_the_add_add_translator_bug(corpus):
    invalid = [check_entry(e) for e in corpus if "_{}" in e["leir"]]
    assert invalid and all(o.status == "invalid" and "empty subscript" in o.detail
                           for o in invalid)
