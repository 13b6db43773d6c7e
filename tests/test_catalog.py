"""The strategy catalogue: all 43 of the paper plus the project's own, their classes, and the
generated documentation."""

from __future__ import annotations

import re
from pathlib import Path

from leir_egraph.egraph import load_strategies
from leir_egraph.egraph.catalog import strategies_markdown

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "docs" / "REFERENCE.md"

# The paper's table (docs/REFERENCE.md §3): id -> (category, class). This is the oracle the rule
# files' own metadata must reproduce; the rule files stay the single source of truth for the
# project.
PAPER = {
    "operator_fusion": ("graph", "medium"), "operator_fission": ("graph", "easy"),
    "compute_inline": ("graph", "medium"), "expression_splitting": ("graph", "medium"),
    "tensor_concat_to_fuse_operators": ("graph", "difficult"),
    "tensor_split_to_decouple_operators": ("graph", "difficult"),
    "common_subexpression_elimination": ("graph", "difficult"),
    "expression_reorder": ("graph", "medium"), "loop_reorder": ("operator", "medium"),
    "loop_tiling": ("operator", "difficult"), "loop_split": ("operator", "difficult"),
    "loop_fusion": ("operator", "difficult"), "loop_unrolling": ("operator", "medium"),
    "loop_parallelization": ("operator", "medium"), "loop_vectorization": ("operator", "medium"),
    "loop_binding": ("operator", "medium"), "reduction_factorization": ("operator", "difficult"),
    "cache_read_write": ("memory", "difficult"), "layout_transformation": ("memory", "difficult"),
    "set_storage_scope": ("memory", "difficult"), "set_storage_layout": ("memory", "difficult"),
    "precompute_indices": ("memory", "difficult"), "factorization": ("math", "easy"),
    "expand_factorization": ("math", "easy"), "cancellation": ("math", "easy"),
    "expand_cancellation": ("math", "easy"), "apart": ("math", "easy"), "together": ("math", "easy"),
    "powsimp": ("math", "easy"), "expand_powsimp": ("math", "easy"), "logsimp": ("math", "easy"),
    "expand_log": ("math", "easy"), "collect": ("math", "easy"), "expand_collect": ("math", "easy"),
    "partially_equivalent_then_correct": ("math", "difficult"),
    "exponential_split": ("math", "medium"), "multiplicative_split": ("math", "medium"),
    "additive_split": ("math", "medium"),
    "normal_loop_max_to_prefix_max": ("math", "difficult"),
    "normal_loop_summation_on_exp_to_prefix_summation_on_exp": ("math", "difficult"),
    "online_softmax": ("math", "difficult"), "flashattention_wo_tiling": ("math", "difficult"),
    "normal_matmul_to_prefix_matmul_based_on_online_softmax": ("math", "difficult"),
}
# Strategies beyond the paper (docs/STRATEGIES.md lists them like the paper's): id -> (category,
# class), all three from issue 39: register_tiling, the one-step form of a register-tiled
# reduction kernel; split_vectorization, a long innermost loop split into vector lanes in one
# step; bound_loop_parallelization, a GPU-bound (B) loop run on the CPU's cores (B -> P).
PROJECT = {"register_tiling": ("operator", "difficult"),
           "split_vectorization": ("operator", "difficult"),
           "bound_loop_parallelization": ("operator", "medium")}
INVERSE_PAIRS = [("operator_fusion", "operator_fission"), ("loop_tiling", "loop_fusion"),
                 ("loop_split", "loop_fusion"), ("apart", "together"),
                 ("collect", "expand_collect"), ("factorization", "expand_factorization"),
                 ("cancellation", "expand_cancellation"), ("powsimp", "expand_powsimp"),
                 ("logsimp", "expand_log"), ("compute_inline", "expression_splitting")]


def test_the_oracle_table_matches_the_documented_one():
    rows = re.findall(r"^\| \d+ \| (\w+) \| (\w+) \| (\w+) \|", REFERENCE.read_text(), re.M)
    assert len(rows) == 43 and {r[0]: (r[1], r[2]) for r in rows} == PAPER


def test_all_43_strategies_with_the_papers_category_and_difficulty_class():
    strategies = {s.id: s for s in load_strategies()}
    assert set(strategies) == set(PAPER) | set(PROJECT) and not set(PAPER) & set(PROJECT)
    for sid, (category, klass) in (PAPER | PROJECT).items():
        s = strategies[sid]
        assert (s.category, s.difficulty) == (category, klass), (sid, s.score)
    counts = {c: sum(s.category == c for s in strategies.values()) for c in ("graph", "operator", "memory", "math")}
    assert counts == {"graph": 8, "operator": 12, "memory": 5, "math": 21}


def test_inverse_pairs_are_declared_both_ways():
    strategies = {s.id: s for s in load_strategies()}
    for a, b in INVERSE_PAIRS:
        assert b in strategies[a].inverse and a in strategies[b].inverse, (a, b)


def test_simplify_and_expand_directions_are_declared_for_easy_pairs():
    strategies = {s.id: s for s in load_strategies()}
    for a, b in INVERSE_PAIRS:
        if strategies[a].difficulty == "easy" and strategies[b].difficulty == "easy":
            assert {strategies[a].direction, strategies[b].direction} == {"simplify", "expand"}, (a, b)


def test_generated_documentation_is_current():
    expected = strategies_markdown(load_strategies())
    assert (ROOT / "docs" / "STRATEGIES.md").read_text() == expected, \
        "regenerate with: leir strategies --markdown > docs/STRATEGIES.md"
