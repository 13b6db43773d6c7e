"""Exhaustive exploration: every program reachable from a root in at most ``depth`` single
steps, up to renaming (docs/EXPLORE.md).

``explore`` grows the space round by round (breadth first, round ``d`` finds depth ``d``): the
frontier is matched (factored per kernel, in one shared database, or each program in its own
push/pop context), the matches are placed at every occurrence and the results are
deduplicated by canonical text (``leir/canonical.py``); the space e-graph, where every step is
a union (``explore/egraph.py``), is built from the result when asked
(``Exploration.space_egraph``). ``naive`` is the oracle:
the same breadth-first search over ``steps.all_steps``, program by program, with the same
deduplication; both return the same programs (tests/test_explore.py).

>>> from leir_egraph import Program
>>> sig = {"inputs": [{"name": "A", "dtype": "float32", "shape": [4, 2, 3]}],
...        "outputs": [{"name": "C", "dtype": "float32", "shape": [4, 2, 3]}]}
>>> root = Program.parse("L^{4}_{a=0}L^{2}_{c=0}L^{3}_{d=0}[C^{f32,g}_{a,c,d}=A^{f32,g}_{a,c,d};];", sig)
>>> space = explore(root, ["loop_reorder"], depth=3)
>>> space.counts(), space.stopped    # the 3! loop orders (any two loops swap in one step)
([1, 3, 2], 'closure')
"""

from __future__ import annotations

import time
from typing import Callable

# every exploration builds its graph (space.Exploration): networkx comes with the explorer,
# not inside the first exploration (space imports it on first use, for the search's sake)
import networkx  # noqa: F401

from ..egraph.encoding import Decoder, OccurrenceIndex, encode, replace_at, uncons
from ..egraph.engine import engine_for
from ..egraph.steps import all_steps, default_strategies, resolve
from ..gcpause import gc_paused
from ..leir.analysis import exploration_memos
from ..leir.canonical import CanonicalNests, canonical
from ..leir.program import Program
from .space import Deadline, Exploration, Pace, Round, frozen_heap, peak_rss_mb


class _Budget:
    def __init__(self, max_programs: int | None, deadline: Deadline):
        self.max_programs, self.deadline = max_programs, deadline
        self.fired: str = ""

    def check(self, space: Exploration) -> bool:
        """True when a budget has run out (and records which, the first time)."""
        if self.fired:
            return True
        if self.max_programs is not None and len(space) >= self.max_programs:
            self.fired = "max_programs"
        elif self.deadline.passed():
            self.fired = "time_limit"
        return bool(self.fired)


class Placing:
    """What placing keeps across the programs of one exploration: the decoder (a nest term
    decoded once), the canonical forms per nest (``CanonicalNests``), the canonical successor
    of every successor term placed so far, and a number per distinct top-level nest term.

    A successor is known by the numbers of its nests (and of its program list's end): hashing
    a term walks all of it, and a program's successors share every nest term but the
    rewritten one, as objects, so each nest object is numbered once (found again by
    identity, as ``Decoder`` finds it) and a successor's key is a few integers. Equal terms
    get one number, so two successors have one key exactly when their terms are equal."""

    def __init__(self, keep):
        self.decoder = Decoder()
        self.canon = CanonicalNests(keep)
        self.known: dict[tuple, Program] = {}     # successor key -> canonical program
        self._numbers: dict = {}                  # nest term -> its number
        self._by_id: dict[int, tuple] = {}        # id of a nest term seen -> (it, its number)

    def number(self, term) -> int:
        hit = self._by_id.get(id(term))
        if hit is not None and hit[0] is term:
            return hit[1]
        number = self._numbers.setdefault(term, len(self._numbers))
        self._by_id[id(term)] = (term, number)
        return number

    def key(self, term) -> tuple[int, ...]:
        """``term`` (a program's ``PCons`` list) as its nests' numbers and its end's."""
        out = []
        while term[0] == "PCons":
            out.append(self.number(term[1]))
            term = term[2]
        out.append(self.number(term))
        return tuple(out)


def successors(engine, program: Program, chosen, placing: Placing | None = None,
               deadline: Deadline | None = None) -> list[tuple[Program, str, str]]:
    """Every single step of ``program`` as ``(canonical successor, strategy, rule)``, in match
    order, one per distinct (strategy, site, successor); rewrites that give back ``program``
    itself are left out (``transitions_from`` drops them too). ``placing`` (kept across calls
    of one exploration) memoises successor -> canonical program (a program reached from
    several parents is decoded and renamed once). With a ``deadline``, the matches are placed
    until it passes (the engine run itself is one indivisible piece): the steps placed by
    then."""
    return place(program, engine.matches(program, chosen), placing, deadline=deadline)


def place(program: Program, matches, placing: Placing | None = None, term=None,
          deadline: Deadline | None = None) -> list[tuple[Program, str, str]]:
    """:func:`successors` from the program's recorded rows (``RawMatch``, in rule order): each
    placed at every occurrence of its matched term (``term``: the program's encoded term,
    when the caller has it), until ``deadline`` passes. ``placing`` (kept across calls of one
    exploration) makes each successor canonical one top-level nest at a time, a nest that
    several successors share renamed and printed once."""
    placing = placing or Placing(program.signature.names)
    decoder, known, canon = placing.decoder, placing.known, placing.canon
    term = encode(program.leir) if term is None else term
    index = OccurrenceIndex(term)  # one walk per program, not one per match
    out: list[tuple[Program, str, str]] = []
    seen: set = set()
    for m in matches:
        if m.rhs is None or m.rhs == m.lhs:
            continue
        if deadline is not None and deadline.passed():
            break
        for path in index.paths(m.lhs):
            new_term = replace_at(term, path, m.rhs)
            if new_term == term:
                continue
            # One step per (strategy, site, result), the first rule in match order, as
            # ``transitions_from`` keeps it: two rules of a strategy that rewrite one site the
            # same way are one step.
            key = placing.key(new_term)
            if (m.strategy, path, key) in seen:
                continue
            seen.add((m.strategy, path, key))
            after = known.get(key)
            if after is None:
                nests = uncons(new_term, "PCons")
                after = known[key] = canon(
                    program, [(n, decoder(t)) for n, t in zip(key, nests)])
            out.append((after, m.strategy, m.rule))
    return out


def _search(root: Program, strategies, depth: int, max_programs, deadline: Deadline, seed: int,
            method: str, expand: Callable, progress: Callable[[Round], None] | None,
            prepare: Callable | None = None) -> Exploration:
    """Breadth-first rounds; ``expand(program, chosen)`` gives one program's steps and the
    seconds it matched for (the rest of its time counts as placing); ``prepare(keys, programs, out_of_budget)``, when given, is called
    once per round with the whole frontier before any of it is expanded (the shared method
    adds the programs until ``out_of_budget()`` and matches them there); it returns the
    budget that cut it (the round then expands nothing), or None."""
    if depth < 0:
        raise ValueError(f"depth must be >= 0, not {depth}")
    cpu = time.process_time()
    chosen = resolve(strategies)
    space = Exploration(root, tuple(s.id for s in chosen), depth, method=method, seed=seed)
    budget = _Budget(max_programs, deadline)
    root_key = space.add_root(canonical(root))
    frontier = [root_key]
    for d in range(1, depth + 1):
        if not frontier or budget.check(space):
            break
        rnd = Round(d)
        t0 = time.perf_counter()
        found: list[str] = []
        if prepare is not None:
            cut = prepare(frontier, [space.programs[k] for k in frontier],
                          lambda: budget.check(space))
            budget.fired = budget.fired or cut or ""
            rnd.matching_s += time.perf_counter() - t0
        for key in frontier:
            if budget.check(space):
                break
            rnd.expanded += 1
            t1 = time.perf_counter()
            steps, match_s = expand(space.programs[key], chosen, deadline)
            rnd.matching_s += match_s   # the rest of expand's time placed the matches
            rnd.placing_s += time.perf_counter() - t1 - match_s
            t1 = time.perf_counter()
            for after, strategy, rule in steps:
                rnd.steps += 1
                if after.text not in space.programs and budget.check(space):
                    break
                if space.add_step(key, after, strategy, rule, d):
                    found.append(after.text)
            rnd.placing_s += time.perf_counter() - t1
        rnd.new_programs = len(found)
        rnd.stopped = budget.fired   # fired during this round: it was cut
        rnd.seconds = time.perf_counter() - t0
        rnd.peak_rss_mb = peak_rss_mb()
        space.rounds.append(rnd)
        if progress is not None:
            progress(rnd)
        frontier = found
        if not found and not budget.fired:
            space.stopped = "closure"
            break
    if not space.stopped:
        space.stopped = budget.fired or ("closure" if not frontier else "depth")
    space.seconds = time.perf_counter() - deadline.start
    space.cpu_seconds = time.process_time() - cpu
    return space


def explore(program: Program, strategies=None, *, depth: int, max_programs: int | None = None,
            time_limit: float | None = None, seed: int = 0,
            progress: Callable[[Round], None] | None = None,
            method: str = "auto", memory_limit: float | None = None) -> Exploration:
    """Every program reachable from ``program`` in at most ``depth`` single steps of
    ``strategies`` (ids or Strategy objects; default all), up to renaming, with the state graph
    and per-round statistics. Stops at closure, ``depth``, ``max_programs`` distinct programs
    (the root counts) or ``time_limit`` seconds counted from this call (checked inside every
    long loop; one egglog call is the piece that may overrun it: docs/EXPLORE.md, "Time
    limit"), and says which (``Exploration.stopped``; a cut round's ``Round.stopped``).
    ``seed`` is kept for the seeded choices made on the result (``sample``).

    ``method``: ``"factored"`` matches each kernel variant once and counts the product space
    (``explore/factored.py``; only when every strategy is kernel-local and no two kernels write
    one tensor), ``"shared"`` adds every program to one persistent database and matches each
    round once (``explore/shared.py``), ``"egraph"`` matches every program alone in its own
    push/pop context, ``"auto"`` (default) takes ``factored`` where it applies and ``shared``
    elsewhere. A factored exploration holds at most ``max_programs``
    programs in its graph (``GRAPH_LIMIT`` when None) and counts the whole space
    (``Exploration.space_counts``).

    The shared method's database runs in a process of its own (explore/worker.py), killed
    when ``time_limit`` passes during one of its egglog runs or when its resident memory
    exceeds ``memory_limit`` MB (default: half the machine's memory); the exploration then
    stops with ``"time_limit"`` or ``"memory_limit"``, keeping every program found before the
    cut round."""
    if method not in ("auto", "factored", "shared", "egraph"):
        raise ValueError(f"method must be auto, factored, shared or egraph, not {method!r}")
    deadline = Deadline(time_limit)   # counted from this call: engine set-up included
    with frozen_heap():
        return _explore(program, strategies, depth, max_programs, deadline, seed, progress,
                        method, memory_limit)


def _explore(program: Program, strategies, depth: int, max_programs, deadline: Deadline,
             seed: int, progress, method: str, memory_limit) -> Exploration:
    chosen = resolve(strategies)
    if method not in ("egraph", "shared"):
        from .factored import unfactorable_reason
        reason = unfactorable_reason(program, chosen)
        if reason is None:
            return _explore_factored(program, chosen, depth, max_programs, deadline, seed,
                                     progress)
        if method == "factored":
            raise ValueError(f"the space is not a product of kernels: {reason}")
    if method != "egraph":
        return _explore_shared(program, strategies, chosen, depth, max_programs, deadline,
                               seed, progress, memory_limit)
    engine = engine_for(default_strategies() if strategies is None else chosen)
    placing = Placing(program.signature.names)

    def expand(p: Program, chosen, deadline):
        t = time.perf_counter()
        steps = successors(engine, p, chosen, placing, deadline)
        return steps, time.perf_counter() - t

    return _search(program, strategies, depth, max_programs, deadline, seed, "egraph",
                   expand, progress)


def _explore_shared(program: Program, strategies, chosen, depth: int, max_programs,
                    deadline: Deadline, seed, progress, memory_limit) -> Exploration:
    """The shared method: each round's frontier is added to one persistent database and
    matched in one run (explore/shared.py); each program's rows are then placed."""
    from .shared import SharedMatcher
    # The call's CPU in both processes, its set-up and tear-down included (the matcher's
    # relation sets, the database's push and pop), less what is done once per process and
    # strategy set (starting the database process and compiling the rules; the per-program
    # method's compiled engine is cached the same way)
    cpu = time.process_time()
    # the providers' per-nest memos (analysis.exploration_memo) live for this call alone
    with exploration_memos(), SharedMatcher(tuple(chosen), memory_limit) as matcher:
        space = _search_shared(program, strategies, matcher, depth, max_programs, deadline,
                               seed, progress)
    space.cpu_seconds = time.process_time() - cpu - matcher.compile_cpu_s + matcher.worker_cpu_s
    return space


def _search_shared(program: Program, strategies, matcher, depth: int, max_programs,
                   deadline: Deadline, seed, progress) -> Exploration:
    placing = Placing(program.signature.names)
    numbers: dict[str, tuple[int, object]] = {}  # canonical text -> (number, encoded term)

    def prepare(keys: list[str], programs: list[Program], out_of_budget) -> str | None:
        # A program not added is never expanded: the budget that stopped adding it stops
        # the round's expansion before it. Under a time limit the frontier is added and
        # matched in pieces sized to the time left (``Pace``; each later run matches only the
        # new programs' tuples); a run still going at the deadline, or past the memory
        # limit, is killed with its process (``worker.Stopped``): the round is cut there.
        from .worker import Stopped
        at, pace = 0, Pace()
        while at < len(keys) and not out_of_budget():
            size = pace.size(len(keys) - at, deadline)
            t = time.perf_counter()
            added = 0
            # adding and placing run with the cyclic collector paused, as the oracle's
            # all_steps does (leir_egraph/gcpause.py): its walks of the young survivors were
            # 1.6-16 ms of a median program's depth-2 exploration, 0.3 s of RMSNorm's
            with gc_paused():
                for key, p in zip(keys[at:at + size], programs[at:at + size]):
                    if out_of_budget():
                        break
                    numbers[key] = (matcher.add(p), encode(p.leir))
                    added += 1
            at += size
            if added:
                try:
                    matcher.match(deadline)
                except Stopped as stop:
                    return stop.reason
                pace.record(added, time.perf_counter() - t)
        return None

    def expand(p: Program, chosen, deadline):
        # matched in ``prepare``; here the rows are only placed (placing time)
        number, term = numbers.pop(p.text)
        with gc_paused():
            steps = place(p, matcher.matches(number, term), placing, term, deadline)
        return steps, 0.0

    return _search(program, strategies, depth, max_programs, deadline, seed, "shared",
                   expand, progress, prepare)


# A factored exploration counts its whole space but holds at most this many programs in its
# graph when no max_programs is given (SDPA to depth 3 has 2.4 million: the graph would need
# tens of gigabytes, the count needs none).
GRAPH_LIMIT = 100_000


def _explore_factored(program: Program, chosen, depth: int, max_programs, deadline: Deadline,
                      seed, progress) -> Exploration:
    from .factored import explore_factored, materialise
    cpu = time.process_time()
    space = Exploration(program, tuple(s.id for s in chosen), depth, method="factored",
                        seed=seed)
    factored = explore_factored(program, chosen, depth=depth, deadline=deadline,
                                progress=progress, rounds=space.rounds)
    space.factored = factored
    held = GRAPH_LIMIT if max_programs is None else max_programs
    cut = materialise(factored, space, held, deadline)
    reached = len(factored.counts()) - 1
    if not factored.complete or cut == "time_limit":
        space.stopped = "time_limit"   # the space, or only its graph (space_complete says)
    elif cut:
        space.stopped = "max_programs"   # the graph holds the first max_programs; all counted
    else:
        space.stopped = "closure" if reached < depth else "depth"
    space.seconds = time.perf_counter() - deadline.start
    space.cpu_seconds = time.process_time() - cpu
    return space


def naive(program: Program, strategies=None, *, depth: int, max_programs: int | None = None,
          time_limit: float | None = None, seed: int = 0,
          progress: Callable[[Round], None] | None = None) -> Exploration:
    """The oracle: breadth-first search over ``steps.all_steps``, one program at a time, every
    successor deduplicated by ``canonical`` (the same relation and the same identification as
    ``explore``; its space e-graph is built when asked, as the explorer's)."""

    def expand(p: Program, chosen, deadline):
        t = time.perf_counter()
        steps = [(canonical(s.after), s.strategy, s.rule) for s in all_steps(p, strategies)]
        return steps, time.perf_counter() - t

    with frozen_heap():
        return _search(program, strategies, depth, max_programs, Deadline(time_limit), seed,
                       "naive", expand, progress)
