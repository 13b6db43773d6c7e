"""egraph/windows.py: the matches of window-local strategies reused per window key are exactly
those of matching each program whole (issue 34: a match reused for program Q must be what
computing it for Q gives)."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from leir_egraph.egraph import all_steps
from leir_egraph.egraph.encoding import Decoder, uncons
from leir_egraph.egraph.engine import engine_for
from leir_egraph.egraph.steps import resolve
from leir_egraph.egraph.windows import NEW_SHARE, WindowMatches, window_reason
from leir_egraph.workloads import steptp

WINDOWED = ("operator_fusion", "compute_inline", "register_tiling")
# the steps that lead from one program to the next: loop moves, the windowed strategies
# themselves (a fusion or an inline changes the windows around it and the names in use) and
# copies (layout_transformation: a new tensor, a new nest with extents of its own)
MOVES = ("loop_split", "loop_reorder", "loop_vectorization", "layout_transformation",
         *WINDOWED)


def whole(program, strategies) -> Counter:
    """The successors' nests from matching ``program`` whole, each match put in place."""
    decode, n = Decoder(), len(program.leir.nests)
    out: Counter = Counter()
    for m in engine_for(tuple(strategies)).matches(program, list(strategies)):
        if m.lhs is None or m.rhs is None or m.rhs == m.lhs:
            continue
        j = n - len(uncons(m.lhs, "PCons"))
        out[program.leir.nests[:j] + tuple(decode(t) for t in uncons(m.rhs, "PCons"))] += 1
    return out


def windowed(matches: WindowMatches, program) -> Counter:
    nests = program.leir.nests
    return Counter(nests[:j] + new + nests[j + width:]
                   for j, width, new in matches.edits(program))


def test_the_lookahead_strategies_are_window_local():
    strategies = resolve(list(WINDOWED))
    engine = engine_for(tuple(strategies))
    assert [window_reason(s, engine) for s in strategies] == [None, None, None]
    reason = window_reason(resolve(["loop_reorder"])[0], engine_for(tuple(resolve(["loop_reorder"]))))
    assert reason is not None and "Nest" in reason


@pytest.mark.parametrize("index,prefetch", [(67, False), (67, True), (81, True), (6, True)])
def test_reused_matches_equal_whole_matching_along_a_search(index, prefetch):
    """A root and its steps (a search node and its lookahead programs), through one
    WindowMatches, their new windows matched program by program or prefetched together (in
    batches of regions, as the search does): every program's successors equal those of
    matching it whole, and most programs of a many-nest workload are matched from regions,
    not whole. Prefetched programs are never matched whole, and a one-nest workload's (#6:
    every region ends its program) share engine runs."""
    entry = next(e for e in steptp.load() if e.index == index)
    root = steptp.program(entry, "cpu", seed=0)
    strategies = resolve(list(WINDOWED))
    matches = WindowMatches(strategies)
    firsts = all_steps(root, resolve(list(MOVES)))
    programs = [root] + [t.after for t in firsts[::max(1, len(firsts) // 16)]]
    for t in firsts:   # the steps of the windowed strategies themselves, too
        if t.strategy in WINDOWED:
            programs.append(t.after)
            break
    assert windowed(matches, root) == whole(root, strategies)
    if prefetch:
        matches.prefetch(programs[1:])
        assert matches.matched_whole == 1   # the root, asked for before any prefetch
        if len(root.leir.nests) == 1:
            assert matches.runs < matches.regions
    for program in programs[1:]:
        assert windowed(matches, program) == whole(program, strategies), program.text
    if len(root.leir.nests) >= 2 / NEW_SHARE + 2:   # a one-nest change leaves most windows known
        assert matches.regions >= len(programs) // 2
        assert matches.matched_whole < len(programs) // 2


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_reused_matches_equal_whole_matching_on_random_walks(data):
    """Random walks of two steps from small and large workloads (hypothesis draws the workload,
    a node's steps whose windows are prefetched together, and the step walked), one
    WindowMatches across the walk and the examples before it."""
    index = data.draw(st.sampled_from([6, 14, 67, 81]), label="workload")
    entry = next(e for e in steptp.load() if e.index == index)
    program = steptp.program(entry, "cpu", seed=0)
    strategies = resolve(list(WINDOWED))
    matches = _shared(index)
    assert windowed(matches, program) == whole(program, strategies)
    for _ in range(2):
        steps = all_steps(program, resolve(list(MOVES)))
        if not steps:
            break
        ahead = [t.after for t in data.draw(st.lists(st.sampled_from(steps), min_size=1,
                                                      max_size=6), label="steps")]
        matches.prefetch(ahead)   # as a search node's lookahead does
        for after in ahead:
            assert windowed(matches, after) == whole(after, strategies), after.text
        program = ahead[0]


_SHARED: dict[int, WindowMatches] = {}


def _shared(index: int) -> WindowMatches:
    """One WindowMatches per workload across hypothesis' examples (a search's lifetime)."""
    if index not in _SHARED:
        _SHARED[index] = WindowMatches(resolve(list(WINDOWED)))
    return _SHARED[index]


def _chain(names: str, outputs: str):
    """Nests ``names[k] = names[k-1] op c`` over one 4x8 loop pair from input ``A`` (from the
    seventh name on, a second chain from input ``K``)."""
    from leir_egraph import Program
    nests = []
    for k, (src, dst) in enumerate(zip("A" + names, names)):
        if dst == names[0]:
            src = "A"   # a chain starts from an input: the second one from K
        elif len(names) > 6 and dst == names[6]:
            src = "K"
        op = "*2" if k % 2 == 0 else "+1"
        nests.append(f"B^{{4}}_{{tx=0}}L^{{8}}_{{a=0}}[{dst}^{{f32,g}}_{{tx,a}}="
                     f"{src}^{{f32,g}}_{{tx,a}}{op};];")
    sig = {"inputs": [{"name": n, "dtype": "float32", "shape": [4, 8]}
                      for n in ("AK" if len(names) > 6 else "A")],
           "outputs": [{"name": n, "dtype": "float32", "shape": [4, 8]} for n in outputs]}
    return Program.parse("".join(nests), sig)


def test_a_window_key_holds_the_name_facts_of_its_own_tensors_only():
    """A window's key holds the facts of the tensors and extents its nests name and no
    others: a program that gains a tensor elsewhere (``I``, ``J`` appended) reuses the
    windows it shares, while the same nests with another tensor an output (``Intermediate``
    no longer holds of it, compute_inline must not inline it) are matched again."""
    strategies = resolve(list(WINDOWED))
    matches = WindowMatches(strategies)
    base = _chain("CDEFGH", "H")
    assert windowed(matches, base) == whole(base, strategies)
    assert matches.matched_whole == 1
    grown = _chain("CDEFGHIJ", "HJ")   # I, J: a second chain (from K) after the first
    assert windowed(matches, grown) == whole(grown, strategies)
    assert matches.matched_whole == 1 and matches.regions == 1   # windows 0-3 reused
    exposed = _chain("CDEFGH", "DH")   # D an output: not inlined into E
    assert windowed(matches, exposed) == whole(exposed, strategies)
    assert len(whole(exposed, strategies)) < len(whole(base, strategies))


def test_the_columns_a_window_binds_are_those_its_nests_give():
    """compute_inline binds ``Intermediate``'s and ``UnreadIn``'s tensor from the producer's
    target (taken apart from the left-hand side), register_tiling ``LaneTile``'s extent from
    a loop of the nest (``LoopIn``), never its lane count ``w`` nor the suffix ``rest``."""
    from leir_egraph.egraph.windows import _atom_keyed
    strategies = resolve(list(WINDOWED))
    engine = engine_for(tuple(strategies))
    keyed = {s.id: _atom_keyed(s, engine) for s in strategies}
    assert keyed["compute_inline"]["Intermediate"] == ((0,),)
    assert keyed["compute_inline"]["UnreadIn"] == ((0,),)
    assert set(keyed["register_tiling"]["LaneTile"]) == {(0,)}
    assert "FreshTensor" not in keyed["register_tiling"]   # its name is bound by no nest
