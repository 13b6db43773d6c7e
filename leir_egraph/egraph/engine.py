"""The egglog side of single-step enumeration.

One persistent ``egglog.bindings.EGraph`` per strategy set holds the schema, the generated
traversal helpers, the guard and parameter relations, the prelude and every strategy's rules.
Each rule file's ``(rewrite LHS RHS :when (C...))`` is compiled into a *recording* rule

    (rule ((= __lhs LHS) C...) ((Matched (Match__<strategy>__<rule> __lhs RHS b1 b2 ...)))
          :ruleset <strategy>)

so that running a strategy's ruleset for exactly one iteration records every (site, replacement,
bindings) triple instead of unioning: matches are taken against the pre-iteration database, so a
rule never fires on what it just built, and no multi-site combinations arise. Per program the
engine pushes, declares the program and its facts, saturates ``analysis``, runs the strategies
once, saturates ``helpers`` (which evaluates helper functions in right-hand sides), reads the
match table and pops. Each rule is also compiled as a *finding* rule (its query alone, no
replacement) and a *making* rule (the recording rule restricted by a ``Chosen`` fact), so that a
seeded draw builds only the replacements it keeps (:class:`Applications`, ``steps.drawn_steps``).

Every rule's row is a term of its own constructor ``Match__<strategy>__<rule>`` of the sort
``MatchRow``, and all rows are kept in one relation, ``Matched``, read in one go
(:meth:`Engine.read_rows`): from egglog's frozen tables, each e-class's term once however many
rows share it (:mod:`.frozen_rows`), or, where those tables do not decide a term as egglog's
extractor would, with one ``print-function``.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache

from .encoding import (SORT_OF, Literal, SharedTerms, Term, from_termdag,
                       named_declarations, shared_terms, to_egglog)
from .facts import FactError
from .frozen_rows import Ambiguous, FrozenReader, unextractable_constructors
from .input_rows import (HELD_SUFFIX, RAW, References, load_commands, load_schema, rows_folder,
                         loaded_relations)
from .loaded import LoadedProgram
from .parameters import FreshNames, fresh_rules, named
from .strategy import DEFAULT_RULES_DIR, Rule, RuleFileError, Strategy
from .traversals import SCHEMA_FILE, helper_program
from .vocabulary import ProviderError, Vocabulary, vocabulary, vocabulary_of

PRELUDE_DIR = DEFAULT_RULES_DIR / "prelude"
MAX_ROWS = 1_000_000
BATCH_CHARS = 1_000  # see batches()


def match_relation(strategy: Strategy, rule: Rule) -> str:
    return f"Match__{strategy.id}__{rule.name.replace('-', '_')}"


def ruleset_name(strategy: Strategy) -> str:
    return f"strategy__{strategy.id}"


# The forms of a compiled rule: its recording rule (the full enumeration, Engine.matches), and
# its finding and making rules (a seeded draw, Engine.applications). Engine._compile.
FORMS = ("recording", "drawing")


MATCH_TABLE = "(sort MatchRow)\n(relation Matched (MatchRow))\n(sort FoundRow)\n(relation Found (FoundRow))"


def found_relation(strategy: Strategy, rule: Rule) -> str:
    return f"Find__{strategy.id}__{rule.name.replace('-', '_')}"


def chosen_relation(strategy: Strategy, rule: Rule) -> str:
    return f"Chosen__{strategy.id}__{rule.name.replace('-', '_')}"


def finding_ruleset(strategy: Strategy) -> str:
    return f"find__{strategy.id}"


def making_ruleset(strategy: Strategy) -> str:
    return f"make__{strategy.id}"


CONTEXT_VARIABLE = "__ctx"


def reads_context(rule: Rule, context: frozenset[str]) -> bool:
    """Whether a rule reads a relation of ``context`` (one with a program column, below)."""
    return any(c.head in context for c in rule.parsed_conditions)


def row_constructor(strategy: Strategy, rule: Rule, context: frozenset[str] = frozenset()) -> str:
    """The declaration of a rule's row constructor (its matched term, its replacement, the
    program column where the rule reads ``context`` (:func:`recording_rule`), its bindings);
    its recording and making rules both build these rows."""
    sorts = [rule.lhs_sort, rule.lhs_sort] + (["i64"] if reads_context(rule, context) else [])
    sorts += [s for _, s in rule.bindings]
    return f"(constructor {match_relation(strategy, rule)} ({' '.join(sorts)}) MatchRow)"


def recording_rule(strategy: Strategy, rule: Rule, context: frozenset[str] = frozenset()) -> str:
    """The single-step form of a rule: record a row (:func:`row_constructor`) instead of
    unioning.

    ``context``: relations declared with one more column, last, naming the program their fact
    was stated for (an ``i64``; a shared database holding many programs, explore/shared.py).
    Every such condition of the rule reads it through one variable, so all of a match's
    context facts are of one program, and the row records that program after its
    replacement; a rule rewriting a program suffix also reads ``(HeldSuffix__ __lhs __ctx)``,
    so that its context facts (a fresh tensor name, which names no term) do not join with the
    suffixes of every other program in the database. Empty (the per-program engine), the rule
    is compiled as written."""
    conditions = list(rule.conditions)
    values = ["__lhs", rule.rhs]
    if reads_context(rule, context):
        for i, condition in enumerate(rule.parsed_conditions):
            if condition.head in context:
                conditions[i] = f"{condition.text[:-1]} {CONTEXT_VARIABLE})"
        if rule.lhs_sort == "Prog":
            conditions.append(f"({HELD_SUFFIX} __lhs {CONTEXT_VARIABLE})")
        values.append(CONTEXT_VARIABLE)
    facts = " ".join([f"(= __lhs {rule.lhs})"] + conditions)
    values = " ".join(values + list(rule.binding_names))
    row = match_relation(strategy, rule)
    return (f"(rule ({facts}) ((Matched ({row} {values}))) :ruleset {ruleset_name(strategy)} "
            f":name \"{strategy.id}/{rule.name}\")")


def key_relation(name: str) -> str:
    """The relation stating a deferred relation's facts without their last column."""
    return f"{name}__key"


def deferred_columns(rule: Rule, deferred) -> dict[str, str] | None:
    """The variables a rule binds only through the last column of a deferred relation, by
    relation name; empty when the rule reads none, and ``None`` when it reads one in a way that
    cannot wait (its last column is not a variable, or another condition uses that variable)."""
    out: dict[str, str] = {}
    for atom in rule.guard_atoms:
        if atom.relation not in deferred:
            continue
        last = atom.args[-1]
        others = [c for c in rule.parsed_conditions
                  if c.head != atom.relation and last in c.variables]
        if not last.isidentifier() or others or last in rule.lhs_variables:
            return None
        out[last] = atom.relation
    return out


def finding_rule(strategy: Strategy, rule: Rule, deferred=frozenset()) -> str:
    """The rule's query alone: record (site, bindings) without building the replacement, so
    that no helper runs for it (a capped enumeration builds only the applications it keeps).
    A condition on a ``deferred`` relation reads its key relation instead, and the variable of
    its last column is not reported."""
    waiting = [a for a in rule.guard_atoms if a.relation in deferred]
    conditions = list(rule.conditions)
    for atom in waiting:
        at = next(i for i, c in enumerate(rule.parsed_conditions)
                  if c.head == atom.relation and conditions[i] == c.text)
        conditions[at] = f"({key_relation(atom.relation)} {' '.join(atom.args[:-1])})"
    hidden = {a.args[-1] for a in waiting}
    shown = [(n, s) for n, s in rule.bindings if n not in hidden]
    sorts = " ".join([rule.lhs_sort] + [s for _, s in shown])
    facts = " ".join([f"(= __lhs {rule.lhs})"] + conditions)
    values = " ".join(["__lhs", *(n for n, _ in shown)])
    return (f"(constructor {found_relation(strategy, rule)} ({sorts}) FoundRow)\n"
            f"(rule ({facts}) ((Found ({found_relation(strategy, rule)} {values}))) "
            f":ruleset {finding_ruleset(strategy)} :name \"find {strategy.id}/{rule.name}\")")


def making_rule(strategy: Strategy, rule: Rule) -> str:
    """The recording rule restricted to the applications named in its ``Chosen`` relation.

    The ``Chosen`` atom comes last. Written first, egglog 13.2 returned matches the rule without
    it does not have (tests/test_engine.py,
    ``test_a_drawn_application_makes_only_rows_the_full_enumeration_has``): for
    partially_equivalent_then_correct on conv1d_conv1d_padding it bound the padding's loops
    ``ploops`` to every loop list holding the padded loop, though ``(= p1 (MkNest ploops ..))``
    pins them -- three rows where the rule has one, two of them programs that read out of
    range."""
    sorts = " ".join([rule.lhs_sort, *(s for _, s in rule.bindings[:1])])
    chosen = " ".join([chosen_relation(strategy, rule), "__lhs", *rule.binding_names[:1]])
    facts = " ".join((f"(= __lhs {rule.lhs})",) + rule.conditions + (f"({chosen})",))
    values = " ".join(["__lhs", rule.rhs, *rule.binding_names])
    return (f"(relation {chosen_relation(strategy, rule)} ({sorts}))\n"
            f"(rule ({facts}) ((Matched ({match_relation(strategy, rule)} {values}))) "
            f":ruleset {making_ruleset(strategy)} :name \"make {strategy.id}/{rule.name}\")")



@contextmanager
def provider_errors():
    """A provider's bad fact (:class:`FactError`) as the rule-file error the commands report as
    bad input: one line, naming the provider's file and the line that made the fact."""
    try:
        yield
    except FactError as err:
        raise RuleFileError(err.path, err.line, err.message) from None


@lru_cache(maxsize=1)
def prelude_text() -> str:
    """The shared egglog preludes, ``rules/prelude/*.egg``, in name order."""
    return "\n".join(p.read_text() for p in sorted(PRELUDE_DIR.glob("*.egg")))


def base_program(vocab: Vocabulary | None = None, context: frozenset[str] = frozenset()) -> str:
    """Schema, rulesets, helpers, the relations of the vocabulary (default: the shared one), the
    prelude, the providers' egglog files and the guards' analysis rules. The relations of
    ``context`` are declared with a last ``i64`` column naming a program (:func:`recording_rule`)."""
    vocab = vocab or vocabulary()
    declarations = vocab.declarations()
    if context:
        declarations = re.sub(r"^\(relation (\w+) \(([^()]*)\)\)$",
                              lambda m: (f"(relation {m[1]} ({m[2]} i64))" if m[1] in context
                                         else m[0]), declarations, flags=re.M)
        declarations += f"\n(relation {HELD_SUFFIX} (Prog i64))"
    parts = [SCHEMA_FILE.read_text(), named_declarations(),
             "(ruleset helpers)\n(ruleset analysis)", helper_program(),
             declarations, prelude_text(), vocab.analysis_rules, MATCH_TABLE]
    return "\n".join(p for p in parts if p)


def analysed_relations(vocabulary: Vocabulary) -> set[str]:
    """The names the prelude's and the vocabulary's egglog analysis rules mention."""
    return set(re.findall(r"\((\w+)", prelude_text() + vocabulary.analysis_rules))


def read_relations(strategies, vocabulary: Vocabulary) -> set[str]:
    """The relations a strategy set's compiled rules or analysis rules can read: facts are
    only sent for these."""
    return ({c.head for s in strategies for r in s.rules for c in r.parsed_conditions}
            | analysed_relations(vocabulary))


@dataclass(frozen=True)
class RawMatch:
    """One recorded application before it is placed in the program: the matched term, its
    replacement (``None`` if a helper did not finish), and the reported bindings."""
    strategy: str
    rule: str
    lhs: Term
    rhs: Term | None
    bindings: tuple[tuple[str, Term | Literal | None], ...]
    context: int | None = None  # the program its context facts were stated for, if any


class Engine:
    """A compiled strategy set, reusable across programs (push/pop per program).

    ``context`` (explore/shared.py): relations whose facts hold only in the program they were
    stated for. They are declared with a last column naming that program, every rule reading
    them is compiled to bind it (:func:`recording_rule`), no relation is deferred, and only the
    recording rules are compiled: such an engine holds many programs at once and is not used
    through :meth:`matches`. Empty (default), nothing changes."""

    def __init__(self, strategies: list[Strategy] | tuple[Strategy, ...],
                 context: frozenset[str] = frozenset(), reached_helpers_only: bool = False):
        from egglog import bindings

        self.strategies = tuple(strategies)
        self.context = frozenset(context)
        try:
            self.vocabulary = vocabulary_of(self.strategies)
        except ProviderError as err:
            raise RuleFileError(err.path, err.line, err.message) from None
        self._egraph = bindings.EGraph()
        self._analysed = analysed_relations(self.vocabulary)
        self.deferred = self._deferrable() if not self.context else {}
        # per (strategy, rule): the variables of deferred last columns it does not report
        self._hidden = {(st.id, r.name): frozenset(deferred_columns(r, self.deferred))
                        for st in self.strategies for r in st.rules}
        # the rules whose rows may hold fresh tensor placeholders (parameters.FreshNames)
        self._fresh = fresh_rules(self.strategies)
        base = base_program(self.vocabulary, self.context)
        self._unextractable = unextractable_constructors(base)
        commands = top_level_commands(base)
        if reached_helpers_only:  # the helper rules that can never fire left out
            commands = reached_helpers(commands, self.strategies)
        try:
            self.send(commands)
        except Exception as err:  # egglog rejects a provider's egglog text
            message = str(err).splitlines()
            raise RuleFileError(" ".join(p for s in self.strategies for p in s.providers
                                         if p.endswith(".egg")) or PRELUDE_DIR, None,
                                f"egglog rejects the vocabulary: "
                                f"{message[-1] if message else err}") from None
        for name, relation in self.deferred.items():
            self.run(f"(relation {key_relation(name)} ({' '.join(relation.sorts[:-1])}))")
        self._compiled: set[str] = set()  # the rule forms compiled so far (FORMS)
        if not self.context:
            self.run("(push)")  # every form of every rule, for egglog's errors now; dropped again
            try:
                self._declare()
                for form in FORMS:
                    self._compile(form)
            finally:
                self.run("(pop)")
                self._compiled.clear()
        # the relations whose facts are loaded as rows (input_rows), with their sorts
        self._row_sorts: dict[str, tuple[str, ...]] = {}
        if not self.context:
            self._row_sorts = {n: s for n, s in loaded_relations(self.vocabulary, frozenset()).items()
                               if n != HELD_SUFFIX}
            self.declare(References.declarations())
            self.send(load_schema(self._row_sorts))
            self._folder = rows_folder("leir-engine-")
        self._outer_refs = 0  # the references the program's scope defined (fact_commands)
        self._declare()
        if self.context:  # the only form it runs, compiled now
            self._compile("recording")
        self._combined: dict[tuple[str, ...], str] = {}  # ruleset names -> their combined ruleset
        self.read_relations = read_relations(self.strategies, self.vocabulary)

    def run(self, text: str) -> list:
        """Run egglog commands (text) on this engine's database; their outputs, in order.
        Callers that load a program bracket it with ``(push)``/``(pop)``."""
        return self._egraph.run_program(*self._egraph.parse_program(text))

    def send(self, commands: list[str]) -> None:
        """Run many commands in bounded batches (:func:`batches`)."""
        for batch in batches(commands):
            self.run(batch)

    def declare(self, text: str) -> None:
        """Run declarations made after the base program; the constructors among them declared
        ``:unextractable`` are left out of :meth:`read_table`'s frozen reading, as the base's."""
        self.send(top_level_commands(text))
        self._unextractable |= unextractable_constructors(text)

    def read_rows(self, rows: dict[str, tuple[Strategy, Rule]], names: FreshNames | None = None
                  ) -> tuple[list[RawMatch], int]:
        """The ``Matched`` rows now in the database (:meth:`read_table`) as matches, and how
        many could not be extracted (:func:`_matches`); with ``names``, the program's fresh
        tensor names put in for the placeholders as the terms are read."""
        return _matches(self.read_table("Matched", names), rows)

    def read_table(self, relation: str, names: FreshNames | None = None
                   ) -> list[tuple[str, list | None]]:
        """The rows of a relation of row terms (``Matched``, ``Found``) now in the database,
        each as its row constructor's name and its argument terms (``None`` for a row egglog
        cannot extract; an argument it cannot extract is ``None``), in the order
        ``print-function`` lists them: from egglog's frozen tables where they decide every
        term as its extractor would (:mod:`.frozen_rows`), else printed. With ``names``, every
        string read is ``names.term`` of it: a fresh tensor placeholder (a string no program
        name is, held only by what the rules reading ``FreshTensor`` built) becomes the
        program's name, every other string stays as it is."""
        try:
            string = None if names is None else names.term
            return FrozenReader(self._egraph, self._unextractable, string).rows(relation)
        except Ambiguous:
            (output,) = self.run(f"(print-function {relation} {MAX_ROWS})")
            return _printed_rows(output, names)

    def unreported(self, strategy: str, rule: str) -> frozenset[str]:
        """The variables a rule binds through a deferred relation's last column, which its
        finding rule does not report (empty for most rules)."""
        return self._hidden.get((strategy, rule), frozenset())

    def reported(self, strategy: str, rule: Rule) -> list[str]:
        """The binding names a rule's finding rule reports, in order."""
        hidden = self.unreported(strategy, rule.name)
        return [n for n in rule.binding_names if n not in hidden]

    def _deferrable(self) -> dict:
        """The deferred relations (``Relation.deferred``) this engine can state late: every
        rule reading one binds its last column to a variable nothing else uses, and no
        analysis rule reads it."""
        out = {name: r for name, r in self.vocabulary.deferred.items() if len(r.sorts) > 1}
        for name in list(out):
            if name in self._analysed:
                del out[name]
        for strategy in self.strategies:
            for rule in strategy.rules:
                if deferred_columns(rule, out) is None:
                    for atom in rule.guard_atoms:
                        out.pop(atom.relation, None)
        return out

    def _declare(self) -> None:
        """Every strategy's rulesets and its rules' row constructors."""
        for strategy in self.strategies:
            self.run("\n".join([f"(ruleset {ruleset_name(strategy)})",
                                f"(ruleset {finding_ruleset(strategy)})",
                                f"(ruleset {making_ruleset(strategy)})",
                                *(row_constructor(strategy, r, self.context)
                                  for r in strategy.rules)]))

    def _compile(self, form: str) -> None:
        """Compile one form of every rule (:data:`FORMS`) unless it is compiled already. Call
        outside a ``push``, so the rules outlive the program.

        The forms are compiled on first use, not with the engine: egglog copies every compiled
        rule on each ``push`` and restores it on each ``pop``, so the finding and making rules
        that only a seeded draw runs made each program's push and pop of a full enumeration
        about twice as expensive (and the recording rules a draw's). The engine still compiles
        every form once when it is made, inside a ``push`` it pops, so a rule egglog rejects
        is reported then."""
        if form in self._compiled or (self.context and form != "recording"):
            return
        for strategy in self.strategies:
            for rule in strategy.rules:
                if form == "recording":
                    text = recording_rule(strategy, rule, self.context)
                else:
                    text = "\n".join((finding_rule(strategy, rule, self.deferred),
                                      making_rule(strategy, rule)))
                try:
                    self.run(text)
                except Exception as err:  # egglog's own error type: a type or name error
                    message = str(err).splitlines()
                    variant = ", a variant of its [[rules]] entry" if rule.variant else ""
                    raise RuleFileError(strategy.path, rule.line,
                                        f"egglog rejects the rules of '{strategy.id}': rule "
                                        f"'{rule.name}'{variant}: "
                                        f"{message[-1] if message else err}") from None
        self._compiled.add(form)

    def matches(self, program, strategies: list[Strategy] | None = None, *,
                named: bool = True) -> list[RawMatch]:
        """Every recorded application of the given strategies (default: all) on a program,
        the program's fresh tensor names put in for their placeholders as the rows are read
        (:meth:`read_table`; not with ``named=False``: ``windows.py`` keeps matches for every
        program holding a window).

        A row egglog cannot extract has a helper in its right-hand side that never finished:
        a rule defect. Its constructor cannot be read either, so each strategy is run alone to
        find whose it is, and it is returned with ``lhs=None`` and ``rhs=None`` for the caller
        to report (``transitions_from``'s ``broken``)."""
        chosen = self.strategies if strategies is None else tuple(strategies)
        loaded = LoadedProgram(program)
        found, stuck = self._recorded(loaded, chosen, FreshNames(program) if named else None)
        if stuck:
            for strategy in chosen:
                if self._recorded(loaded, (strategy,))[1]:
                    found.append(RawMatch(strategy.id, " or ".join(r.name for r in strategy.rules),
                                          None, None, ()))
        return found

    def named(self, program, found: list, names: FreshNames | None = None) -> list:
        """``found`` (matches or applications on ``program``) with the program's fresh tensor
        names put in for the placeholders of ``FreshTensor`` (parameters.py)."""
        return named(program, found, self._fresh, names)

    def applications(self, program, strategies: list[Strategy] | None = None) -> "Applications":
        """The program loaded and every rule's query run, replacements not built yet: a context
        manager whose ``found`` lists the applications and whose ``make`` builds chosen ones
        (:class:`Applications`). For drawing a few transitions of many: the helpers that build
        replacements then run for the drawn ones only."""
        chosen = self.strategies if strategies is None else tuple(strategies)
        return Applications(self, program, chosen)

    def fact_commands(self, loaded: LoadedProgram, relations: set[str] | None = None, *,
                      declare: bool = True) -> list[str]:
        """The egglog commands that declare a program (unless not ``declare``) and state every
        fact the compiled rules can read (or those of ``relations``): the facts of relations
        whose columns are terms, strings and integers as rows loaded by ``input``
        (:mod:`.input_rows`), their terms by references; any other as its command text."""
        facts = loaded.declarations().splitlines() if declare else []
        wanted = self.read_relations if relations is None else relations
        refs = References()
        refs.count = 0 if declare else self._outer_refs  # a group's scope: after the program's
        rows: dict[str, list[tuple]] = {}
        sorts_of = self._row_sorts
        with shared_terms(table=refs), provider_errors():
            for fact in self.vocabulary.facts(loaded, wanted):
                sorts = sorts_of.get(fact.name)
                row = None if sorts is None else refs.row(sorts, fact.columns())
                if row is not None:
                    rows.setdefault(fact.name + RAW, []).append(tuple(row))
                    continue
                text = fact.text()
                facts.extend(refs.take())
                facts.append(text)
        facts.extend(refs.take())  # unions of terms a producer wrote (a sort key)
        if declare:
            self._outer_refs = refs.count
        rows = {**refs.take_rows(), **rows}
        if rows:
            facts += load_commands(rows, self._folder.name)
        return facts

    def finding_facts(self, loaded: LoadedProgram) -> tuple[list[str], dict]:
        """The commands of :meth:`fact_commands` with the deferred relations stated by their key
        relations only (a long key column, a layout's label or a subscript list that many keys
        repeat, bound once by a ``let $kN_``), and those relations' whole facts by ``(relation,
        key columns)`` (each written out in full, sharing no ``let``, so any of them can be sent
        alone later)."""
        facts = self.fact_commands(loaded, self.read_relations - set(self.deferred))
        waiting: dict[tuple[str, tuple[str, ...]], list] = {}
        named: dict[str, str] = {}  # a long key column's text -> the let that binds it
        with provider_errors():
            made = list(self.vocabulary.facts(loaded, set(self.deferred) & self.read_relations))
        for fact in made:
            key = (fact.name, tuple(to_egglog(v) for v in fact.key))
            if key not in waiting:
                columns = []
                for text in key[1]:
                    if len(text) >= SharedTerms.MIN_CHARS and text not in named:
                        named[text] = f"$k{len(named)}_"
                        facts.append(f"(let {named[text]} {text})")
                    columns.append(named.get(text, text))
                facts.append(f"({key_relation(key[0])} {' '.join(columns)})")
            waiting.setdefault(key, []).append(fact)
        return facts, waiting

    def shown(self, match) -> tuple:
        """A match's bindings without the deferred columns its rule does not report while
        finding: what :class:`Application` holds for it."""
        hidden = self.unreported(match.strategy, match.rule)
        if not hidden:
            return match.bindings
        return tuple(b for b in match.bindings if b[0] not in hidden)

    def one_iteration(self, chosen: tuple[Strategy, ...], ruleset_of) -> str:
        """The command running the chosen strategies' rulesets (``ruleset_of``) for one
        iteration, as one ruleset: every rule matches the database as it was before the
        iteration. Several rulesets run one after the other would let a later strategy match the
        terms an earlier one's replacements just created (rows no program holds, built for
        nothing). A combined ruleset is declared the first time a set is run; call this outside
        a ``push``, so the declaration outlives the program."""
        self._compile("recording" if ruleset_of is ruleset_name else "drawing")
        names = tuple(ruleset_of(s) for s in chosen)
        if len(names) == 1:
            return f"(run {names[0]} 1)"
        combined = self._combined.get(names)
        if combined is None:
            combined = self._combined[names] = f"combined__{len(self._combined)}_"
            self.run(f"(unstable-combined-ruleset {combined} {' '.join(names)})")
        return f"(run {combined} 1)"

    @staticmethod
    def groups(chosen: tuple[Strategy, ...]) -> list[tuple[Strategy, ...]]:
        """The chosen strategies in the groups whose replacements are built together: those
        marked ``run_alone`` one by one, the others in one group (first).

        egglog's time to saturate ``helpers`` grows with the whole database, not only with
        the terms it evaluates: the many whole-suffix replacements of set_storage_layout take
        several times longer beside the other structural strategies' than alone
        (docs/ARCHITECTURE.md, "Scopes for the whole-program rewriters")."""
        together = tuple(s for s in chosen if not s.run_alone)
        return ([together] if together else []) + [(s,) for s in chosen if s.run_alone]

    def scopes(self, groups: list[tuple[Strategy, ...]]) -> tuple[set[str], list[set[str]]]:
        """The fact relations stated once for all groups (read by an analysis or helper rule, or
        by the rules of several groups), and per group those only its own rules read, stated
        in its own scope: a large relation of one strategy (set_storage_layout's
        ``StorageLayout``) is then no part of the database the other groups' helpers run over
        and their rows are printed from."""
        readers: dict[str, set[int]] = {}
        for k, group in enumerate(groups):
            for strategy in group:
                for rule in strategy.rules:
                    for condition in rule.parsed_conditions:
                        if condition.head in self.read_relations:
                            readers.setdefault(condition.head, set()).add(k)
        own: list[set[str]] = [set() for _ in groups]
        for name, ks in readers.items():
            if len(ks) == 1 and name not in self._analysed:
                own[min(ks)].add(name)
        return set(readers).union(self._analysed) - set().union(*own), own

    def _recorded(self, loaded: LoadedProgram, chosen: tuple[Strategy, ...],
                  names: FreshNames | None = None) -> tuple[list[RawMatch], int]:
        """The rows the chosen strategies record on the loaded program, in rule order, and how
        many rows could not be extracted; with ``names``, read with the program's fresh tensor
        names put in (:meth:`read_table`).

        The facts every group reads are loaded once; each group of :meth:`groups` then has its
        own facts stated (:meth:`scopes`), runs its strategies once, saturates ``helpers`` and
        has its rows printed inside a ``push``/``pop`` of its own (the last group in the
        program's), so no group's helpers pay for another's terms and facts."""
        groups = self.groups(chosen)
        shared, own = self.scopes(groups)
        steps = [self.one_iteration(g, ruleset_name) for g in groups]
        rows = {match_relation(s, r): (s, r) for s in chosen for r in s.rules}
        found: list[RawMatch] = []
        stuck = 0
        self.run("(push)")
        try:
            facts = self.fact_commands(loaded, shared)
            self.send(facts + ["(run-schedule (saturate (run analysis)))"])
            for k, step in enumerate(steps):
                inner = k < len(steps) - 1
                if inner:
                    self.run("(push)")
                try:
                    facts = self.fact_commands(loaded, own[k], declare=False)
                    if facts:  # analysis rules read the terms these facts hold, too
                        facts.append("(run-schedule (saturate (run analysis)))")
                    self.send(facts + [step, "(run-schedule (saturate (run helpers)))"])
                    group_found, group_stuck = self.read_rows(rows, names)
                finally:
                    if inner:
                        self.run("(pop)")
                found += group_found
                stuck += group_stuck
        finally:
            self.run("(pop)")
        # in rule order, as the strategies list them (a stable sort keeps egglog's row order)
        order = {(s.id, r.name): i for i, (s, r) in enumerate(rows.values())}
        found.sort(key=lambda m: order[m.strategy, m.rule])
        return found, stuck


@dataclass(frozen=True)
class Application:
    """One match of a rule's query (the matched term and the reported bindings), before its
    replacement is built."""
    strategy: str
    rule: str
    lhs: Term
    bindings: tuple[tuple[str, Term | Literal | None], ...]


class Applications:
    """A program in the engine with every query of the chosen strategies run once and their
    matches read, the replacements not yet built; ``make(apps)`` builds those of the given
    applications (the recording rules restricted by ``Chosen`` facts, then the helpers) and
    returns their rows as :meth:`Engine.matches` would. Pops on exit.

    ``found`` is in a canonical order (strategy, rule, then the terms), whatever order egglog
    prints in. An application whose reported bindings do not pin its replacement gives every
    row the full enumeration has for it."""

    def __init__(self, engine: Engine, program, chosen: tuple[Strategy, ...]):
        self.engine, self.chosen = engine, chosen
        self.loaded = LoadedProgram(program)
        self.found: list[Application] = []
        self._rules = {(s.id, r.name): (s, r) for s in chosen for r in s.rules}
        self._lets = 0
        self._terms: dict[Term, str] | None = None  # nests and suffixes by let name, for Chosen
        self._waiting: dict[tuple[str, tuple[str, ...]], list] = {}  # deferred facts by key
        self._sent: set[tuple[str, tuple[str, ...]]] = set()  # keys whose facts were sent
        self._names = FreshNames(program)
        self._read: dict[Application, Application] = {}  # as named -> as egglog holds it

    def __enter__(self) -> "Applications":
        engine, chosen = self.engine, self.chosen
        step = engine.one_iteration(chosen, finding_ruleset)
        facts, self._waiting = engine.finding_facts(self.loaded)
        commands = facts + ["(run-schedule (saturate (run analysis)))", step]
        engine.run("(push)")
        try:
            engine.send(commands)
            found = engine.read_table("Found")
        except BaseException:
            engine.run("(pop)")
            raise
        rows = {found_relation(s, r): (s, r) for s in chosen for r in s.rules}
        order = {key: i for i, key in enumerate(self._rules)}
        shown = {key: engine.reported(key[0], rule)
                 for key, (_, rule) in self._rules.items()}  # what a finding rule reports
        for name, args in found:
            if args is None or any(a is None for a in args):  # not extractable, so it cannot
                continue                                      # be named again
            strategy, rule = rows[name]
            self.found.append(Application(strategy.id, rule.name, args[0],
                                          tuple(zip(shown[strategy.id, rule.name], args[1:]))))
        self.found.sort(key=lambda a: (order[a.strategy, a.rule], a.lhs,
                                       tuple(v for _, v in a.bindings)))
        named = engine.named(self.loaded.program, self.found, self._names)
        self._read = {a: b for a, b in zip(named, self.found) if a is not b}
        self.found = named
        return self

    def __exit__(self, *exc) -> None:
        self.engine.run("(pop)")

    def make(self, apps: list[Application]) -> list[RawMatch]:
        """The recorded rows of ``apps``, in egglog's order. An application none of whose rows
        is among them has a replacement that could not be extracted (a helper that never
        finished).

        The ``Chosen`` fact names the matched term and the first reported binding only: with
        every binding in it, egglog 13.2 planned the restricted query badly on large programs
        (docs/ARCHITECTURE.md, "Drawing a few transitions of many"). The rows of other applications
        that agree on those two are built too and left out here."""
        if not apps:
            return []
        apps = [self._read.get(a, a) for a in apps]   # placeholders, as the engine has them
        if self._terms is None:
            self._terms = self.loaded.named_terms()
        commands: list[str] = self._deferred_facts(apps)
        with shared_terms(self._terms, prefix=f"$c{self._lets}x") as shared:
            for app in dict.fromkeys((a.strategy, a.rule, a.lhs, a.bindings[:1]) for a in apps):
                strategy, rule = self._rules[app[0], app[1]]
                args = " ".join(to_egglog(v) for v in (app[2], *(v for _, v in app[3])))
                commands.extend(shared.take())
                commands.append(f"({chosen_relation(strategy, rule)} {args})")
        self._lets += 1
        involved = dict.fromkeys(self._rules[a.strategy, a.rule][0] for a in apps)
        commands += [f"(run {making_ruleset(s)} 1)" for s in involved]
        commands.append("(run-schedule (saturate (run helpers)))")
        self.engine.send(commands)
        found, _ = self.engine.read_rows({match_relation(s, r): (s, r)
                                          for s, r in self._rules.values()})
        wanted = {(a.strategy, a.rule, a.lhs, a.bindings) for a in apps}
        return self.engine.named(
            self.loaded.program, [m for m in found if (m.strategy, m.rule, m.lhs,
                                                       self.engine.shown(m)) in wanted],
            self._names)

    def _deferred_facts(self, apps: list[Application]) -> list[str]:
        """The whole facts of the deferred relations the given applications read, not sent yet:
        those whose key columns are the application's reported bindings (or literals); all of
        a relation's where a key column is a variable the rule does not report."""
        out: list[str] = []
        deferred = self.engine.deferred
        for app in apps:
            if not self.engine.unreported(app.strategy, app.rule):
                continue
            values = dict(app.bindings)
            for atom in self._rules[app.strategy, app.rule][1].guard_atoms:
                if atom.relation not in deferred:
                    continue
                key = tuple(to_egglog(values[a]) if a in values else a for a in atom.args[:-1])
                if all(a in values or not a.isidentifier() for a in atom.args[:-1]):
                    keys = [(atom.relation, key)]
                else:
                    keys = [k for k in self._waiting if k[0] == atom.relation]
                for k in keys:
                    if k not in self._sent:
                        self._sent.add(k)
                        # outside shared_terms: each fact's whole text
                        out.extend(str(fact) for fact in self._waiting.get(k, ()))
        return out


def _matches(table: list[tuple[str, list | None]], rows: dict[str, tuple[Strategy, Rule]],
             contextual: frozenset[str] = frozenset()) -> tuple[list[RawMatch], int]:
    """The ``Matched`` rows of :meth:`Engine.read_table` as matches (a row whose matched term
    cannot be extracted is left out), and how many rows egglog could not extract at all. The
    rows of the constructors in ``contextual`` hold a program column after the replacement
    (:func:`recording_rule`)."""
    found: list[RawMatch] = []
    stuck = 0
    for name, args in table:
        if args is None:  # egglog: the row is unextractable
            stuck += 1
            continue
        if args[0] is None:
            continue
        strategy, rule = rows[name]
        values, context = args[2:], None
        if name in contextual:
            context, values = values[0], values[1:]
        found.append(RawMatch(strategy.id, rule.name, args[0], args[1],
                              tuple(zip(rule.binding_names, values)), context))
    return found, stuck


def _printed_rows(output, names: FreshNames | None = None) -> list[tuple[str, list | None]]:
    """:meth:`Engine.read_table` of a ``print-function`` output (with ``names``, its strings
    renamed as there)."""
    out: list[tuple[str, list | None]] = []
    termdag, memo = output.termdag, {}
    for row_id, _ in output.terms:
        (row_arg,) = termdag.get(row_id).args
        row = termdag.get(row_arg)
        if type(row).__name__ != "TermApp":  # TermVar("Unextractable")
            out.append(("", None))
            continue
        args = [from_termdag(termdag, a, memo) for a in row.args]
        out.append((row.name, args if names is None else [names.term(a) for a in args]))
    return out


_HELPER_RULE = re.compile(r":ruleset helpers\b")
_HEADS = re.compile(r"\((\w+)")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_MADE = re.compile(r"^\((?:constructor|function) (\w+)", re.M)


def reached_helpers(commands: list[str], strategies) -> list[str]:
    """``commands`` (a base program's top-level commands) without the ``helpers`` rules that
    can never fire for ``strategies``: a rule fires only when every constructor or function
    its query names has a row, and a prelude constructor that is no LEIR term constructor
    (``encoding.SORT_OF``) gets one only from an action that names it -- a strategy rule's, a
    command outside the helper rules, or a helper rule that can fire (a fixpoint). Names are
    read generously (every ``(name`` of the text, strings left out), so a rule is kept
    whenever it might fire. Every helper constructor egglog holds costs each ``(push)``,
    ``(pop)`` and helper iteration a little, whether it fires or not."""
    def heads(text: str) -> set[str]:
        return set(_HEADS.findall(_STRING.sub('""', text)))

    made = {n for c in commands for n in _MADE.findall(c)
            if n not in SORT_OF and not n.endswith("__")}   # not the terms Python sends
    reached = heads(" ".join(text for s in strategies for r in s.rules
                             for text in (r.lhs, r.rhs, *r.conditions)))
    reached |= heads(" ".join(c for c in commands if not _HELPER_RULE.search(c)
                              and not _MADE.match(c)))
    waiting = {}   # helper rule -> the constructors its query needs
    for c in commands:
        if _HELPER_RULE.search(c):
            waiting[c] = heads(_query(c)) & made
    while True:
        fired = [c for c, needs in waiting.items() if needs <= reached]
        if not fired:
            break
        for c in fired:
            del waiting[c]
            reached |= heads(c)
    return [c for c in commands if c not in waiting]


def _query(command: str) -> str:
    """The query part of a ``rewrite`` or ``rule`` command (strings emptied): a rewrite's
    left-hand side and its ``:when`` conditions, a rule's first list; of anything else,
    nothing (it is kept)."""
    text = _STRING.sub('""', command)
    items = top_level_commands(text[1:-1])
    if not items or not text.startswith(("(rewrite ", "(rule ")):
        return ""
    when = text.find(":when")
    if text.startswith("(rewrite ") and when >= 0:
        return items[0] + " " + top_level_commands(text[when:])[0]
    return items[0]


def top_level_commands(text: str) -> list[str]:
    """The top-level commands of an egglog text, in order (comments dropped), so that a long
    text is sent in :func:`batches`: the base program of one strategy is 70,000 characters, and
    parsing and running it as one text made an engine hold about 1 GB (10 MB in batches)."""
    out: list[str] = []
    depth, start, i, n = 0, None, 0, len(text)
    while i < n:
        c = text[i]
        if c == ";":                          # a comment runs to the end of its line
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if c == '"':                          # a string, with backslash escapes
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c == "(":
            if depth == 0:
                start = i
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                out.append(text[start:i + 1])
        i += 1
    if depth != 0:
        out.append(text[start:])              # unbalanced: egglog names the error
    return out


def batches(commands: list[str], limit: int = BATCH_CHARS) -> list[str]:
    """The commands joined into texts of at most ``limit`` characters (a longer command alone),
    in order. The time and memory egglog takes to parse and run one text grow with the square of
    its length, so a large program's facts are sent in bounded batches, which keeps the cost
    linear. The bound is small: a call costs egglog next to nothing of its own, and sending
    facts in small batches measured fastest (the figures by batch size are in
    benchmarks/results/single_step_throughput.md)."""
    out: list[str] = []
    batch: list[str] = []
    size = 0
    for command in commands:
        if batch and size + len(command) > limit:
            out.append("\n".join(batch))
            batch, size = [], 0
        batch.append(command)
        size += len(command) + 1
    if batch:
        out.append("\n".join(batch))
    return out


@lru_cache(maxsize=8)
def engine_for(strategies: tuple[Strategy, ...]) -> Engine:
    """A cached engine per strategy set."""
    return Engine(strategies)


def check_strategy(strategy: Strategy) -> None:
    """Type-check a strategy's rules against the schema and prelude (raises RuleFileError)."""
    engine_for((strategy,))
