"""Segmented builds of large programs (lower/segments.py, lower/link.py): the same results as
the whole-program build under every lowering option, compiled segments reused across programs
and across the repeated blocks of one program, content-defined boundaries, and a program of
more than 300 nests that builds (its compile time is a benchmark:
benchmarks/large_program_compile.py)."""

from __future__ import annotations

import numpy as np
import pytest

from leir_egraph.leir import Program, Signature
from leir_egraph.leir.names import tensor_name_supply
from leir_egraph.lower import build, lower, run
from leir_egraph.lower import link as linking
from leir_egraph.lower.build import arguments
from leir_egraph.lower.segments import partition, spans
from leir_egraph.lower.tir import LowerOptions

FAST = {"kind": "llvm", "opt-level": 0, "num-cores": 1}


def chain(n: int, width: int = 6, tweak: int = -1) -> Program:
    """``n`` blocks of three nests over an 8 x width state: a product with a weight (an
    accumulation with its implicit zero), a max-reduction of its rows (an intermediate used
    only inside the block) and a residual update with a P loop. Block ``tweak`` scales by 3
    instead of 2."""
    nests, prev = [], "A"
    names = (name for name in tensor_name_supply() if name not in ("A", "C", "W"))
    for k in range(n):
        m, r, s = next(names), next(names), ("C" if k == n - 1 else next(names))
        scale = 3 if k == tweak else 2
        nests.append(f"L^{{8}}_{{a=0}}L^{{{width}}}_{{c=0}}L^{{{width}}}_{{d=0}}"
                     f"[{m}^{{f32,g}}_{{a,c}}={m}^{{f32,g}}_{{a,c}}+{prev}^{{f32,g}}_{{a,d}}"
                     f"*W^{{f32,g}}_{{c,d}};];")
        nests.append(f"L^{{8}}_{{a=0}}L^{{{width}}}_{{c=0}}"
                     f"[{r}^{{f32,g}}_{{a}}=max({r}^{{f32,g}}_{{a}},{m}^{{f32,g}}_{{a,c}});];")
        nests.append(f"P^{{8}}_{{a=0}}L^{{{width}}}_{{c=0}}[{s}^{{f32,g}}_{{a,c}}="
                     f"{prev}^{{f32,g}}_{{a,c}}+({m}^{{f32,g}}_{{a,c}}-{r}^{{f32,g}}_{{a}})"
                     f"*{scale}/{4 * width};];")
        prev = s
    sig = Signature.of([("A", "f32", (8, width)), ("W", "f32", (width, width))],
                       [("C", "f32", (8, width))])
    return Program.parse("".join(nests), sig)


def reference(n: int, a, w, tweak=-1):
    for k in range(n):
        m = a @ w.T
        a = a + (m - m.max(axis=1, keepdims=True)) * (3 if k == tweak else 2) / (4 * w.shape[0])
    return a


def whole(program: Program, **options) -> dict:
    """The same program through the whole-program lowering (one PrimFunc)."""
    import tvm
    ex = tvm.compile(lower(program, **options), target=FAST)
    args = [tvm.runtime.tensor(x) for x in arguments(program, INPUTS)]
    outs = [tvm.runtime.tensor(np.full(s.shape, np.nan, np.float32))
            for s in program.signature.outputs]
    ex(*args, *outs)
    return {s.name: o.numpy() for s, o in zip(program.signature.outputs, outs)}


RNG = np.random.default_rng(0)
INPUTS = {"A": RNG.standard_normal((8, 6)).astype(np.float32),
          "W": (RNG.standard_normal((6, 6)) / 3).astype(np.float32)}


@pytest.mark.parametrize("options", [{}, {"poison": True}, {"serial": True},
                                     {"reverse_parallel": True, "poison": True}])
def test_segmented_build_equals_the_whole_program_build(options):
    p = chain(10)
    assert len(p.leir.nests) > linking.WHOLE_UP_TO and len(partition(p).segments) > 1
    got = run(p, INPUTS, FAST, **options)["C"]
    np.testing.assert_array_equal(got, whole(p, **options)["C"])
    np.testing.assert_allclose(got, reference(10, INPUTS["A"], INPUTS["W"]), rtol=1e-4,
                               atol=1e-5)


def test_segments_assume_only_the_alignment_the_driver_gives_on_the_host_cpu():
    """The driver allocates intermediates under 1 KiB on its stack, 16-byte aligned. Segments
    built for the host CPU (AVX) must not assume TVM's default 64: they did, and aligned vector
    loads from the driver's stack crashed the process on about half the runs of a golden
    attention program (gold-0258)."""
    from leir_egraph.lower.targets import cpu_target
    from leir_egraph.lower.tir import SEGMENT_PARAM_ALIGN, lower_segment
    p = chain(10)
    part = partition(p)
    for seg in part.segments:
        func = lower_segment(seg, "f", LowerOptions())
        assert {b.data_alignment for b in func.params} == {SEGMENT_PARAM_ALIGN}
    assert any(part.allocations)  # the driver does allocate intermediates
    got = run(p, INPUTS, cpu_target())["C"]
    np.testing.assert_allclose(got, reference(10, INPUTS["A"], INPUTS["W"]), rtol=1e-4,
                               atol=1e-5)


def test_unchanged_nests_are_not_compiled_again_and_repeated_blocks_compile_once():
    linking.clear()
    p = chain(12)
    first = linking.link(p, FAST, LowerOptions())
    # 12 blocks that differ only in their tensor names: far fewer functions than segments
    assert first.compiled < first.segments
    q = chain(12, tweak=5)
    second = linking.link(q, FAST, LowerOptions())
    assert 1 <= second.compiled <= 2 < second.segments
    out = run(q, INPUTS, FAST)["C"]
    np.testing.assert_allclose(out, reference(12, INPUTS["A"], INPUTS["W"], tweak=5),
                               rtol=1e-4, atol=1e-5)


def test_segment_boundaries_move_only_next_to_an_inserted_nest():
    p = chain(30, width=5)
    nests = p.leir.nests
    extra = Program.parse("L^{8}_{a=0}L^{5}_{c=0}[Z^{f32,g}_{a,c}=A^{f32,g}_{a,c}*7;];",
                          p.signature).leir.nests
    q_leir = type(p.leir)(nests[:45] + extra + nests[45:])
    before = {tuple(nests[r.start:r.stop]) for r in spans(p.leir)}
    after = {tuple(q_leir.nests[r.start:r.stop]) for r in spans(q_leir)}
    assert len(before - after) <= 2 and len(after - before) <= 3


def test_small_and_bfloat16_programs_are_built_whole():
    small = chain(2)
    assert linking.link(small, FAST, LowerOptions()) is None
    assert "leir_segment" not in build(small, FAST).source()
    big = chain(10)
    assert "leir_segment" in build(big, FAST).source()
    bf16 = Program.parse(chain(10).text.replace("f32", "bf16"), Signature.of(
        [("A", "bf16", (8, 6)), ("W", "bf16", (6, 6))], [("C", "bf16", (8, 6))]))
    assert linking.link(bf16, FAST, LowerOptions()) is None


def test_a_program_of_more_than_300_nests_builds_and_runs():
    p = chain(110, width=4)
    assert len(p.leir.nests) >= 300
    a = INPUTS["A"][:, :4]
    w = INPUTS["W"][:4, :4]
    out = run(p, {"A": a, "W": w}, FAST)["C"]
    np.testing.assert_allclose(out, reference(110, a, w), rtol=1e-3, atol=1e-5)


def test_the_reverse_order_check_of_a_segmented_program_is_one_directed_build():
    """Both runs of the reverse-order check (docs/VERIFY.md) come from one build of the
    segments and the driver, which take the direction at run time; a P loop over a sum's
    terms is caught by it there too (the reversed summation rounds differently)."""
    from leir_egraph.lower.build import build_counts, clear_cache
    from leir_egraph.verify.session import reverse_order_check
    p = chain(10)
    head, _, tail = p.text.rpartition("L^{6}_{d=0}")   # the last block's sum over d
    bad = Program.parse(head + "P^{6}_{d=0}" + tail, p.signature)
    assert bad.text != p.text and len(partition(bad).segments) > 1
    linking.clear()
    clear_cache()
    assert reverse_order_check(p, INPUTS) is None
    compiled = build_counts()["compiled"]
    problem = reverse_order_check(bad, INPUTS)
    assert build_counts()["compiled"] == compiled + 1
    assert problem is not None and problem.startswith("running the P/V/B loops in reverse order "
                                                      "changes C")
