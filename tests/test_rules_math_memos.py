"""The math providers' memos (rules/math/*: sympy forms per equation, nests' inputs and writes,
erased nests) are keyed by exactly what they depend on: a program's facts computed cold equal
its facts computed after other programs sharing its nests and equations filled the memos."""

from __future__ import annotations

import sys
from functools import lru_cache

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from leir_egraph.egraph import load_strategies
from leir_egraph.egraph.loaded import LoadedProgram
from leir_egraph.egraph.vocabulary import PROVIDER_MODULE_PREFIX, vocabulary_of
from leir_egraph.leir import Program, Signature, parse
from leir_egraph.leir import analysis
from leir_egraph.leir.ast import Leir

MATH = [s for s in load_strategies() if s.category == "math"]


def _clear_memos() -> None:
    """Empty every memo of the loaded providers' modules and of leir.analysis: what follows
    runs cold."""
    modules = [m for name, m in sys.modules.items() if name.startswith(PROVIDER_MODULE_PREFIX)]
    for module in [*modules, analysis]:
        for value in list(vars(module).values()):
            if callable(getattr(value, "cache_clear", None)):
                value.cache_clear()


def _facts(vocab, wanted, program) -> list:
    return [(f.name, f.columns()) for f in vocab.facts(LoadedProgram(program), wanted)]


def _sharing(p: Program, other: Program, how: str) -> Program:
    """A program holding ``p``'s nests (and so its equations) in another context."""
    nests = {"reversed": p.leir.nests[::-1], "doubled": p.leir.nests * 2,
             "after another": other.leir.nests + p.leir.nests,
             "without its first": p.leir.nests[1:] or p.leir.nests}[how]
    signature = p.signature
    if how == "after another":   # both programs' tensors, p's where the names clash
        mine, theirs = p.signature.to_dict(), other.signature.to_dict()
        names = {t["name"] for part in ("inputs", "outputs") for t in mine[part]}
        signature = Signature.from_dict({part: mine[part] + [t for t in theirs[part]
                                                             if t["name"] not in names]
                                         for part in ("inputs", "outputs")})
    return Program(Leir(tuple(nests)), signature, p.name)


@settings(max_examples=8, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.filter_too_much])
@given(data=st.data())
def test_math_facts_cold_equal_facts_with_warm_memos(golden_rows, data):
    vocab = vocabulary_of(MATH)
    wanted = {name for _, declared in vocab.producers for name in declared}
    rows = [r for r in golden_rows if r["leir"].count(";]") <= 12]
    p, other = (Program(parse(r["leir"]), Signature.from_dict(r["signature"]), r["name"])
                for r in data.draw(st.lists(st.sampled_from(rows), min_size=2, max_size=2,
                                            unique_by=lambda r: r["name"]), label="programs"))
    seen = data.draw(st.lists(st.sampled_from(["reversed", "doubled", "after another",
                                               "without its first"]),
                              min_size=1, max_size=3, unique=True), label="seen before")
    _clear_memos()
    cold = _facts(vocab, wanted, p)
    assume(any(name == "SympyForm" for name, _ in cold))   # the costliest memo has a say
    _clear_memos()
    for how in seen:
        _facts(vocab, wanted, _sharing(p, other, how))
    assert _facts(vocab, wanted, p) == cold   # the same facts, in the same order


def test_facts_do_not_follow_a_program_spelled_otherwise_seen_before():
    """``S^{f32,g}_{}`` and ``S^{f32,g}`` are equal accesses of a scalar that print and encode
    differently: memos keyed by programs or equations must not answer one with the other's
    terms (they did, through equality that left the spelling out)."""
    vocab = vocabulary_of(MATH)
    wanted = {name for _, declared in vocab.producers for name in declared}
    signature = Signature.from_dict({
        "inputs": [{"name": "A", "dtype": "float32", "shape": [4, 8]},
                   {"name": "S", "dtype": "float32", "shape": []}],
        "outputs": [{"name": "C", "dtype": "float32", "shape": [4, 8]}]})

    def spelled(s: str) -> Program:
        return Program.parse("B^{4}_{tx=0}L^{8}_{a=0}"
                             f"[C^{{f32,g}}_{{tx,a}}=exp(A^{{f32,g}}_{{tx,a}}-{s})+{s};];",
                             signature)

    braced, bare = spelled("S^{f32,g}_{}"), spelled("S^{f32,g}")
    assert braced.leir == bare.leir and braced != bare
    _clear_memos()
    cold = _facts(vocab, wanted, bare)
    assert any(name == "ExtraSplitBy" for name, _ in cold)
    _clear_memos()
    _facts(vocab, wanted, braced)
    assert _facts(vocab, wanted, bare) == cold
    _clear_memos()
    with analysis.exploration_memos():   # nor an exploration's per-nest memos
        _facts(vocab, wanted, braced)
        assert _facts(vocab, wanted, bare) == cold


@lru_cache(maxsize=None)
def _explored(kind: str) -> tuple[Program, ...]:
    """A zoo program's programs to depth 2 (depth 1 for RMSNorm) under the benchmark's mixed
    strategies, in discovery order: each differs from its parent in a nest or two."""
    from leir_egraph.explore import explore
    from leir_egraph.frontend import from_torch
    from leir_egraph.workloads import instantiate
    module, inputs, _ = instantiate(kind, seed=0)
    root = from_torch(module, inputs, name=kind)
    space = explore(root, MIXED, depth=1 if kind == "RMSNorm" else 2)
    return tuple(space.programs.values())


MIXED = ["loop_reorder", "loop_fusion", "loop_parallelization", "loop_vectorization",
         "loop_unrolling", "compute_inline", "set_storage_scope", "expression_splitting",
         "exponential_split", "operator_fission"]


@settings(max_examples=12, deadline=None, derandomize=True)
@given(data=st.data())
def test_facts_in_an_exploration_scope_equal_each_programs_cold_facts(data):
    """Inside ``analysis.exploration_memos`` (an exploration's scope) the providers reuse
    what they computed about a nest for an earlier program asking the same of the program
    around it: every program's facts, one after another in the scope, are its facts computed
    alone and cold -- the same facts in the same order (math, memory and graph providers)."""
    vocab = vocabulary_of([s for s in load_strategies() if s.id in MIXED] + MATH)
    wanted = {name for _, declared in vocab.producers for name in declared}
    pool = _explored(data.draw(st.sampled_from(["softmax", "MSELoss", "LayerNorm",
                                                "RMSNorm"]), label="kind"))
    programs = data.draw(st.lists(st.sampled_from(pool), min_size=2, max_size=6),
                         label="programs")
    _clear_memos()
    cold = []
    for p in programs:
        _clear_memos()
        cold.append(_facts(vocab, wanted, p))
    _clear_memos()
    with analysis.exploration_memos():
        warm = [_facts(vocab, wanted, p) for p in programs]
    assert warm == cold
    assert any(name == "ExtraSplitBy" for facts in cold for name, _ in facts)
