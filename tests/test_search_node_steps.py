"""search/kernel_steps.py ``node_matches`` and ``all_steps(known=)``: a search node's own steps,
its kernel-local strategies' matches reused per kernel and its window-local ones' per window
key (egraph/windows.py, ``raw``) from the nodes ranked before it, are
exactly the steps of enumerating it from scratch -- programs, strategies, rules, paths,
bindings, guard facts, chains of thought, and their order (issue 34: "search ranks a node from
the matches of the terms it shares with its parent plus the new ones")."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings, strategies as st

from leir_egraph import Program
from leir_egraph.egraph import all_steps
from leir_egraph.search import RulesProposer
from leir_egraph.workloads import steptp

# the steps whose windows change the nests around them: a child drawn among them holds a fused
# or inlined window (or a register tile's fresh tensor)
WINDOWED = ("operator_fusion", "compute_inline", "register_tiling")


def scratch(program: Program) -> list[dict]:
    """Every step of ``program`` enumerated from scratch, textual duplicates dropped as the
    proposer drops them, each with everything it says (``Transition.to_dict``) and its path."""
    seen, out = {program.text}, []
    for t in all_steps(program):
        if t.after.text not in seen:
            seen.add(t.after.text)
            out.append({**t.to_dict(), "path": t.path})
    return out


def said(steps) -> list[dict]:
    return [{**t.to_dict(), "path": t.path} for t in steps]


_PROPOSERS: dict[int, RulesProposer] = {}


def _proposer(index: int) -> RulesProposer:
    """One proposer per workload across hypothesis' examples (a search's lifetime: its kernel
    matches are kept from every node ranked before)."""
    if index not in _PROPOSERS:
        _PROPOSERS[index] = RulesProposer("cost")
    return _PROPOSERS[index]


def _walk(index: int, data, depth: int) -> None:
    """Workload ``index``'s root and a walk of ``depth`` drawn children, each a step of the
    node before it (a fusion, inline or register tile where the node has one and hypothesis
    draws so), through one proposer across the examples: every node's steps equal
    enumerating it from scratch, and its kernel-local matches were reused (not matched again
    whole)."""
    entry = next(e for e in steptp.load() if e.index == index)
    program = steptp.program(entry, "cpu", seed=0)
    proposer = _proposer(index)
    windows = proposer._shared_kernels()._node_windows
    for step in range(depth + 1):
        reused = windows.reused_programs
        steps = proposer.steps(program)
        assert proposer._shared_kernels()._kernel_matches(program) is not None, program.text
        assert said(steps) == scratch(program), program.text
        if index == 67 and step:   # a child of the MHA node: most windows' matches kept
            assert windows.reused_programs == reused + 1, windows.reason
        if step == depth or not steps:
            break
        windowed = [t for t in steps if t.strategy in WINDOWED]
        pool = windowed if windowed and data.draw(st.booleans(), label="windowed") else steps
        program = pool[data.draw(st.integers(0, len(pool) - 1), label="step")].after


@settings(max_examples=1, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_the_mha_nodes_child_enumerated_from_its_kernels_is_enumerated_from_scratch(data):
    """#67, the MHA node at CPU size (25 nests, about 7,300 steps), and one drawn child."""
    _walk(67, data, 1)


@settings(max_examples=2, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_childs_steps_from_reused_kernel_matches_are_its_steps_from_scratch(data):
    """A drawn smaller workload (#6 one nest, #14, #81 elementwise chains with windows to
    fuse and inline) and a walk of up to two drawn children."""
    _walk(data.draw(st.sampled_from([6, 14, 81]), label="workload"), data,
          data.draw(st.integers(1, 2), label="depth"))


def test_a_nest_term_in_two_kernels_is_enumerated_whole():
    """Two kernels holding one nest term: the per-kernel matches are not used (a fact about the
    term would be the whole program's), and the steps are still those from scratch; the same
    program without the repeated kernel reuses them."""
    sig = {"inputs": [{"name": "A", "dtype": "float32", "shape": [4, 8]}],
           "outputs": [{"name": "E", "dtype": "float32", "shape": [4, 8]}]}
    double = "B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}*2;];"
    add = "B^{4}_{tx=0}L^{8}_{a=0}[E^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+1;];"
    proposer = RulesProposer("cost")
    kernels = proposer._shared_kernels()
    for text, reused in ((double + double + add, False), (double + add, True)):
        program = Program.parse(text, sig)
        assert (kernels.node_matches(program) is not None) == reused
        assert said(proposer.steps(program)) == scratch(program)
