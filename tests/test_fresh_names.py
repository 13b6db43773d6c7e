"""Fresh tensor names as placeholders (egraph/parameters.py): ``FreshTensor k "@tk"`` is the
same fact for every program, and a match read for a program gets that program's names. The
steps must be exactly those of stating the program's own names as the fact, as it was: the
same programs, rules, sites, bindings and chains of thought, in the same order, for a full
enumeration and for a seeded draw, on real programs whose rules take up to three fresh names
(flashattention_wo_tiling), two (online_softmax, reduction_factorization,
common_subexpression_elimination) or one."""

from __future__ import annotations

import json
from dataclasses import replace
from functools import lru_cache

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from leir_egraph.egraph import engine as engine_module
from leir_egraph.egraph.engine import Engine
from leir_egraph.egraph.parameters import (CORE_PARAMETERS, FRESH_TENSOR, PLACEHOLDER,
                                           FreshNames, ParameterSet, fresh_tensor_names,
                                           names_fresh_tensors)
from leir_egraph.egraph.steps import all_steps, drawn_steps, resolve, transitions_from
from leir_egraph.egraph.vocabulary import vocabulary_of
from leir_egraph.leir.program import Program

from conftest import GOLDEN_CORPUS

# every strategy whose rules read FreshTensor
FRESH = ("common_subexpression_elimination", "expression_splitting", "flashattention_wo_tiling",
         "normal_loop_max_to_prefix_max", "online_softmax",
         "normal_loop_summation_on_exp_to_prefix_summation_on_exp",
         "normal_matmul_to_prefix_matmul_based_on_online_softmax",
         "partially_equivalent_then_correct", "reduction_factorization", "register_tiling",
         "cache_read_write", "precompute_indices", "layout_transformation")
# golden programs where several of them apply (online softmax, CSE, tiling, factorisation)
GOLDEN = ("gold-0342", "gold-0160", "gold-0000")


def _named_facts(loaded):
    """The core parameters as they were: ``FreshTensor`` holding the program's own names."""
    names = fresh_tensor_names(loaded.program)
    for fact in CORE_PARAMETERS.facts(loaded):
        if fact.relation is FRESH_TENSOR:
            k = fact.columns()[0]
            yield FRESH_TENSOR(k, names[k])
        else:
            yield fact


@lru_cache(maxsize=None)
def _strategies():
    return resolve(list(FRESH))


@lru_cache(maxsize=None)
def _reference_engine() -> Engine:
    """An engine of the FreshTensor strategies whose vocabulary states the program's names."""
    vocabulary = vocabulary_of(_strategies())
    named = replace(vocabulary, parameter_sets=tuple(
        ParameterSet(p.relations, _named_facts) if p is CORE_PARAMETERS else p
        for p in vocabulary.parameter_sets))
    saved = engine_module.vocabulary_of
    engine_module.vocabulary_of = lambda strategies: named
    try:
        return Engine(_strategies())
    finally:
        engine_module.vocabulary_of = saved


@lru_cache(maxsize=None)
def _program(name: str) -> Program:
    if name.startswith("zoo:"):
        from leir_egraph.frontend import from_torch
        from leir_egraph.workloads import instantiate
        module, inputs, _ = instantiate(name[4:], seed=0)
        return from_torch(module, inputs, name=name[4:])
    with open(GOLDEN_CORPUS) as f:
        entry = next(e for e in map(json.loads, f) if e["id"] == name)
    return Program.parse(entry["leir"], entry["signature"], name=name)


def _seen(steps) -> list[tuple]:
    return [(t.strategy, t.rule, t.path, t.after.text, t.cot, tuple(sorted(t.bindings.items())))
            for t in steps]


PROGRAMS = ("zoo:ScaledDotProductAttention", "zoo:Matrix_vector_multiplication", *GOLDEN)


def test_the_placeholders_are_no_names_and_every_fresh_tensor_rule_is_known():
    """A placeholder can never be a LEIR tensor name, and every strategy above reads
    FreshTensor (the list is the rule files' own)."""
    from leir_egraph.leir import parse
    from leir_egraph.leir.validate import LeirValidationError
    with pytest.raises((LeirValidationError, ValueError)):
        parse(f"L^{{4}}_{{a=0}}[{PLACEHOLDER}0^{{f32,g}}_{{a}}=A^{{f32,g}}_{{a}};];")
    reading = {s.id for s in resolve(None) if any(names_fresh_tensors(r) for r in s.rules)}
    assert reading == set(FRESH)


@pytest.mark.parametrize("name", PROGRAMS)
def test_placeholder_steps_are_the_named_steps(name):
    """Every step of the FreshTensor strategies, placeholders put back, is the step stating
    the program's names gives, in the same order; at least one took a fresh tensor."""
    program = _program(name)
    got = all_steps(program, _strategies())
    strategies = {s.id: s for s in _strategies()}
    want = transitions_from(program, _reference_engine().matches(program, named=False),
                            strategies)
    assert _seen(got) == _seen(want)
    fresh = set(fresh_tensor_names(program))
    assert any(fresh & set(t.bindings.values()) for t in got)
    assert not any(PLACEHOLDER in t.after.text for t in got)


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(name=st.sampled_from(PROGRAMS), cap=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_a_seeded_draw_with_placeholders_is_the_named_draw(name, cap, seed):
    """``drawn_steps`` (queries run once, the drawn applications built) draws and builds the
    same transitions with placeholders as with the program's names."""
    program = _program(name)

    def seed_of(sid):
        return f"{seed}|{sid}"

    got, counts = drawn_steps(program, _strategies(), cap, seed_of)
    want, want_counts = drawn_steps(program, _strategies(), cap, seed_of,
                                    engine=_reference_engine())
    assert counts == want_counts
    assert [(k, *s) for (k, _), s in zip(got, _seen(t for _, t in got))] == \
        [(k, *s) for (k, _), s in zip(want, _seen(t for _, t in want))]


def test_fresh_names_rename_terms_only_where_they_hold_a_placeholder():
    """``FreshNames.term`` returns the very object where nothing is renamed and puts the
    program's k-th free name of the supply in for ``@tk``."""
    program = _program("gold-0000")
    names = FreshNames(program)
    plain = ("MkVarEmpty", "A", "f32", "g")
    assert names.term(plain) is plain
    held = ("Read", ("MkVarEmpty", f"{PLACEHOLDER}1", "f32", "l"))
    assert names.term(held) == ("Read", ("MkVarEmpty", fresh_tensor_names(program)[1],
                                         "f32", "l"))
