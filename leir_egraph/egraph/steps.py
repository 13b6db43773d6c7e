"""Single-step rewrites: every distinct one-site application of a strategy, as Transitions.

>>> from leir_egraph import Program
>>> p = Program.parse("B^{16}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx}=D^{f32,g}_{tx}+A^{f32,g}_{tx,a};];",
...                   {"inputs": [{"name": "A", "dtype": "float32", "shape": [16, 8]}],
...                    "outputs": [{"name": "D", "dtype": "float32", "shape": [16]}]})
>>> [t.after.text for t in single_steps(p, "loop_reorder")]
['L^{8}_{a=0}B^{16}_{tx=0}[D^{f32,g}_{tx}=D^{f32,g}_{tx}+A^{f32,g}_{tx,a};];']
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from functools import partial
from itertools import accumulate
from typing import Callable, Iterable

from ..gcpause import gc_paused
from ..leir.ast import Leir
from ..leir.program import Program
from .cot import Site, fragment_text, locate, render_cot
from .encoding import Decoder, OccurrenceIndex, Term, encode, replace_at, subterm, uncons
from .engine import RawMatch, engine_for
from .strategy import Strategy, builtin_strategies, strategy_by_id
from .term_text import TermText


@dataclass(frozen=True)
class Transition:
    """One rule application at one site: before -> after, with its provenance and reasoning.

    ``after`` is built with the transition (its text is what makes it distinct); the site, the
    binding texts, the guard facts and the chain of thought are **rendered on first use** of
    any of them (``site``, ``bindings``, ``guard_facts``, ``cot``, ``to_dict``) and kept. A
    caller that keeps a few of many steps (the sampler's one per strategy, a search's top
    candidates, an exploration's edges) does not pay for printing the rest. Two transitions
    are equal when their programs, strategy, rule and path are."""
    before: Program
    after: Program
    strategy: str
    category: str
    rule: str
    path: tuple[int, ...]
    score: float = 0.0     # the strategy's difficulty score, 0.1K + 0.5(P-1) + S
    difficulty: str = ""   # the strategy's difficulty class: easy, medium or difficult
    _details: object = field(default=None, compare=False, repr=False)
    """``(site, bindings, guard_facts, cot)``, or a zero-argument function that renders them."""
    _bindings: object = field(default=None, compare=False, repr=False)
    """A zero-argument function rendering the binding texts alone (a caller that reads only
    them, the search's lookahead choosing sites, does not render the chain of thought)."""

    def _rendered(self) -> tuple:
        details = self._details
        if callable(details):
            details = details()
            object.__setattr__(self, "_details", details)
        return details

    @property
    def site(self) -> Site:
        return self._rendered()[0]

    @property
    def bindings(self) -> dict:
        if callable(self._details) and callable(self._bindings):
            object.__setattr__(self, "_bindings", self._bindings())
        if isinstance(self._bindings, dict):
            return self._bindings
        return self._rendered()[1]

    @property
    def guard_facts(self) -> tuple[str, ...]:
        return self._rendered()[2]

    @property
    def cot(self) -> str:
        return self._rendered()[3]

    def to_dict(self) -> dict:
        return {"before": self.before.text, "after": self.after.text, "strategy": self.strategy,
                "category": self.category, "rule": self.rule, "site": self.site.to_dict(),
                "bindings": dict(self.bindings), "guard_facts": list(self.guard_facts),
                "cot": self.cot, "score": self.score, "difficulty": self.difficulty}


@dataclass(frozen=True)
class BrokenMatch:
    """A match whose right-hand side never finished evaluating (a rule bug, reported)."""
    strategy: str
    rule: str
    lhs: str


def default_strategies() -> tuple[Strategy, ...]:
    """The built-in strategies (``rules/``), what ``strategies=None`` means everywhere."""
    return builtin_strategies()


def resolve(strategies) -> tuple[Strategy, ...]:
    """Accept Strategy objects, ids (built-in, or registered by ``load_strategies(dir)``), or
    None (all built-in strategies). An unknown id raises :class:`UnknownStrategy`."""
    if strategies is None:
        return default_strategies()
    if isinstance(strategies, (Strategy, str)):
        strategies = [strategies]
    return tuple(s if isinstance(s, Strategy) else strategy_by_id(s) for s in strategies)


def transitions_from(program: Program, matches: Iterable[RawMatch],
                     strategies: dict[str, Strategy], broken: list | None = None) -> list[Transition]:
    """Place raw matches at every occurrence of their matched term, one transition each."""
    term = index = None
    decoder = Decoder()
    # the nests' texts, printed from their terms: a new nest shares nearly all its subterms
    # with the program's nests and the other new nests, whose texts are kept
    nest_text = TermText()
    fragments: dict[int, tuple[object, str]] = {}

    def fragment(value) -> str:
        # binding values and sides repeat across matches (from_termdag shares their objects)
        hit = fragments.get(id(value))
        if hit is None or hit[0] is not value:
            hit = (value, fragment_text(value, decoder))
            fragments[id(value)] = hit
        return hit[1]

    def same_nest(a: Term, b: Term) -> bool:
        return a is b or decoder(a) == decoder(b)

    def bind(m: RawMatch) -> dict:
        return {name: "?" if value is None else fragment(value) for name, value in m.bindings}

    def placed(m: RawMatch, path) -> tuple[int, list, int]:
        """``(k, new nests, end)``: the match at ``path`` replaces nests ``k`` to ``end`` (one
        nest, or the suffix from nest k on) with the new nests' terms."""
        k = 0
        while k < len(path) and path[k] == 2:
            k += 1
        if k == len(path):  # a program suffix: its nests are the replacement's
            return k, uncons(m.rhs, "PCons"), len(before_nests)
        return k, [replace_at(before_nests[k], path[k + 1:], m.rhs)], k + 1

    def render(strategy, rule, m: RawMatch, path) -> tuple:
        """The site, binding texts, guard facts and CoT of one placed match (on first use).
        The program after it is placed again here, so a step not rendered keeps no terms of
        its own."""
        k, new_nests, end = placed(m, path)
        after_nests = before_nests[:k] + new_nests + before_nests[end:]
        rendered = bind(m)
        lhs_text, rhs_text = fragment(m.lhs), fragment(m.rhs)
        site = locate(term, path, rule.lhs_sort, lhs_text, decoder)
        cot, facts = render_cot(strategy, rule, site, rendered, lhs_text, rhs_text,
                                before_nests, after_nests, same=same_nest, text=nest_text)
        return site, rendered, tuple(facts), cot

    out: dict[tuple, Transition] = {}
    rules: dict[tuple[str, str], tuple] = {}
    for m in matches:
        if m.rhs is None:
            if broken is not None:
                broken.append(BrokenMatch(m.strategy, m.rule, "(not extractable)" if m.lhs is None
                                          else fragment_text(m.lhs)))
            continue
        found = rules.get((m.strategy, m.rule))
        if found is None:  # a strategy's score and class are computed properties: once each
            strategy = strategies[m.strategy]
            found = rules[m.strategy, m.rule] = (
                strategy, next(r for r in strategy.rules if r.name == m.rule),
                strategy.score, strategy.difficulty)
        strategy, rule, score, difficulty = found
        if m.rhs == m.lhs:
            continue
        if term is None:
            term = encode(program.leir)
            index = OccurrenceIndex(term)
            before_nests = uncons(term, "PCons")
            # a placed match changes one nest or one suffix: the rest of the program is
            # printed once, here, and sliced at nest k's start
            before_texts = [nest_text(n) for n in before_nests]
            whole = "".join(before_texts)
            starts = [0, *accumulate(map(len, before_texts))]
        for path in index.paths(m.lhs):
            # the nest (or the suffix from nest k on) that the path replaces
            k, new_nests, end = placed(m, path)
            text = (whole[:starts[k]] + "".join(nest_text(n) for n in new_nests)
                    + whole[starts[end]:])
            if text == program.text:
                continue
            key = (m.strategy, path, text)
            if key in out:
                continue
            nests = program.leir.nests
            after = program.with_leir(Leir(nests[:k] + tuple(decoder(n) for n in new_nests)
                                           + nests[end:]))
            # already printed, nest by nest; set as an attribute: ``__dict__`` would make one
            object.__setattr__(after, "text", text)
            out[key] = Transition(program, after, strategy.id, strategy.category, rule.name,
                                  path, score, difficulty,
                                  partial(render, strategy, rule, m, path),
                                  partial(bind, m))
    # the steps' lazy renders (a few of them; each prints only its changed nests) start with
    # empty memos: the loop's hold every step's program term and printed nests, which a
    # search would keep alive (and its garbage collections walk) with its steps
    decoder, nest_text = Decoder(), TermText()
    return [out[k] for k in sorted(out, key=lambda k: (k[0], k[1], k[2]))]


def all_steps(program: Program, strategies=None, *, broken: list | None = None,
              known: dict[str, list[RawMatch]] | None = None) -> list[Transition]:
    """Every distinct one-site application of every given strategy (default: all).

    ``known``: the raw matches on ``program`` of some of the strategies, found elsewhere (by
    strategy id; the search's ``KernelSteps.node_matches``, matched once per kernel): those
    strategies are not matched again, their matches are placed with the others'. The steps are
    those of matching every strategy, in the same order, when ``known`` holds exactly the
    matches the engine records for them on ``program`` in the engine's order within each rule
    (its matches of one rule may come in another order where no two of them make the same
    program at the same path: only then does the order decide which one a step is)."""
    if not known:
        return steps_many([program], strategies, broken=broken)[0]
    chosen = resolve(strategies)
    engine = engine_for(default_strategies() if strategies is None else chosen)
    rest = [s for s in chosen if s.id not in known]
    order = {(s.id, r.name): i for i, (s, r) in enumerate((s, r) for s in chosen
                                                          for r in s.rules)}
    with gc_paused():  # (leir_egraph/gcpause.py) one program's garbage has no cycles
        found = engine.matches(program, rest) if rest else []
        found += [m for s in chosen if s.id in known for m in known[s.id]]
        # in rule order, as the engine sorts one run's matches (stable: a rule's own order
        # kept); a strategy that could not be extracted (rule names joined) last, as there
        found.sort(key=lambda m: order.get((m.strategy, m.rule), len(order)))
        return transitions_from(program, found, {s.id: s for s in chosen}, broken)


def steps_many(programs: Iterable[Program], strategies=None, *, broken: list | None = None
               ) -> list[list[Transition]]:
    """``all_steps`` of every program, in order, on one engine: the strategies are resolved and
    compiled once, and each program pays only its own push / facts / run / pop.

    The programs are not loaded into one e-graph run together: several fact relations are
    program-wide or keyed by names whose meaning depends on the program (``Root``,
    tensor-name facts such as ``Intermediate``, ``FreshIndex`` chosen
    against a nest's surroundings), and hash-consing would make two programs' equal nests and
    suffixes one e-class, so one program's facts would license rewrites in another. Sharing a
    run needs a program argument in those relations and in the rules that read them
    (docs/ARCHITECTURE.md, "The engine, precisely")."""
    chosen = resolve(strategies)
    engine = engine_for(default_strategies() if strategies is None else chosen)
    by_id = {s.id: s for s in chosen}
    out = []
    for p in programs:
        with gc_paused():  # (leir_egraph/gcpause.py) one program's garbage has no cycles
            out.append(transitions_from(p, engine.matches(p, list(chosen)), by_id, broken))
    return out


def single_steps(program: Program, strategy, *, limit: int | None = None,
                 broken: list | None = None) -> list[Transition]:
    """Every distinct one-site application of one strategy, deterministically ordered."""
    (chosen,) = resolve(strategy)
    engine = engine_for((chosen,))
    found = transitions_from(program, engine.matches(program), {chosen.id: chosen}, broken)
    return found if limit is None else found[:limit]


def undo_steps(program: Program, strategy, *, broken: list | None = None) -> list[Transition]:
    """The strategy's moves that **end** at ``program``: every single step ``program -> q`` of
    its inverse strategies (``inverse`` in its rule file, the STRATEGIES.md pairs), read
    backwards as ``q -> program``, one transition per distinct ``q``.

    This is how the paper builds its inverse strategies' data (the forward pair swapped), and
    the only way to reach some of it: the translator's ``A*(1/(1+exp(-A)))`` is what
    expand_powsimp takes sympy's ``A/(1+exp(-A))`` back to, a form no function of the powsimp
    form can know. Both programs compute the same values (the forward step's guards hold), so
    the reversed step is as sound as the forward one.

    >>> from leir_egraph import Program
    >>> p = Program.parse("B^{4}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx}*A^{f32,g}_{tx};];",
    ...                   {"inputs": [{"name": "A", "dtype": "float32", "shape": [4]}],
    ...                    "outputs": [{"name": "C", "dtype": "float32", "shape": [4]}]})
    >>> [(t.before.text, t.rule) for t in undo_steps(p, "expand_powsimp")][:1]
    [('B^{4}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx}**2;];', 'undo powsimp:combined-powers-form')]
    """
    (chosen,) = resolve(strategy)
    out: dict[str, Transition] = {}
    for inverse in resolve(chosen.inverse):
        for forward in single_steps(program, inverse, broken=broken):
            if forward.after.text not in out:
                out[forward.after.text] = reversed_step(forward, chosen)
    return list(out.values())


def reversed_step(forward: Transition, strategy: Strategy) -> Transition:
    """``forward`` (a step of one of ``strategy``'s inverses) read backwards as a step of
    ``strategy``: before and after swapped, the rule named ``undo <inverse>:<rule>``, the site
    the forward step's replacement, and a chain of thought that says which step it takes back
    and why the two agree (the forward step's guard facts)."""

    def render() -> tuple:
        back = forward.site
        term = encode(forward.after.leir)
        site = locate(term, back.path, back.sort, fragment_text(subterm(term, back.path)))
        where = (f"in the equation '{site.equation}' of nest {site.nest}" if site.equation
                 else f"in nest {site.nest}" if site.nest is not None
                 else f"from nest {site.first_nest} on")
        facts = "".join(f" {f[0].upper()}{f[1:]}." for f in forward.guard_facts)
        cot = (f"{strategy.description} '{site.text}' {where} is what {forward.strategy}'s "
               f"rule '{forward.rule}' makes of '{back.text}'.{facts} The two compute the same "
               f"value, so '{site.text}' is written back as '{back.text}'; every other nest "
               "stays as it is.")
        return site, dict(forward.bindings), forward.guard_facts, cot

    return Transition(forward.after, forward.before, strategy.id, strategy.category,
                      f"undo {forward.strategy}:{forward.rule}", forward.path, strategy.score,
                      strategy.difficulty, render)


def applicable(program: Program, strategies=None) -> dict[str, int]:
    """Strategy id -> number of distinct sites where it applies (only strategies that apply)."""
    counts: dict[str, set] = {}
    for t in all_steps(program, strategies):
        counts.setdefault(t.strategy, set()).add(t.path)
    return {k: len(v) for k, v in counts.items()}


def drawn_steps(program: Program, strategies, cap: int, seed_of: Callable[[str], object], *,
                engine=None, broken: list | None = None
                ) -> tuple[list[tuple[str, Transition]], dict[str, int]]:
    """Up to ``cap`` transitions of each strategy, a seeded draw, building only what is drawn.

    Every rule's query runs once (``Engine.applications``); each strategy's applications, in
    canonical order, are shuffled by ``random.Random(seed_of(strategy_id))`` and taken in that
    order until ``cap`` distinct transitions are placed: an application is one transition, or
    several where its matched term occurs at several places (then a seeded choice among
    them), or none where its replacement prints as the original. Only the taken applications
    have their replacements built by the helpers, which is most of a full enumeration's cost.

    Returns ``(key, transition)`` pairs, in strategy order, ``key`` being the application's
    position in the canonical order (``"7"``, or ``"7.1"`` for its second placement), and the
    number of applications each strategy has. An application whose replacement never finishes
    evaluating is reported in ``broken``."""
    chosen = resolve(strategies)
    engine = engine or engine_for(chosen)
    by_id = {s.id: s for s in chosen}
    kept: dict[str, dict[tuple, tuple[str, Transition]]] = {s.id: {} for s in chosen}
    with gc_paused(), engine.applications(program, list(chosen)) as run:
        apps: dict[str, list] = {s.id: [] for s in chosen}
        for app in run.found:
            apps[app.strategy].append(app)
        rngs = {sid: random.Random(seed_of(sid)) for sid in apps}
        queues = {}
        for sid, found in apps.items():
            queues[sid] = list(range(len(found)))
            rngs[sid].shuffle(queues[sid])
        while True:
            batch: list[tuple[str, int]] = []
            for sid, queue in queues.items():
                want = cap - len(kept[sid])
                if want > 0:
                    batch += [(sid, i) for i in queue[:want]]
                    del queue[:want]
            if not batch:
                break
            made = run.make([apps[sid][i] for sid, i in batch])
            rows: dict[tuple, list[RawMatch]] = {}
            for m in made:
                rows.setdefault((m.strategy, m.rule, m.lhs, engine.shown(m)), []).append(m)
            for sid, i in batch:
                app = apps[sid][i]
                own = rows.get((app.strategy, app.rule, app.lhs, app.bindings))
                if not own:  # its row was not extractable: a helper never finished
                    if broken is not None:
                        broken.append(BrokenMatch(sid, app.rule, fragment_text(app.lhs)))
                    continue
                placed = transitions_from(program, own, by_id, broken)
                for j, t in enumerate(placed):
                    kept[sid].setdefault((t.path, t.after.text), (f"{i}" if j == 0 else f"{i}.{j}", t))
    out: list[tuple[str, Transition]] = []
    for sid, options in kept.items():
        keys = sorted(options)
        if len(keys) > cap:
            keys = sorted(rngs[sid].sample(keys, cap))
        out.extend(options[k] for k in keys)
    return out, {sid: len(found) for sid, found in apps.items()}


def sample_steps(program: Program, strategies=None, *, seed: int, per_strategy: int = 1
                 ) -> list[Transition]:
    """A seeded choice of up to ``per_strategy`` transitions for each strategy that applies."""
    rng = random.Random(seed)
    by_strategy: dict[str, list[Transition]] = {}
    for t in all_steps(program, strategies):
        by_strategy.setdefault(t.strategy, []).append(t)
    out = []
    for sid in sorted(by_strategy):
        options = by_strategy[sid]
        out.extend(rng.sample(options, min(per_strategy, len(options))))
    return out
