"""Matching for the per-program exploration in one persistent egglog database (docs/EXPLORE.md,
"The shared method").

Every program of a round is added to one database that is never popped: its nests and suffixes
are declared, the facts of relations decided by their key terms are stated once per fact
(whichever program first holds them), and the facts of every other relation are stated with a
last column naming the program they were computed for (``Engine(context=...)``). The round then
runs the analysis rules, the strategies once and the helpers over the whole database; egglog's
seminaive evaluation matches only what involves tuples added since the last run, so a nest or a
suffix that an earlier program held is not matched again. The rows are read and

* a row of a rule that reads only key-decided facts is a function of its matched term: it is
  placed at every occurrence of that term in every program of the round (and of later rounds);
* a row of a rule that reads a context relation carries the program its context facts were
  stated for, and is placed in that program only -- or, for a nest-classed relation
  (:func:`nest_classed`), the class of programs holding the same nest with the same facts
  about it, whose facts are stated once, and is placed in every program of the class.

A strategy whose analysis or provider egglog rules read a context relation (those rules would
derive facts without the program column) is matched program by program with the per-program
engine instead (:func:`fallback_reason`).
"""

from __future__ import annotations

import copy
import re
import time
from functools import lru_cache
from typing import NamedTuple

from ..egraph.encoding import Term, shared_terms, to_egglog
from ..egraph.engine import (Engine, RawMatch, _matches, base_program, engine_for,
                             match_relation, prelude_text, provider_errors, reads_context,
                             read_relations, row_constructor, ruleset_name)
from ..egraph.facts import Later
from ..egraph.input_rows import (HELD_SUFFIX, RAW, References, load_commands,
                                 load_schema, loaded_relations, rows_folder)
from ..egraph.loaded import LoadedProgram
from ..egraph.parameters import FreshNames, fresh_rules, fresh_tensor_names, named
from ..egraph.strategy import Strategy
from ..egraph.vocabulary import Vocabulary, vocabulary_of
from ..leir.ast import Leir
from ..leir.program import Program
from .space import Deadline
from .worker import Stopped, default_memory_mb, worker_for

# The relations docs/RULES.md 5.5 calls decided by their key columns alone: a fact stated for
# one program is true of every program holding its key terms (tests/test_providers.py checks
# the claim, tests/test_explore.py that this set is that table's).
KEY_DECIDED = frozenset({
    "BoundIndexTable", "BoundSubexpressionFrame", "CompoundIndexRead", "EquationCount",
    "FactorizableReduction", "IndependentAxis", "InnerLoopsUsed", "KernelLoops", "LoopNext",
    "LoopOuter", "MathNatural", "ProperFactor", "ReadOnlyIn", "ReorderedSubexpressionFrame",
    "ScanAxis", "ScanGap", "ScanNest", "ScopeChange", "ShiftableOperand", "SplitBy",
    "SplitPoint", "SplitSite", "StagingLoops", "StagingScope", "StencilLoops",
    "SubexpressionFrame", "SubscriptOnlyIndex", "Swappable", "SympyForm", "TensorInNest",
    "TensorInSuffix", "TensorNotInNest", "TensorNotInSuffix", "TensorSplitPoint", "UnreadIn",
    "WholePartials"})
# Decided by the signature alone (5.5), which is one for the whole exploration.
SIGNATURE_DECIDED = frozenset({"Intermediate"})


# Decided by their two nest terms alone and stated, by one provider and one predicate, for
# every pair of adjacent top-level nests (5.5: "its key columns (true of the terms alone), but
# stated only for nests adjacent in the program"). Such a fact, stated once, is true of every
# program holding the pair; a program holding the pair *adjacent* states it too. So it is
# shared with the rules that read it on an adjacent pair -- an LHS ``(PCons a (PCons b rest))``
# and the fact about ``a b`` (:func:`reads_adjacent_only`) -- and stays a context relation for
# any other reader. ``Fusible`` is one since operator_fission reads facts of its own
# (``Fissionable``) and the dependency guard alone states it, by ``legality.fusible``.
ADJACENT_PAIR = frozenset({"Fusible", "Inlinable", "LoopsWithin"})
_ADJACENT_LHS = re.compile(r"\(PCons (\w+) \(PCons (\w+) \w+\)\)")


def reads_adjacent_only(relation: str, strategies) -> bool:
    """Whether every rule of ``strategies`` that reads ``relation`` reads it about two adjacent
    top-level nests: its LHS is ``(PCons a (PCons b rest))`` and each such condition's first
    two columns are ``a b``."""
    for strategy in strategies:
        for rule in strategy.rules:
            for atom in rule.guard_atoms:
                if atom.relation != relation:
                    continue
                lhs = _ADJACENT_LHS.fullmatch(" ".join(rule.lhs.split()))
                if lhs is None or atom.args[:2] != (lhs[1], lhs[2]):
                    return False
    return True


def context_relations(vocab: Vocabulary, strategies=None) -> frozenset[str]:
    """Every guard and parameter relation of ``vocab`` whose facts may differ between two
    programs of one exploration holding the same key terms (not in :data:`KEY_DECIDED` or
    :data:`SIGNATURE_DECIDED`, nor an :data:`ADJACENT_PAIR` relation that every rule of
    ``strategies`` reads on adjacent nests; a relation the audit does not list counts as one).
    Without ``strategies``, the adjacent-pair relations count as context relations."""
    every = set(vocab.relations) | set(vocab.parameters)
    shared = KEY_DECIDED | SIGNATURE_DECIDED
    if strategies is not None:
        shared |= {r for r in ADJACENT_PAIR if reads_adjacent_only(r, strategies)}
    return frozenset(every - shared)


# The context column of a nest class's facts (below) is ``CLASS_BASE`` + the class's number;
# a program's own context facts carry its number, which stays below it.
CLASS_BASE = 1 << 40


def nest_classed(vocab: Vocabulary, strategies, context: frozenset[str]) -> frozenset[str]:
    """The context relations the shared method states per **nest class** (docs/EXPLORE.md,
    "Nest classes"): relations whose first column is a nest, every rule of ``strategies``
    reading one of them reads no other context relation, reads all of them about one nest
    variable (their first argument), and rewrites no program suffix (a suffix rule joins its
    context with ``HeldSuffix__``, which names a program)."""
    def first_sort(name: str) -> str | None:
        relation = vocab.parameters.get(name) or vocab.relations.get(name, (None, None))[1]
        return relation.sorts[0] if relation is not None and relation.sorts else None

    chosen = {name for name in context if first_sort(name) == "Nest"}
    changed = True
    while changed:
        changed = False
        for strategy in strategies:
            for rule in strategy.rules:
                heads = {c.head for c in rule.parsed_conditions} & context
                if not heads & chosen:
                    continue
                atoms = [a for a in rule.guard_atoms if a.relation in context]
                if not ({a.relation for a in atoms} == heads <= chosen
                        and rule.lhs_sort != "Prog" and len({a.args[0] for a in atoms}) == 1):
                    chosen -= heads
                    changed = True
    return frozenset(chosen)


@lru_cache(maxsize=256)
def fallback_reason(strategy: Strategy, context: frozenset[str]) -> str | None:
    """Why a strategy cannot be matched in the shared database (None when it can): an egglog
    rule of its vocabulary (prelude, guards' analysis rules, providers' ``.egg`` files) reads a
    context relation, and would derive facts that lose the program they hold in. Kept per
    strategy and context set (every exploration asks it for each strategy again, and scanning
    the rule text for each relation was about 7 ms of a 10-strategy exploration's set-up)."""
    text = prelude_text() + vocabulary_of((strategy,)).analysis_rules
    read = sorted(n for n in context if re.search(rf"\({n}[\s)]", text))
    if read:
        return f"its egglog rules read the context relation(s) {', '.join(read)}"
    return None


def subterms(term: Term) -> list[Term]:
    """The distinct subterms of ``term`` (itself included), in pre-order of first occurrence."""
    seen: set = set()
    out: list[Term] = []
    stack = [term]
    while stack:
        t = stack.pop()
        if t in seen:
            continue
        seen.add(t)
        out.append(t)
        stack.extend(a for a in reversed(t[1:]) if type(a) is tuple)
    return out


# The ruleset that empties ``Matched`` once a round's rows are read: the next round prints only
# the rows its own rule run recorded (the recording rules only write ``Matched``, no rule reads
# it, so emptying it changes no match).
CLEAR_ROWS = "clear_rows__"


class NestFacts:
    """A program's facts, those of the **per-nest producers** computed once per top-level nest
    term of the exploration (docs/EXPLORE.md, "Facts per new term").

    A producer is per-nest when every relation it declares is decided by its key columns alone
    (:data:`KEY_DECIDED`) and none has a program-suffix (``Prog``) column: its facts about a
    nest term, and the extents, names and expressions in it, are the same in every program
    holding the term, so they are those of the program made of that top-level nest alone
    (same signature). A program's facts are then every other producer's facts about the whole
    program and the per-nest producers' facts about its top-level nests not seen before (the
    facts about the others were stated when they were new)."""

    def __init__(self, vocabulary: Vocabulary, wanted: set[str]):
        self.vocabulary, self.wanted = vocabulary, wanted
        self.per_nest, self.whole = [], []
        for produce, declared in self.vocabulary.producers:
            if not any(name in self.wanted for name in declared):
                continue
            alone = all(name in KEY_DECIDED and "Prog" not in relation.sorts
                        for name, relation in declared.items())
            (self.per_nest if alone else self.whole).append((produce, declared))
        self._seen: set[Term] = set()   # top-level nest terms whose facts were made

    def anew(self) -> "NestFacts":
        """The same producers, no nest seen yet (one per exploration)."""
        fresh = copy.copy(self)
        fresh._seen = set()
        return fresh

    def of(self, loaded: LoadedProgram):
        """The facts to state for ``loaded`` (a per-nest producer's only for new nests)."""
        yield from self.vocabulary.facts(loaded, self.wanted, self.whole)
        if not self.per_nest:
            return
        program = loaded.program
        for _, term, nest in loaded.top_nests():
            if term in self._seen:
                continue
            self._seen.add(term)
            alone = LoadedProgram(program.with_leir(Leir((nest,))))
            yield from self.vocabulary.facts(alone, self.wanted, self.per_nest)


class SharedEngine(NamedTuple):
    """A strategy set's shared database as built (:func:`shared_engine_for`)."""
    engine: Engine
    # the relations holding rows when the database is built (facts of the providers' egglog
    # files: ``TileIdentity``, ``OnlineFloat``), with their sizes; None when a function with an
    # output holds some (its values could change under a merge without its size changing)
    built: dict[str, int] | None


@lru_cache(maxsize=4)
def shared_engine_for(strategies: tuple[Strategy, ...]) -> SharedEngine:
    """The context engine of a strategy set (its vocabulary's context relations), with the
    references' constructors, the one-iteration ruleset and the ruleset emptying what an
    exploration adds (:data:`EMPTY_ALL`) declared (:meth:`SharedDatabase.end`)."""
    context = context_relations(vocabulary_of(strategies), strategies)
    engine = Engine(strategies, context, reached_helpers_only=True)
    engine.declare(References.declarations())
    loading = load_schema(loaded_relations(engine.vocabulary, context))
    engine.send(loading)
    engine.run(f"(ruleset {CLEAR_ROWS})\n"
               f"(rule ((Matched r)) ((delete (Matched r))) :ruleset {CLEAR_ROWS})")
    engine.one_iteration(strategies, ruleset_name)
    declared = "\n".join([base_program(engine.vocabulary, context), References.declarations(),
                          *loading, *(row_constructor(s, r, context)
                                      for s in strategies for r in s.rules)])
    text, built = emptying_ruleset(engine, declared)
    engine.run(text)
    return SharedEngine(engine, built)


# The ruleset deleting every row of every function of a shared database that holds none when
# the database is built, run when an exploration ends: the database is then as it was built,
# at about 1.5-2 ms for a small exploration's rows, where egglog's ``push`` and ``pop``
# (cloning every table and rule of the schema) took 15-20 ms whatever the rows.
# (docs/EXPLORE.md, "The database between explorations".)
EMPTY_ALL = "empty_all__"
_DECLARED = re.compile(r"\((constructor|relation|function) (\S+) \(([^()]*)\)")


def emptying_ruleset(engine: Engine, declared: str) -> tuple[str, dict[str, int] | None]:
    """The :data:`EMPTY_ALL` ruleset of ``engine`` (one rule per function holding no row now,
    deleting each of its rows) and the relations holding rows now, with their sizes (None
    when a function with an output holds some). ``declared`` is the text of the engine's
    declarations; every function egglog holds must be declared there (``RuntimeError``
    naming those that are not, so no table is left unemptied)."""
    (sizes,) = engine.run("(print-size)")
    held = dict(sizes.sizes)
    rules, covered, built = [f"(ruleset {EMPTY_ALL})"], set(), {}
    for kind, name, sorts in _DECLARED.findall(declared):
        if name not in held or name in covered:
            continue
        covered.add(name)
        if held[name]:
            built = None if built is None or kind != "relation" else {**built, name: held[name]}
            continue
        call = "(" + " ".join([name, *(f"v{i}" for i in range(len(sorts.split())))]) + ")"
        query = call if kind == "relation" else f"(= out__ {call})"
        rules.append(f"(rule ({query}) ((delete {call})) :ruleset {EMPTY_ALL})")
    if held.keys() - covered:
        raise RuntimeError(f"the shared database cannot empty "
                           f"{', '.join(sorted(held.keys() - covered))}: not declared where "
                           f"emptying_ruleset looks")
    return "\n".join(rules), built


class _SetUp(NamedTuple):
    """What a :class:`SharedMatcher` derives from its strategy set alone."""
    context: frozenset[str]     # the relations stated with a context column
    shared: tuple               # the strategies matched in the shared database
    alone: tuple                # those that fall back to the per-program engine
    classed: frozenset[str]     # the nest-classed context relations
    facts: NestFacts | None     # the producers, split (NestFacts.anew per exploration)
    loaded: dict | None         # the relations loaded as rows, with their sorts
    order: dict                 # (strategy id, rule name) -> its rank in rule order
    fresh: frozenset            # the rules naming fresh tensors (fresh_rules)


@lru_cache(maxsize=4)
def _set_up(chosen: tuple[Strategy, ...], classes: bool) -> _SetUp:
    """The relation sets and producers of a strategy set, a function of the set (and of
    ``classes``) alone, derived once per process and set: every exploration of the set asked
    them again, about 1.5 ms of a small program's depth-2 exploration."""
    context = context_relations(vocabulary_of(chosen), chosen)
    shared = tuple(s for s in chosen if fallback_reason(s, context) is None)
    alone = tuple(s for s in chosen if s not in shared)
    classed, facts, loaded = frozenset(), None, None
    if shared:
        vocabulary = vocabulary_of(shared)
        context = context_relations(vocabulary, shared)
        if classes:
            classed = nest_classed(vocabulary, shared, context)
        facts = NestFacts(vocabulary, read_relations(shared, vocabulary))
        loaded = loaded_relations(vocabulary, context)
    order = {(s.id, r.name): i for i, (s, r) in
             enumerate((s, r) for s in chosen for r in s.rules)}
    return _SetUp(context, shared, alone, classed, facts, loaded, order, fresh_rules(shared))


# Past this many rows and commands sent since the database was last restored, an exploration's
# end restores it instead of emptying it (:meth:`SharedDatabase.end`): deleting costs about
# what the rows are (conv_standard_1D at depth 2, 5,807 programs: 33 ms, against 20-30 ms for a
# restore holding them), and a restore also frees what deleting rows leaves behind in egglog (its union-find
# of every e-class made since).
RESTORE_ROWS = 20_000


class SharedDatabase:
    """The persistent egglog database of one strategy set (run in a child process of its own,
    explore/worker.py, so that a limit can stop it): :meth:`match` sends a round's commands,
    runs the round and returns its rows; :meth:`end` ends an exploration, leaving the database
    empty for the next one.

    Built, it is ``push``-ed once: an exploration's end deletes every row it added
    (:data:`EMPTY_ALL`), or restores that pushed database (``pop``, then ``push`` again) past
    :data:`RESTORE_ROWS` rows sent since the last restore, after a round that raised, or when
    a relation holding rows when built holds more."""

    def __init__(self, shared: tuple[Strategy, ...]):
        self.engine, self._built = shared_engine_for(shared)
        self._rows = {match_relation(s, r): (s, r) for s in shared for r in s.rules}
        self._contextual = frozenset(match_relation(s, r) for s in shared for r in s.rules
                                     if reads_context(r, self.engine.context))
        self._step = self.engine.one_iteration(shared, ruleset_name)
        self._folder = rows_folder("leir-shared-")   # the rows' files
        self._sizes = "\n".join(f"(print-size {name})" for name in self._built or ())
        self.engine.run("(push)")   # the database as built, restored by end()
        self._sent = 0              # rows and commands sent since the last restore
        self._failed = False        # a round raised since the last restore

    def end(self) -> str:
        """Leave the database as it was built for the next exploration; how: ``"emptied"``
        or ``"restored"``."""
        if self._failed or self._sent > RESTORE_ROWS or not self._built_kept():
            self.engine.run("(pop)\n(push)")
            self._sent, self._failed = 0, False
            return "restored"
        self.engine.run(f"(run {EMPTY_ALL} 1)")
        return "emptied"

    def _built_kept(self) -> bool:
        """Whether the relations holding rows when the database was built hold those alone
        (rows are only added to them, so their sizes say it)."""
        if self._built is None:
            return False
        if not self._sizes:
            return True
        sizes = [out.size for out in self.engine.run(self._sizes)]
        return sizes == list(self._built.values())

    def match(self, commands: list[str], rows: dict[str, list[tuple]]) -> list[RawMatch]:
        """Send ``commands`` (a round's terms and the facts not loaded as rows), load ``rows``
        (:func:`load_commands`), saturate the analysis rules, run the strategies for one
        iteration and the helpers to saturation; the rows this run recorded, read from egglog's
        frozen tables where they decide them (``Engine.read_table``; ``Matched`` is emptied
        after it)."""
        engine = self.engine
        self._sent += len(commands) + sum(len(r) for r in rows.values())
        self._failed = True   # until the round is done
        engine.send(commands + load_commands(rows, self._folder.name)
                    + ["(run-schedule (saturate (run analysis)))", self._step,
                       "(run-schedule (saturate (run helpers)))"])
        table = engine.read_table("Matched")
        engine.run(f"(run {CLEAR_ROWS} 1)")
        self._failed = False
        self._sent += len(table)
        return _matches(table, self._rows, self._contextual)[0]


class SharedMatcher:
    """One persistent database for one exploration's programs (module docstring), held by a
    child process (explore/worker.py) that a deadline or a memory limit stops.

    ``add(program)`` computes a program's terms and facts, returning its number; ``match()``
    runs the round and returns nothing (it raises ``worker.Stopped`` when a limit cut it);
    ``matches(number, term)`` then gives that program's rows in rule order, as
    ``Engine.matches`` would for it alone."""

    def __init__(self, chosen: tuple[Strategy, ...], memory_mb: float | None = None,
                 classes: bool = True):
        made = _set_up(chosen, classes)
        self.context, self.shared, self.alone, self.classed = (
            made.context, made.shared, made.alone, made.classed)
        self.memory_mb = default_memory_mb() if memory_mb is None else memory_mb
        self.worker = None
        # this process's CPU spent starting the database process and compiling engines, once
        # per process and strategy set: what an exploration's CPU leaves out
        # (explorer._explore_shared)
        self.compile_cpu_s = 0.0
        self._worker_cpu = [0.0, 0.0]   # the database process's CPU at push, at pop
        self._facts = None
        if self.shared:   # the relations its database holds with a program column
            self._facts = made.facts.anew()
            self._loaded = made.loaded
            compiling = time.process_time()
            self.worker = worker_for(self.shared)
            self.compile_cpu_s += time.process_time() - compiling
            self._worker_cpu = [self.worker.cpu_s] * 2
        compiling = time.process_time()
        self.fallback = engine_for(self.alone) if self.alone else None
        self.compile_cpu_s += time.process_time() - compiling
        self.order, self._fresh = made.order, made.fresh
        self._renamings: dict[tuple, FreshNames] = {}   # fresh names -> their renaming
        self._stated: set = set()
        self._references = References()
        self._pending: list[str] = []
        self._rows: dict[str, list[tuple]] = {}   # the facts to load as rows (load_commands)
        self._programs: list[Program] = []
        self._by_term: dict[Term, list[RawMatch]] = {}
        self._by_program: dict[int, list[RawMatch]] = {}
        self._seen: set[RawMatch] = set()
        self._classes: dict[tuple, int] = {}          # (nest, its facts) -> context column
        self._class_of: dict[int, list[int]] = {}     # program number -> its classes

    @property
    def facts_stated(self) -> int:
        """How many facts of key-decided relations have been stated (each once)."""
        return len(self._stated)

    @property
    def worker_cpu_s(self) -> float:
        """The CPU seconds of the database's process for this exploration so far: from the
        matcher's start on, the database's emptying included once the matcher is closed (0
        without one)."""
        start, end = self._worker_cpu
        return (self.worker.cpu_s if self.worker is not None else end) - start

    def close(self) -> None:
        """Delete this exploration's programs from the database (its process is kept for the
        next exploration of the same strategy set: compiling the rules takes seconds)."""
        if self.worker is not None and self.worker.alive:
            try:
                self.worker.call("end", (), None, None)
            except Stopped:   # it ended since its last reply: nothing left to drop
                pass
        if self.worker is not None:
            self._worker_cpu[1] = self.worker.cpu_s
        self.worker = None

    def __enter__(self) -> "SharedMatcher":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def add(self, program: Program) -> int:
        """Compute ``program``'s terms and facts to send (those of a key-decided relation only
        when no earlier program stated them); its number, the context column of its facts."""
        number = len(self._programs)
        self._programs.append(program)
        if self._facts is None:
            return number
        loaded = LoadedProgram(program)
        context, out = self.context, []
        with shared_terms(table=self._references) as shared, provider_errors():
            self._references.number(loaded.suffix_terms[0])  # the program and its subterms
            for t in loaded.suffix_terms[:-1]:
                self._state(HELD_SUFFIX, (t,), number, out)
            about: dict = {}   # nest -> the program's facts of classed relations about it
            for fact in self._facts.of(loaded):
                if fact.name in self.classed:
                    about.setdefault(fact.columns()[0], {})[fact] = None
                elif fact.name in context:
                    self._state(fact.name, fact.columns(), number, out)
                elif fact not in self._stated:
                    self._stated.add(fact)
                    self._state(fact.name, fact.columns(), None, out)
            for nest, facts in about.items():
                # a class is a nest and its facts' relations and columns: the facts themselves
                # where no column is deferred (a Fact is equal by relation and columns, and
                # keeps its hash: the per-nest memos hand the same ones back), else their columns
                key = (nest, frozenset(f if not f.values or type(f.values[-1]) is not Later
                                       else (f.name, f.columns()) for f in facts))
                column = self._classes.get(key)
                if column is None:   # a new class: its facts stated once, with its column
                    column = self._classes[key] = CLASS_BASE + len(self._classes)
                    for fact in facts:
                        self._state(fact.name, fact.columns(), column, out)
                self._class_of.setdefault(number, []).append(column)
            out += shared.take()
        self._pending += out
        return number

    def _state(self, name: str, columns: tuple, context: int | None, out: list[str]) -> None:
        """State a fact of relation ``name`` (``context``: its context column, if any): as a
        row to load when its relation is loaded and its strings are plain, else as a command
        appended to ``out`` (after the references its text names)."""
        sorts = self._loaded.get(name)
        tail = () if context is None else (context,)
        row = None if sorts is None else self._references.row(sorts, columns)
        if row is not None:
            self._rows.setdefault(name + RAW, []).append((*row, *tail))
            return
        text = "(" + " ".join([name, *(to_egglog(v) for v in (*columns, *tail))]) + ")"
        out += self._references.take()
        out.append(text)

    def match(self, deadline: Deadline | None = None) -> None:
        """Run the round over what :meth:`add` stated since the last round and read the rows;
        ``worker.Stopped`` when ``deadline`` passes or the database's process exceeds the
        memory limit first (the process is killed: this matcher matches nothing more)."""
        if self.worker is None:
            return
        pending, self._pending = self._pending, []
        rows, self._rows = {**self._references.take_rows(), **self._rows}, {}
        found = self.worker.call("match", (pending, rows), deadline, self.memory_mb)
        # Only this round's rows are printed; a match found again (a new fact about an old
        # term lets a rule match it anew) is kept once.
        for m in found:
            if m in self._seen:
                continue
            self._seen.add(m)
            if m.context is None:
                self._by_term.setdefault(m.lhs, []).append(m)
            else:
                self._by_program.setdefault(m.context, []).append(m)

    def matches(self, number: int, term: Term) -> list[RawMatch]:
        """The rows of program ``number`` (its encoded term ``term``), in rule order: the
        shared rows of every subterm it holds, its own context rows, and the per-program
        engine's rows for the strategies that fall back."""
        out: list[RawMatch] = []
        if self._by_term:
            for t in subterms(term):
                out += self._by_term.get(t, ())
        out += self._by_program.get(number, ())
        for column in self._class_of.get(number, ()):
            out += self._by_program.get(column, ())
        # the placeholders of FreshTensor, the same in every program, as this one's names;
        # a renaming depends on those names alone, so programs with the same fresh names
        # share one (each row's terms renamed once for all of them)
        program = self._programs[number]
        if any((m.strategy, m.rule) in self._fresh for m in out):
            key = tuple(fresh_tensor_names(program))
            names = self._renamings.get(key)
            if names is None:
                names = self._renamings[key] = FreshNames(program)
            out = named(program, out, self._fresh, names)
        if self.fallback is not None:
            out += self.fallback.matches(self._programs[number], self.alone)
        order = self.order
        out.sort(key=lambda m: order.get((m.strategy, m.rule), len(order)))
        return out
