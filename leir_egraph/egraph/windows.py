"""Matches of suffix-rewriting strategies, kept per window of adjacent nests and its facts.

operator_fusion, compute_inline and register_tiling rewrite a program suffix ``(PCons n1
(PCons n2 rest))`` or ``(PCons n rest)``: each match replaces the one or two top-level nests
at the head of the suffix -- its **window** -- and keeps ``rest``. Their guards read context
facts (``FusedIntermediate``: which nests use a tensor; ``UnreadIn name rest``: the suffix after
the window; ``FirstWriteIn``: the nests before), so a match of one program is not a match of
another that holds the same two nests. But a rule's query
reaches only the terms its window binds: the window's nests (and what they hold), the suffixes
starting in it and ``rest``, plus facts that name no term at all. So the matches at window
``j`` of a program are decided by its **window key**: the two nests, the program's facts about
them and about the suffixes ``j``, ``j+1``, ``j+2`` (a suffix named by its place relative to the
window, not by its term), and the program's facts that name no nest and no suffix. Programs
one step apart (a search node, its children, the lookahead's programs) share most window keys.

:class:`WindowMatches` keeps every window key's matches as *edits* (how many nests at the
window's head are replaced, and by which nests). For a program it computes the facts in Python,
reuses the edits of every known key, and matches only the windows whose key is new: each run
of consecutive new windows is loaded into the engine as a **region** -- its nests and the one
after it, the program's suffix after that standing in as ``PNil`` or as the suffix starting
at a separator nest no program holds -- with the program's own facts about the region's terms
(its suffixes mapped onto the region's), never facts computed for the region. ``prefetch``
does this for many programs at once (a search node's lookahead): a key several of them hold
is matched once, and regions that share no nest term and the same term-free facts share one
engine run; a prefetched program with more new windows than half its nests is one region, all
of it. A program asked for unprefetched with no known key (the first one), or with more new
windows than half its nests, is matched whole, and its matches are kept per window the same
way. Each
strategy's key holds only the facts of the relations it reads (and of any relation an egglog
rule mentions), and of a relation whose columns its rules bind from the window's nests
(:func:`_atom_keyed`: ``Intermediate name``, ``UnreadIn name rest``, ``LaneTile n w``) only
the facts whose strings and integers there the window's nests hold. register_tiling's
``FreshTensor`` facts hold placeholders, the same for every program (parameters.py): its edits
are kept with them, and each program's own fresh names are put in when its edits are read. So
a tensor or an extent a program gains or loses elsewhere (a transposed copy, an inlined
intermediate) leaves a window's key as it was.

Which strategies qualify (:func:`window_reason`): every rule rewrites a ``Prog`` whose head
holds at most :data:`WIDTH` ``PCons`` cells and no ``PNil``, takes no suffix apart beyond its
window, and reads no egglog-derived relation over ``Prog`` terms (``NestIn`` would see a
region's suffix, not the program's). A match whose replacement
changes more than its window (its ``rest`` rewritten) makes that program fall back to
whole-program matching, and the strategies are matched whole from then on. The edits of a
program are exactly those of matching it whole (``tests/test_windows.py`` checks it on the
lookahead programs of real workloads).

With ``raw=True`` the matches themselves are kept, for a search node's own steps (their rules,
bindings and chains of thought): relative to their window (``Relative``: the rule, the nests
replaced, the new nests' terms, the bindings with each program suffix named by its place
relative to the window), placed on another program's own suffixes by ``reused``, which
matches per strategy: a strategy with more new windows than ``NEW_SHARE`` of a program's nests
is left for the caller to match whole with its other strategies, and ``keep_whole`` keeps
that run's matches per window. ``tests/test_search_node_steps.py`` checks that a node's steps
are exactly those of enumerating it from scratch.

    >>> from leir_egraph import Program
    >>> from leir_egraph.egraph.steps import resolve
    >>> sig = {"inputs": [{"name": "A", "dtype": "float32", "shape": [4, 8]}],
    ...        "outputs": [{"name": "D", "dtype": "float32", "shape": [4, 8]}]}
    >>> p = Program.parse("B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}*2;];"
    ...                   "B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx,a}=C^{f32,g}_{tx,a}+1;];", sig)
    >>> w = WindowMatches(resolve(["compute_inline"]))
    >>> [(j, width, len(new)) for j, width, new in w.edits(p)]
    [(0, 2, 1)]
"""

from __future__ import annotations

import re
from functools import lru_cache

from ..leir.ast import Leir, Loop, LoopNest
from ..leir.program import Program
from ..leir.traverse import nests_in
from .encoding import SORT_OF, Decoder, shared_terms, uncons
from .kernel_batches import BATCH_NESTS
from .engine import Engine, RawMatch, engine_for, match_relation, provider_errors, ruleset_name
from .facts import Fact
from .loaded import LoadedProgram
from .parameters import FreshNames, fresh_rules
from .strategy import Strategy

__all__ = ["WIDTH", "WindowMatches", "window_reason"]

# The most top-level nests a window-local rule's left-hand side holds.
WIDTH = 2
# Of a program's windows, the share that may be new before it is matched whole instead.
NEW_SHARE = 0.5

# (nests replaced at the window's head, new nests, whether they may hold fresh-name placeholders)
Edit = tuple[int, tuple[LoopNest, ...], bool]
# a raw match relative to its window (``raw=True``): rule, nests replaced at the window's head,
# the terms of the new nests, the bindings with each program suffix as a ``_Suffix`` of its
# place relative to the window
Relative = tuple[str, int, tuple, tuple]


def window_reason(strategy: Strategy, engine: Engine) -> str | None:
    """Why ``strategy``'s matches are not decided by its windows' keys (None when they are)."""
    derived = _prog_relations(engine)
    for rule in strategy.rules:
        if rule.lhs_sort != "Prog":
            return f"{strategy.id}/{rule.name} rewrites a {rule.lhs_sort}, not a program suffix"
        if rule.lhs.count("(PCons") > WIDTH or "(PNil" in rule.lhs:
            return f"{strategy.id}/{rule.name} matches more than {WIDTH} nests"
        for condition in rule.parsed_conditions:
            if condition.head in derived:
                return f"{strategy.id}/{rule.name} reads {condition.head}, derived over suffixes"
            if "(PNil" in condition.text or ("(PCons" in condition.text and not
                                             condition.input_variables <= rule.lhs_variables):
                return f"{strategy.id}/{rule.name} takes a suffix apart beyond its window"
    return None


def _reads(strategies: tuple[Strategy, ...], engine: Engine) -> list[frozenset[str]]:
    """Per strategy, the provided relations (guards' and parameters') whose facts can decide
    its matches: those its rules read, and every one an egglog rule of the engine mentions
    (an analysis rule could derive from it what a rule reads)."""
    provided = set(engine.vocabulary.relations) | set(engine.vocabulary.parameters)
    return [frozenset({c.head for r in s.rules for c in r.parsed_conditions} & provided
                      | _mentioned(engine)) for s in strategies]


@lru_cache(maxsize=None)   # the regular expressions run once per engine
def _mentioned(engine: Engine) -> frozenset[str]:
    """The provided relations an egglog rule of the engine mentions."""
    provided = set(engine.vocabulary.relations) | set(engine.vocabulary.parameters)
    text = _base_text(engine)
    return frozenset(name for name in provided
                     if re.search(rf"\({re.escape(name)}[ )]", text))


# egglog relations of the prelude whose second column is an element of their first
# (rules/prelude/core.egg: ``LoopIn loops l``, l is one of the loops)
ELEMENT_OF = frozenset({"LoopIn"})


def _window_bound(rule) -> frozenset[str]:
    """The variables of ``rule`` whose values are parts of the window's nests: those of its
    left-hand side (but the suffix after the window), what a constructor pattern takes apart
    of one of them or builds of them, and an ``ELEMENT_OF`` atom's element of one."""
    tails = set(re.findall(r"\(PCons \w+ (\w+)\)", " ".join(rule.lhs.split())))
    bound = set(rule.lhs_variables) - tails
    grew = True
    while grew:
        grew = False
        for c in rule.parsed_conditions:
            new: set[str] = set()
            if c.defines is not None and c.head in SORT_OF:
                if c.defines in bound:
                    new = set(c.input_variables)
                elif c.input_variables <= bound:
                    new = {c.defines}
            elif c.head in ELEMENT_OF:
                args = c.text.strip("()").split()[1:]
                if len(args) == 2 and args[0] in bound:   # the element of a bound list
                    new = {args[1]}
            if not new <= bound:
                bound |= new
                grew = True
    return frozenset(bound)


def _atom_keyed(strategy: Strategy, engine: Engine) -> dict[str, tuple[tuple[int, ...], ...]]:
    """Relation -> for each atom of it in ``strategy``'s rules, the columns a window's
    nests bind (:func:`_window_bound`), for the provided relations none of whose atoms leaves
    them all free and which no egglog rule of the engine mentions. A fact of such a relation
    with a string or integer in one of those columns that the window's nests do not hold,
    in every atom, takes part in no match at that window: the window's key leaves it out
    (``Intermediate "G"`` and ``UnreadIn "G" rest`` of a tensor named outside the window, the
    ``LaneTile 120 w`` of an extent no loop of the window has), so a tensor or loop a program
    gains elsewhere leaves the key as it was."""
    provided = set(engine.vocabulary.relations) | set(engine.vocabulary.parameters)
    out: dict[str, list] = {}
    refused = set(_mentioned(engine))
    for rule in strategy.rules:
        bound = _window_bound(rule)
        for atom in rule.guard_atoms:
            if atom.relation not in provided:
                continue
            columns = tuple(i for i, a in enumerate(atom.args) if a in bound)
            if not columns:
                refused.add(atom.relation)
            out.setdefault(atom.relation, []).append(columns)
    return {name: tuple(atoms) for name, atoms in out.items() if name not in refused}


def _prog_relations(engine: Engine) -> frozenset[str]:
    """Relations over ``Prog`` the engine derives itself (egglog rules, not providers)."""
    provided = set(engine.vocabulary.relations)
    declared = re.findall(r"\(relation (\w+) \(([^()]*)\)\)", _base_text(engine))
    return frozenset(name for name, sorts in declared
                     if "Prog" in sorts.split() and name not in provided)


def _base_text(engine: Engine) -> str:
    from .engine import base_program
    return base_program(engine.vocabulary)


class WindowMatches:
    """The matches of window-local strategies (:func:`window_reason`), kept per window key."""

    def __init__(self, strategies: tuple[Strategy, ...] | list[Strategy], raw: bool = False):
        self.strategies = tuple(strategies)
        # keep raw matches (``Relative``, for ``reused``) rather than edits (for ``edits``)
        self.raw = raw
        self._ids = frozenset(s.id for s in self.strategies)
        self.engine = engine_for(self.strategies)
        self._heads = _prog_heads(self.engine) if raw else (frozenset(), frozenset())
        reasons = [window_reason(s, self.engine) for s in self.strategies]
        # None: every program is matched whole (a strategy is not window-local)
        self.reason = next((r for r in reasons if r), None)
        if self.reason is None and len(Engine.groups(self.strategies)) != 1:
            self.reason = "a strategy runs alone (Engine.groups)"
        self._reads = _reads(self.strategies, self.engine)
        self._keyed = [_atom_keyed(s, self.engine) for s in self.strategies]
        # id(top-level nest) -> (nest, its term's strings and ints): keyed by the nest, which
        # the programs holding it keep alive, not by its term, which only this would
        self._atoms: dict[int, tuple] = {}
        self._edits: dict[tuple, tuple[Edit, ...]] = {}   # per strategy and window key
        self._decoder = Decoder()
        self._rows = {match_relation(s, r): (s, r) for s in self.strategies for r in s.rules}
        self._fresh = fresh_rules(self.strategies)
        # the rules whose left-hand side holds two nests (a match needs a nest after the first)
        self._wide = frozenset((s.id, r.name) for s in self.strategies for r in s.rules
                               if r.lhs.count("(PCons") > 1)
        self._renamed: dict[tuple, tuple] = {}   # (id(nest), fresh names) -> (nest, renamed)
        self._prepared: dict[str, tuple] = {}   # program text -> (loaded, facts, keys), prefetch
        self.matched_whole = 0    # programs matched whole
        self.reused_programs = 0  # (raw) programs some strategies' matches came from keys of
        self.regions = 0          # regions matched
        self.runs = 0             # engine runs (a batch of regions, or a whole program)

    def edits(self, program: Program) -> list[tuple[int, int, tuple[LoopNest, ...]]]:
        """``(j, width, new)`` for every match on ``program``: nests ``j`` to ``j+width-1``
        replaced by ``new`` (matches that change nothing left out)."""
        nests = program.leir.nests
        if not nests:
            return []
        if self.reason is not None:
            return self._named(program, self._whole(LoadedProgram(program), bounded=False))
        loaded, facts, keys = self._prepared.pop(program.text, None) or self._prepare(program)
        new = [j for j, per in enumerate(keys) if any(k not in self._edits for k in per)]
        if len(new) > NEW_SHARE * len(nests) or len(new) == len(nests):
            return self._named(program, self._whole(loaded, keys=keys))
        for a, b in _runs(new):
            if not self._match_regions([(loaded, facts, keys, a, b)]):
                return self._named(program, self._whole(loaded, keys=keys))
        return self._named(program, [(j, *edit) for j, per in enumerate(keys) for key in per
                                     for edit in self._edits[key]])

    def reused(self, program: Program) -> tuple[list[RawMatch], tuple[Strategy, ...]] | None:
        """(``raw``) The raw matches on ``program`` of the strategies whose windows are known
        or few new, named as ``Engine.matches`` names them (each window's from its key, the
        new windows matched as regions), and the strategies to match whole instead (those
        with more new windows than ``NEW_SHARE`` of the nests, or every one where a region
        could not be matched): their whole run's matches are for ``keep_whole``. The matches
        are those of matching ``program`` whole, in window order (the engine's order within a
        rule may differ: None is returned when two matches of one rule at one window make
        the same replacement, where that order would decide which one a step is, or when
        no key is kept any more)."""
        nests = program.leir.nests
        if not self.raw or self.reason is not None or not nests:
            return None
        loaded, facts, keys = prepared = (self._prepared.pop(program.text, None)
                                          or self._prepare(program))
        n = len(nests)
        known = [[keys[j][i] in self._edits for j in range(n)] for i in range(len(keys[0]))]
        parts = tuple(i for i, there in enumerate(known)
                      if n - sum(there) <= NEW_SHARE * n and any(there))
        whole = tuple(i for i in range(len(known)) if i not in parts)
        new = [j for j in range(n) if any(not known[i][j] for i in parts)]
        if not all(self._match_regions([(loaded, facts, keys, a, b)], parts)
                   for a, b in _runs(new)):
            parts, whole = (), tuple(range(len(known)))
        if self.reason is not None:
            return None
        if whole:
            self._prepared[program.text] = prepared
        suffixes = loaded.suffix_terms
        out, seen = [], set()
        for j, per in enumerate(keys):
            for i in parts:
                for entry in self._edits[per[i]]:
                    same = (i, entry[0], j, entry[1], entry[2])
                    if same in seen:
                        self._prepared.pop(program.text, None)
                        return None
                    seen.add(same)
                    out.append(_placed(self.strategies[i].id, entry, j, suffixes))
        self.reused_programs += bool(parts)
        return self.engine.named(program, out), tuple(self.strategies[i] for i in whole)

    def keep_whole(self, program: Program, found: list[RawMatch], matched) -> None:
        """(``raw``) Keep per window key the matches among ``found`` (a run of the
        strategies ``matched`` on the whole of ``program``, fresh names not put in) of those
        of the strategies among ``matched``, unless one could not be built or reaches past
        its window (then nothing is kept from now on)."""
        if not self.raw or self.reason is not None or not program.leir.nests:
            return
        loaded, _, keys = self._prepared.pop(program.text, None) or self._prepare(program)
        ran = {s.id for s in matched}
        only = tuple(i for i, s in enumerate(self.strategies) if s.id in ran)
        mine = [m for m in found if m.strategy in ran and m.strategy in self._ids]
        if not only or any(m.lhs is None or m.rhs is None for m in mine):
            return
        n = len(keys)
        self.matched_whole += 1
        per = self._per_window(mine, n, 0, n, suffixes=loaded.suffix_terms)
        if per is None:
            self.reason = "a replacement or binding reaches past its window"
            return
        self._keep(per, keys, range(n), 0, only)

    def _named(self, program: Program, edits: list[tuple]) -> list[tuple[int, int, tuple]]:
        """``(j, width, new)`` of ``edits`` (``(j, width, new, fresh)``), the program's fresh
        tensor names put in for the placeholders of the ``fresh`` ones' nests."""
        out, names = [], None
        for j, width, repl, fresh in edits:
            if fresh:
                if names is None:
                    names = FreshNames(program)
                    key = tuple(names.mapping.values())
                repl = tuple(self._rename(nest, names, key) for nest in repl)
            out.append((j, width, repl))
        return out

    def _rename(self, nest: LoopNest, names: FreshNames, key: tuple) -> LoopNest:
        hit = self._renamed.get((id(nest), key))
        if hit is None or hit[0] is not nest:
            hit = self._renamed[id(nest), key] = (nest, names.nest(nest))
        return hit[1]

    def prefetch(self, programs: list[Program]) -> None:
        """Match the new windows of all ``programs`` (a node's lookahead) before ``edits`` is
        asked for them: windows whose key another of them has are matched once, and regions
        of different programs that share no nest term and have the same facts naming no term
        are loaded together, one engine run for many (each region followed by a separator nest
        of its own, so no two regions share a suffix term; the batch's last region, if it
        ends its program, by nothing, as in the program). A program with too many new
        windows is one region, all of it."""
        self._prepared.clear()   # programs prefetched before and never asked for
        if self.reason is not None:
            return
        pending: set = set()
        regions = []   # (loaded, facts, keys, a, b)
        for program in programs:
            if not program.leir.nests or program.text in self._prepared:
                continue
            loaded, facts, keys = self._prepared[program.text] = self._prepare(program)
            n = len(keys)
            new = [j for j, per in enumerate(keys)
                   if any(k not in self._edits and k not in pending for k in per)]
            if not new:
                continue
            # a program with many new windows is one region: all of it
            for a, b in [(0, n - 1)] if len(new) > NEW_SHARE * n else _runs(new):
                regions.append((loaded, facts, keys, a, b))
                pending.update(k for j in range(a, b + 1) for k in keys[j])
        for batch in _region_batches(regions, self._common):
            if not self._match_regions(batch) and self.reason is not None:
                return

    def _prepare(self, program: Program) -> tuple:
        loaded = LoadedProgram(program)
        with provider_errors():
            facts = list(self.engine.vocabulary.facts(loaded, self.engine.read_relations))
        return loaded, facts, self._keys(loaded, facts)

    def _common(self, keys: list[tuple]) -> tuple:
        """The facts naming no term in a program's keys (the same in all its windows)."""
        return tuple(key[-1] for key in keys[0])

    def _match_regions(self, batch: list[tuple], only: tuple[int, ...] | None = None) -> bool:
        """Match the regions of ``batch`` (``(loaded, facts, keys, a, b)``: windows ``a`` to
        ``b`` of a program, new keys; several from ``_region_batches``) in one engine run and
        keep their windows' edits (of the strategies numbered ``only``, None: all). False
        when a replacement could not be built (nothing kept: ``edits`` matches the program
        whole) or reaches past its window (no edits are kept from now on)."""
        engine = self.engine
        chosen = self.strategies if only is None else tuple(self.strategies[i] for i in only)
        nests: list[LoopNest] = []
        placed = []   # (region's first nest in the batch program, loaded, facts, keys, a, b, stop)
        for k, (loaded, facts, keys, a, b) in enumerate(batch):
            program_nests = loaded.program.leir.nests
            stop = min(b + 2, len(program_nests))
            placed.append((len(nests), loaded, facts, keys, a, b, stop))
            nests.extend(program_nests[a:stop])
            if stop < len(program_nests) or k < len(batch) - 1:
                nests.append(_separator(k))
        together = LoadedProgram(batch[0][0].program.with_leir(Leir(tuple(nests))))
        step = engine.one_iteration(chosen, ruleset_name)   # outside the push
        self.regions += len(batch)
        self.runs += 1
        commands = together.declarations().splitlines()
        with shared_terms(together.named_terms(), "$w") as shared, provider_errors():
            for at, loaded, facts, _, a, _, stop in placed:
                for fact in _region_facts(loaded, facts, together, a, stop, at):
                    text = fact.text()
                    commands.extend(shared.take())
                    commands.append(text)
        engine.run("(push)")
        try:
            engine.send(commands + ["(run-schedule (saturate (run analysis)))", step,
                                    "(run-schedule (saturate (run helpers)))"])
            found, stuck = engine.read_rows(self._rows if only is None else {
                match_relation(s, r): (s, r) for s in chosen for r in s.rules})
        finally:
            engine.run("(pop)")
        if stuck:
            return False
        for k, (at, loaded, facts, keys, a, b, stop) in enumerate(placed):
            # a region that ends its program but not the batch is followed by a separator
            # where its program has none: a two-nest rule matching at its last window would
            # take the separator for a nest
            ends = stop == len(loaded.program.leir.nests) and k < len(placed) - 1
            per = self._per_window(found, len(nests), at, b - a + 1,
                                   last=b - a if ends else None, suffixes=together.suffix_terms)
            if per is None:
                self.reason = "a replacement rewrites more than its window"
                return False
            self._keep(per, keys, range(a, b + 1), a, only)
        return True

    # ------------------------------------------------------------ keys

    def _keys(self, loaded: LoadedProgram, facts: list[Fact]) -> list[tuple[tuple, ...]]:
        """The window keys of every top-level position, one per strategy: the facts in a
        strategy's key are those of the relations it reads (``_reads``), those of its
        name-keyed relations (``_atom_keyed``) only where the window holds their strings."""
        nests = loaded.program.leir.nests
        n = len(nests)
        nest_at, suffix_at = _nest_lookup(loaded), _suffix_lookup(loaded)
        inside = []       # per top-level position: every nest it holds (itself included)
        ends = loaded.top_level[1:] + [len(loaded.nests)]
        for start, end in zip(loaded.top_level, ends):
            inside.append(frozenset(loaded.nests[start:end]))
        anchored: list[tuple[str, frozenset, frozenset, tuple]] = []
        common = []
        for fact in facts:
            held, suffixes, values = set(), set(), []
            for sort, value in zip(fact.relation.sorts, fact.columns()):
                nest = nest_at(value) if sort == "Nest" else None
                if nest is not None:
                    held.add(nest)
                    values.append(nest)
                elif sort == "Prog":
                    i = suffix_at(value)
                    suffixes.add(i)
                    values.append(_Suffix(i))
                else:
                    values.append(value)
            if held or suffixes:
                anchored.append((fact.relation.name, frozenset(held), frozenset(suffixes),
                                 tuple(values)))
            else:
                common.append((fact.relation.name, tuple(values)))
        per_strategy = []   # (reads, needs, the term-free facts the key always holds)
        for reads, keyed in zip(self._reads, self._keyed):
            needs = _needs(keyed)
            read = [(f, needs(f)) for f in common if f[0] in reads]
            plain = frozenset(f for f, need in read if need is None)
            named = [(f, need) for f, need in read if need is not None]
            per_strategy.append((reads, bool(keyed), needs, plain, named))
        # per window, the anchored facts it holds (their nests in its two, their suffixes
        # from its first on), in order, with their suffixes placed relative to it
        where: dict[LoopNest, set[int]] = {}   # nest -> the windows holding it
        for k, held in enumerate(inside):
            for nest in held:
                where.setdefault(nest, set()).update((k, k - 1))
        per_window: list[list] = [[] for _ in range(n)]
        for name, held, suffixes, values in anchored:
            windows = None
            for nest in held:
                at = where.get(nest, set())
                windows = at if windows is None else windows & at
            for i in suffixes:
                windows = ({i, i - 1, i - 2} if windows is None
                           else windows & {i, i - 1, i - 2})
            for j in windows:
                if 0 <= j < n:
                    per_window[j].append((name, values))
        keys = []
        for j in range(n):
            own = [(name, tuple(_Suffix(v.at - j) if type(v) is _Suffix else v
                                for v in values)) for name, values in per_window[j]]
            head = (nests[j], nests[j + 1] if j + 1 < n else None, j + 2 >= n)
            there = None   # the strings and integers of the window's nests
            key = []
            for strategy, (reads, keyed, needs, plain, named) in zip(self.strategies,
                                                                     per_strategy):
                facts_own = [f for f in own if f[0] in reads]
                if keyed:
                    if there is None:
                        there = self._held(loaded, j) | (self._held(loaded, j + 1)
                                                         if j + 1 < n else frozenset())
                    facts_own = [f for f in facts_own if _relevant(needs(f), there)]
                    plain = plain | {f for f, need in named if _relevant(need, there)}
                key.append((strategy.id, *head, frozenset(facts_own), plain))
            keys.append(tuple(key))
        return keys

    def _held(self, loaded: LoadedProgram, j: int) -> frozenset:
        """The strings and integers of top-level nest ``j``'s term (names, dtypes, extents,
        ...)."""
        nest = loaded.program.leir.nests[j]
        hit = self._atoms.get(id(nest))
        if hit is None or hit[0] is not nest:
            hit = self._atoms[id(nest)] = (nest, _leaves(loaded.nest_terms[loaded.top_level[j]]))
        return hit[1]

    # ------------------------------------------------------------ matching

    def _whole(self, loaded: LoadedProgram, keys: list[tuple] | None = None,
               bounded: bool = True) -> list[tuple[int, int, tuple[LoopNest, ...], bool]]:
        """The program's edits from matching it whole, kept per window key (``keys``) unless a
        replacement reaches past its window: then no program's edits are kept from now on."""
        self.matched_whole += 1
        self.runs += 1
        n = len(loaded.program.leir.nests)
        found = self.engine.matches(loaded.program, list(self.strategies), named=False)
        per = self._per_window(found, n, 0, n, bounded=bounded, suffixes=loaded.suffix_terms)
        if per is None:
            self.reason = "a replacement rewrites more than its window"
            per = self._per_window(found, n, 0, n, bounded=False)
        elif keys is not None and self.reason is None:
            self._keep(per, keys, range(n), 0)
        return [(j, *edit) for (j, _), edits in sorted(per.items()) for edit in edits]

    def _keep(self, per: dict, keys: list[tuple], windows, first: int,
              only: tuple[int, ...] | None = None) -> None:
        """Keep the edits ``per`` found (by window relative to ``first`` and strategy) under
        the keys of ``windows`` (of the strategies numbered ``only``, None: all)."""
        for j in windows:
            for i in range(len(self.strategies)) if only is None else only:
                self._edits[keys[j][i]] = tuple(per.get((j - first, self.strategies[i].id), ()))

    def _per_window(self, found, n: int, first: int, count: int, bounded: bool = True,
                    last: int | None = None, suffixes: list | None = None
                    ) -> dict[tuple[int, str], list] | None:
        """The edits of ``found`` (matches on a program of ``n`` nests, whose suffix terms are
        ``suffixes``) by the position of their window (relative to ``first``) and their
        strategy, for windows ``first`` to ``first+count-1`` (with ``raw``, the matches
        relative to their windows, ``Relative``); None when ``bounded`` and a replacement
        reaches past its window, or with ``raw`` when a binding holds a program suffix other
        than those starting in the window or right after it. At window ``last`` (relative),
        the last nest of its program, only the matches of one-nest rules are kept."""
        per: dict[tuple[int, str], list] = {}
        for m in found:
            if m.lhs is None or m.rhs is None or m.rhs == m.lhs:
                continue
            old = uncons(m.lhs, "PCons")
            j = n - len(old)
            if not first <= j < first + count:
                continue
            if j - first == last and (m.strategy, m.rule) in self._wide:
                continue
            new = uncons(m.rhs, "PCons")
            keep = 0
            while keep < min(len(old), len(new)) and old[-1 - keep] == new[-1 - keep]:
                keep += 1
            width = len(old) - keep
            if bounded and width > WIDTH:
                return None
            if self.raw:
                bindings = _relative(m.bindings, j, suffixes, m.lhs, self._heads)
                if bindings is None:
                    return None
                per.setdefault((j - first, m.strategy), []).append(
                    (m.rule, width, tuple(new[:len(new) - keep]), bindings))
                continue
            repl = tuple(self._decoder(t) for t in new[:len(new) - keep])
            per.setdefault((j - first, m.strategy), []).append(
                (width, repl, (m.strategy, m.rule) in self._fresh))
        return per


def _region_facts(loaded: LoadedProgram, facts: list[Fact], region: LoadedProgram, a: int,
                  stop: int, at: int = 0) -> list[Fact]:
    """The program's facts about the terms of its region (nests ``a`` to ``stop-1``, placed
    from nest ``at`` of the loaded ``region``), their suffixes the region's (the program's
    suffix ``stop`` is the region's suffix after them: ``PNil`` or a separator's)."""
    top = region.program.leir.nests[at:at + stop - a]
    inside = {n for t, n in region.term_nests()} & {
        n for nest in top for n in nests_in(nest)}
    term_of = {nest: t for t, nest in region.term_nests()}
    nest_at = _nest_lookup(loaded)
    suffix_at = _suffix_lookup(loaded)
    out = []
    for fact in facts:
        values, keep = [], True
        for sort, value in zip(fact.relation.sorts, fact.columns()):
            nest = nest_at(value) if sort == "Nest" else None
            if nest is not None:
                if nest not in inside:
                    keep = False
                    break
                values.append(term_of[nest])
            elif sort == "Prog":
                i = suffix_at(value)
                if not a <= i <= stop:
                    keep = False
                    break
                values.append(region.suffix_terms[at + i - a])
            else:
                values.append(value)
        if keep:
            out.append(Fact(fact.relation, tuple(values), fact.path, fact.line))
    return out


def _nest_lookup(loaded: LoadedProgram):
    """term -> the program's nest equal to it (None if none): by identity first, as providers
    state facts about the loaded program's own term objects."""
    by_id = {id(t): nest for t, nest in loaded.term_nests()}
    by_term: dict = {}

    def nest_at(term):
        nest = by_id.get(id(term))
        if nest is None:
            if not by_term:
                by_term.update((t, nest) for t, nest in loaded.term_nests())
            nest = by_term.get(term)
        return nest
    return nest_at


def _suffix_lookup(loaded: LoadedProgram):
    """suffix term -> the position of its first nest (a suffix is known by its length)."""
    n = len(loaded.program.leir.nests)
    by_id = {id(t): i for i, t in enumerate(loaded.suffix_terms)}

    def suffix_at(term) -> int:
        i = by_id.get(id(term))
        return n - len(uncons(term, "PCons")) if i is None else i
    return suffix_at


def _separator(k: int) -> LoopNest:
    """A nest no program holds (an empty body; index ``__window``), the ``k``-th of a batch."""
    return LoopNest((Loop("L", k + 1, "__window"),), ())


def _region_batches(regions: list[tuple], common) -> list[list[tuple]]:
    """``regions`` (``(loaded, facts, keys, a, b)``) in batches whose members share no nest
    term and have the same facts naming no term (``common(keys)``), ``BATCH_NESTS`` nests at
    most; a region that ends its program is put last (followed by nothing, as in its
    program) unless another such region is (``_match_regions``)."""
    batches: list[tuple[list, set, object, list]] = []   # members, nests used, common, size
    for region in regions:
        loaded, _, keys, a, b = region
        program_nests = loaded.program.leir.nests
        stop = min(b + 2, len(program_nests))
        used = {n for nest in program_nests[a:stop] for n in nests_in(nest)}
        shared = common(keys)
        for members, taken, same, size in batches:
            if same == shared and not used & taken and size[0] + stop - a < BATCH_NESTS:
                members.append(region)
                taken |= used
                size[0] += stop - a + 1
                break
        else:
            batches.append(([region], set(used), shared, [stop - a + 1]))
    out = []
    for members, *_ in batches:   # the region that ends its program last
        out.append(sorted(members, key=lambda r: min(r[4] + 2, len(r[0].program.leir.nests))
                          == len(r[0].program.leir.nests)))
    return out


def _leaves(term) -> frozenset:
    """Every string and integer of a term."""
    out: set = set()
    todo = [term]
    while todo:
        v = todo.pop()
        if type(v) is tuple:
            todo.extend(v[1:])
        else:
            out.add(v)
    return frozenset(out)


def _needs(keyed: dict[str, tuple[tuple[int, ...], ...]]):
    """fact -> None when its relation is not in ``keyed`` (:func:`_atom_keyed`), else for
    each atom of the relation the strings and integers the window must hold for that atom
    to take the fact."""
    def needs(fact) -> tuple[frozenset, ...] | None:
        atoms = keyed.get(fact[0])
        if atoms is None:
            return None
        values = fact[1]
        return tuple(frozenset(values[i] for i in columns if type(values[i]) in (str, int))
                     for columns in atoms)
    return needs


def _relevant(need: tuple[frozenset, ...] | None, there: frozenset) -> bool:
    """Whether a fact with these needs (:func:`_needs`) can take part in a match at a window
    whose nests hold ``there``."""
    return need is None or any(n <= there for n in need)


class _Suffix(tuple):
    """A ``Prog`` column in a window key: the suffix starting at nest ``at`` (of the program,
    or relative to the window)."""

    def __new__(cls, at: int):
        return super().__new__(cls, ("suffix", at))

    @property
    def at(self) -> int:
        return self[1]


def _relative(bindings: tuple, j: int, suffixes: list, lhs: tuple, heads: tuple
              ) -> tuple | None:
    """A match's bindings at window ``j`` (its left-hand side ``lhs``) of a program whose
    suffix terms are ``suffixes``, each value that is the suffix starting at nest ``j+k``
    (``k`` <= ``WIDTH``) as ``_Suffix(k)`` (:func:`_placed` puts another program's suffix
    there); None when a value is another program suffix or holds one (it would not be decided
    by the window's key). ``heads`` (:func:`_prog_heads`) says which terms may hold one."""
    holding, known = heads
    out, moved = [], False
    for name, value in bindings:
        if type(value) is tuple and value[0] in _PROG:
            i = len(suffixes) - 1 - len(uncons(value, "PCons"))
            if not j <= i <= j + WIDTH:
                return None
            inside = lhs   # the engine's terms share objects: the lhs's own suffix first
            for _ in range(i - j):
                inside = inside[2] if inside[0] == "PCons" else inside
            if value is not inside and value != suffixes[i]:
                return None
            value, moved = _Suffix(i - j), True
        elif type(value) is tuple and (value[0] in holding or value[0] not in known
                                       and _holds_prog(value)):
            return None
        out.append((name, value))
    return tuple(out) if moved else bindings   # the match's own, where no suffix moves


def _placed(strategy: str, entry: Relative, j: int, suffixes: list) -> RawMatch:
    """The raw match ``entry`` (:func:`_relative`) at window ``j`` of a program whose suffix
    terms are ``suffixes``."""
    rule, width, repl, bindings = entry
    rhs = suffixes[j + width]
    for term in reversed(repl):
        rhs = ("PCons", term, rhs)
    if any(type(v) is _Suffix for _, v in bindings):
        bindings = tuple((name, suffixes[j + v.at] if type(v) is _Suffix else v)
                         for name, v in bindings)
    return RawMatch(strategy, rule, suffixes[j], rhs, bindings)


_PROG = ("PCons", "PNil")


def _prog_heads(engine: Engine) -> tuple[frozenset, frozenset]:
    """The constructors of the engine's program whose terms may hold a program (``Prog``)
    term -- those of a sort that is ``Prog`` or has a constructor taking such a sort -- and
    every constructor it declares."""
    declared = re.findall(r"\(constructor (\S+) \(([^()]*)\) (\w+)", _base_text(engine))
    holds = {"Prog"}
    grew = True
    while grew:
        grew = False
        for _, args, sort in declared:
            if sort not in holds and holds & set(args.split()):
                holds.add(sort)
                grew = True
    return (frozenset(name for name, _, sort in declared if sort in holds),
            frozenset(name for name, _, _ in declared))


def _holds_prog(term: tuple) -> bool:
    """Whether a term holds a program (``Prog``) term."""
    todo = [term]
    while todo:
        t = todo.pop()
        if t[0] in _PROG:
            return True
        todo.extend(a for a in t[1:] if type(a) is tuple)
    return False


def _runs(positions: list[int]) -> list[tuple[int, int]]:
    """Consecutive runs of sorted positions, as (first, last)."""
    out: list[tuple[int, int]] = []
    for j in positions:
        if out and out[-1][1] == j - 1:
            out[-1] = (out[-1][0], j)
        else:
            out.append((j, j))
    return out
