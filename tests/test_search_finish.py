"""The parallel finish of a search (search/finish.py): with more than one thread, the best
program's nests get their outer parallel axis as a P loop -- one bound_loop_parallelization step per
nest, B -> P on a translated nest -- judged against the root and kept only if the confirmation
timing says it is faster than the best. Real egglog steps, real TVM builds and timings."""

from __future__ import annotations

from dataclasses import replace

import pytest

from leir_egraph import Program
from leir_egraph.cost import CPU, cost
from leir_egraph.lower import lower
from leir_egraph.search import Judge, RulesProposer, search
from leir_egraph.search.commands import table
from leir_egraph.search.finish import finish_steps
from leir_egraph.verify import Verifier

# two translated nests (outer loop B, serial on a CPU): an element-wise map and a row sum
TEXT = ("B^{256}_{tx=0}L^{512}_{a=0}[C^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,a})*2;];"
        "B^{256}_{tx=0}L^{512}_{a=0}[D^{f32,g}_{tx}=D^{f32,g}_{tx}+C^{f32,g}_{tx,a};];")
SIG = {"inputs": [{"name": "A", "dtype": "float32", "shape": [256, 512]}],
       "outputs": [{"name": "C", "dtype": "float32", "shape": [256, 512]},
                   {"name": "D", "dtype": "float32", "shape": [256]}]}


@pytest.fixture(scope="module")
def program():
    return Program.parse(TEXT, SIG, "map_and_sum")


def _outer_kinds(program: Program) -> list[str]:
    return [nest.loops[0].kind for nest in program.leir.nests]


def test_the_finish_runs_every_nests_outer_axis_on_the_cores_in_one_step_each(program):
    steps = finish_steps(program, replace(CPU, cores=2))
    assert [s.strategy for s in steps] == ["bound_loop_parallelization"] * 2
    assert {s.rule for s in steps} == {"run-bound-loop-on-cores"}
    final = steps[-1].after
    assert _outer_kinds(final) == ["P", "P"]
    # the reduction axis stays serial; the row sum's P loop is its independent axis
    assert [nest.loops[1].kind for nest in final.leir.nests] == ["L", "L"]
    script = lower(final).script()
    assert script.count("T.parallel(") == 2
    # on one core a P loop is a fork and join around the serial loop: the model expects no gain
    assert finish_steps(program, replace(CPU, cores=1)) == []


def test_a_search_at_two_threads_ends_with_parallel_nests_only_if_confirmed(program,
                                                                            monkeypatch):
    monkeypatch.setenv("LEIR_NUM_THREADS", "2")
    with Verifier() as verifier:   # started after the count is set: its worker times on 2
        judge = Judge(program, verifier=verifier, trials=1, timeout=60)
        # the search's own strategies add no P loop: any comes from the finish
        proposer = RulesProposer("cost", strategies=["loop_unrolling"], lookahead=1)
        result = search(program, "greedy", proposer, judge=judge, max_samples=1, iterations=1)
        finish = result.finish
        assert finish is not None and finish["steps"] == 2
        assert finish["verdict"]["valid"] and finish["verdict"]["threads"] == 2
        finished = [n for n in result.nodes if n.program.text == finish["text"]]
        assert len(finished) == 1
        node = finished[0]
        assert [n.strategy for n in node.path()[-2:]] == ["bound_loop_parallelization"] * 2
        assert _outer_kinds(node.program) == ["P", "P"]
        entry = next(c for c in result.confirmations if c.get("finish"))
        assert entry["threads"] == 2
        again = verifier.verify(program, node.program, trials=1, timing=False)
        assert again.equal and again.independent
    held = max([c["speedup"] for c in result.confirmations
                if not c.get("finish") and c.get("faster")] + [1.0])
    if entry["faster"] and entry["speedup"] > held:
        assert finish["kept"] and result.best is node and result.speedup == entry["speedup"]
        assert "T.parallel(" in lower(result.best.program).script()
    else:
        assert not finish["kept"] and result.best is not node and "reason" in finish
    assert result.to_dict()["finish"] == finish
    assert "parallel finish: 2 P loop(s) on the best's nests" in table(result)


def test_no_finish_on_one_thread(program, monkeypatch):
    monkeypatch.setenv("LEIR_NUM_THREADS", "1")
    with Verifier() as verifier:
        judge = Judge(program, verifier=verifier, trials=1, timeout=60)
        proposer = RulesProposer("cost", strategies=["loop_unrolling"], lookahead=1)
        result = search(program, "greedy", proposer, judge=judge, max_samples=1, iterations=1)
    assert result.finish is None and "parallel finish" not in table(result)
    assert all(n.strategy not in ("loop_parallelization", "bound_loop_parallelization")
               for n in result.nodes)


def test_the_proposer_offers_the_heaviest_nests_p_loop_first_at_two_threads(program,
                                                                           monkeypatch):
    """With two timing threads the cost model ranks a P loop by its gain: of the
    parallelizing steps, the one on the heaviest nest (the exp map) comes first, and it is
    bound_loop_parallelization's one-step B -> P of the nest's outer axis."""
    monkeypatch.setenv("LEIR_NUM_THREADS", "2")
    proposer = RulesProposer("cost", lookahead=1)
    weights = [n.seconds for n in cost(program, proposer.machine).nests]
    parallel = [t for t in proposer.ranked(program)
                if t.strategy in ("loop_parallelization", "bound_loop_parallelization")]
    first = parallel[0]
    assert first.rule == "run-bound-loop-on-cores"
    heaviest = weights.index(max(weights))
    assert [k for k, (a, b) in enumerate(zip(program.leir.nests, first.after.leir.nests))
            if a != b] == [heaviest]
    assert first.after.leir.nests[heaviest].loops[0].kind == "P"
