"""Strategies are rule files: ``rules/<category>/<strategy_id>.toml``.

A file holds the strategy's metadata (id, category, description, guards, difficulty inputs P and
S -- K is the number of guards --, a chain-of-thought template), one or more egglog ``rewrite``
rules with the pattern variables to report as bindings, and its own examples and
counterexamples. See docs/RULES.md for the format and a worked example.

The loader validates everything it can before a rule ever runs and reports ``file:line: message``:
unknown or missing keys, unknown categories and guard names, duplicate ids, egglog syntax,
undeclared binding sorts, and guard arguments that are not reported bindings.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from importlib.resources import files
from pathlib import Path
from typing import Any

from .encoding import SORT_OF
from .vocabulary import ProviderError, Vocabulary, provider_path, vocabulary


def builtin_rules_dir() -> Path:
    """The built-in strategies: ``leir_egraph/rules/`` inside an installed package (the wheel
    maps the repository's top-level ``rules/`` there, see pyproject.toml), else ``rules/`` of the
    checkout beside the package (a source tree on ``PYTHONPATH`` or an editable install)."""
    packaged = Path(str(files("leir_egraph") / "rules"))
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / "rules"


DEFAULT_RULES_DIR = builtin_rules_dir()
CATEGORIES = ("graph", "operator", "memory", "math")
VALUE_SORTS = ("String", "i64")
TERM_SORTS = ("Prog", "Nest", "Loops", "Loop", "Body", "Eqn", "Var", "Subs", "IExpr", "Expr",
              "CmpTail")
_TOP_KEYS = {"id", "category", "description", "guards", "P", "S", "cot", "rules", "examples",
             "counterexamples", "note", "direction", "inverse", "providers", "run_alone",
             "exact", "domain"}
DIRECTIONS = ("simplify", "expand")
# What a strategy's rewrites preserve (docs/RULES.md "Value ranges"): the inputs its guards
# assume (``domain``) and how close the rewritten program's outputs stay (``exact``).
DOMAINS = ("float", "finite", "bounded")   # any IEEE value / finite / far from overflow
_EXACT = re.compile(r"\s*(\d+)\s*ulps?(\s+of\s+values)?\s*")
# Where an "N ulp" bound is measured: at the largest magnitude of the output ("output"), or of
# every value the original program reads or writes -- inputs, intermediates, outputs ("values",
# written "N ulp of values"; docs/RULES.md section 10).
SCALES = ("output", "values")
_RULE_KEYS = {"name", "bindings", "egglog", "lhs_sort", "variants", "cot"}
_EXAMPLE_KEYS = {"before", "signature", "after", "bindings", "note"}
_COUNTER_KEYS = {"before", "signature", "refused_by", "note"}


class RuleFileError(ValueError):
    """A rule file that cannot be loaded, located as ``file:line``."""

    def __init__(self, path: Path | str, line: int | None, message: str):
        self.path, self.line, self.message = str(path), line, message
        super().__init__(f"{path}:{line if line is not None else 1}: {message}")


@dataclass(frozen=True)
class GuardAtom:
    """A use of a guard or parameter relation in a rule's conditions: ``(ProperFactor n f)``."""
    relation: str
    args: tuple[str, ...]  # egglog text of each argument (variables or literals)


@dataclass(frozen=True)
class Condition:
    """One ``:when`` condition: its text, head (relation/primitive name, ``=`` for equalities),
    the variables it mentions, and -- for ``(= v (...))`` -- the variable it defines."""
    text: str
    head: str
    variables: frozenset[str]
    defines: str | None = None
    input_variables: frozenset[str] = frozenset()  # variables of the defining expression


@dataclass(frozen=True)
class Rule:
    """One egglog rewrite of a strategy, split into its parts."""
    name: str
    lhs: str
    rhs: str
    conditions: tuple[str, ...]
    parsed_conditions: tuple[Condition, ...]
    lhs_variables: frozenset[str]
    bindings: tuple[tuple[str, str], ...]  # (variable, sort), in reporting order
    lhs_sort: str
    guard_atoms: tuple[GuardAtom, ...]
    source: str
    cot: str = ""  # the rule's own chain-of-thought template, when the strategy's does not fit
    rhs_variables: frozenset[str] = frozenset()  # the pattern variables its replacement uses
    line: int | None = None  # where the rule file writes it: its egglog key, or its variant
    variant: str = ""  # the variant of a [[rules]] entry with variants it is (its name)

    @property
    def binding_names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.bindings)


@dataclass(frozen=True)
class Example:
    before: str
    signature: Any
    after: str
    bindings: dict = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class CounterExample:
    before: str
    signature: Any
    refused_by: str


@dataclass(frozen=True)
class Strategy:
    """A loaded rule file."""
    id: str
    category: str
    description: str
    guards: tuple[str, ...]
    P: int
    S: int
    cot: str
    rules: tuple[Rule, ...]
    examples: tuple[Example, ...]
    counterexamples: tuple[CounterExample, ...]
    path: str
    direction: str = ""   # "simplify" or "expand" for strategies in an inverse pair (balancing)
    inverse: tuple[str, ...] = ()  # ids of the inverse strategies (STRATEGIES.md pairs)
    providers: tuple[str, ...] = ()  # resolved paths of the fact providers the file names
    run_alone: bool = False  # build its replacements in an e-graph scope of their own (engine)
    domain: str = "float"    # the inputs its guards assume: "float", "finite" or "bounded"
    ulps: int = 0            # declared rounding bound in ULPs of the dtype; 0: bitwise identical
    scale: str = "output"    # where the ULPs are measured: "output" or "values" (SCALES)

    @property
    def exact(self) -> str:
        """The declared exactness as the rule file writes it: ``bitwise``, ``N ulp`` or
        ``N ulp of values``."""
        if self.ulps == 0:
            return "bitwise"
        return f"{self.ulps} ulp" + (" of values" if self.scale == "values" else "")

    @property
    def vocabulary(self) -> Vocabulary:
        """The relations this strategy's rules may read: shared ones plus its providers'."""
        return vocabulary(self.providers)

    @property
    def K(self) -> int:
        """Number of preconditions checked: the guards the file lists."""
        return len(self.guards)

    @property
    def score(self) -> float:
        """The difficulty score (the paper's difficulty formula): 0.1*K + 0.5*(P-1) + S."""
        return round(0.1 * self.K + 0.5 * (self.P - 1) + self.S, 3)

    @property
    def difficulty(self) -> str:
        """The difficulty class of ``score``: easy, medium or difficult."""
        return difficulty_for(self.score)


def difficulty_for(score: float) -> str:
    """easy < 1 <= medium < 2.5 <= difficult."""
    return "easy" if score < 1 else "medium" if score < 2.5 else "difficult"


# ---------------------------------------------------------------- loading

class UnknownStrategy(KeyError):
    """A strategy id that neither the built-in rules nor a loaded directory defines. One line,
    printed as it is (a ``KeyError`` whose message is not quoted)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown strategy"


# User strategies by id: every strategy :func:`load_strategies` loaded from a directory other
# than the built-in ``rules/``, for every later call in this process that names a strategy by
# id (``single_steps(p, "my_id")``, ``explore``, ``RulesProposer``, ...). docs/RULES.md,
# "Using your strategies".
_REGISTERED: dict[str, Strategy] = {}


@lru_cache(maxsize=1)
def builtin_strategies() -> tuple[Strategy, ...]:
    """The strategies of the package's ``rules/`` directory, loaded once per process."""
    return tuple(_load_roots([DEFAULT_RULES_DIR]))


def load_strategies(*dirs: str | Path, include_default: bool = True) -> list[Strategy]:
    """Strategies from the default ``rules/`` directory plus any user directories, ordered by
    category then id. Raises :class:`RuleFileError` on the first bad file, and on an id defined
    twice (in two directories, or a user file that takes a built-in strategy's id).

    The user directories' strategies are **registered** for the rest of the process: any later
    call that takes a strategy id resolves it (:func:`strategy_by_id`). A later load of the same
    id replaces the earlier one (an edited file reloaded). A call that takes "all strategies"
    (``strategies=None``) still means the built-in ones: pass this function's result to
    include yours."""
    user = _load_roots([Path(d) for d in dirs])
    builtin = {s.id: s for s in builtin_strategies()}
    mine = []
    for strategy in user:
        same = builtin.get(strategy.id)
        if same is None:
            mine.append(strategy)
        elif Path(same.path).resolve() != Path(strategy.path).resolve():
            raise _duplicate(strategy, same)
    for strategy in mine:
        _REGISTERED[strategy.id] = strategy
    return _ordered((list(builtin.values()) if include_default else
                     [builtin[s.id] for s in user if s.id in builtin]) + mine)


def strategy_by_id(sid: str) -> Strategy:
    """The built-in or registered strategy ``sid``; :class:`UnknownStrategy` otherwise."""
    for strategy in builtin_strategies():
        if strategy.id == sid:
            return strategy
    if sid in _REGISTERED:
        return _REGISTERED[sid]
    known = sorted([s.id for s in builtin_strategies()] + list(_REGISTERED))
    raise UnknownStrategy(f"unknown strategy '{sid}' (a strategy of your own: load its "
                          "directory first, with --rules DIR or load_strategies(DIR)); known: "
                          f"{', '.join(known)}")


def _load_roots(roots: list[Path]) -> list[Strategy]:
    by_id: dict[str, Strategy] = {}
    for root in roots:
        if not root.is_dir():
            raise RuleFileError(root, None, "rules directory does not exist")
        for path in sorted(root.rglob("*.toml")):
            strategy = load_rule_file(path)
            if strategy.id in by_id:
                raise _duplicate(strategy, by_id[strategy.id])
            by_id[strategy.id] = strategy
    return _ordered(list(by_id.values()))


def _duplicate(strategy: Strategy, first: Strategy) -> RuleFileError:
    path = Path(strategy.path)
    return RuleFileError(path, line_of(path.read_text(), "id"),
                         f"duplicate strategy id '{strategy.id}' (also defined in {first.path})")


def _ordered(strategies: list[Strategy]) -> list[Strategy]:
    order = {c: i for i, c in enumerate(CATEGORIES)}
    return sorted(strategies, key=lambda s: (order[s.category], s.id))


def load_rule_file(path: str | Path) -> Strategy:
    """Parse and validate one rule file (egglog syntax included; type checking happens when an
    engine compiles it, see :func:`leir_egraph.egraph.engine.check_strategy`)."""
    path = Path(path)
    text = path.read_text()
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        m = re.search(r"line (\d+)", str(err))
        raise RuleFileError(path, int(m.group(1)) if m else None, f"TOML: {err}") from None

    def fail(key: str, message: str):
        raise RuleFileError(path, line_of(text, key), message)

    unknown = set(data) - _TOP_KEYS
    if unknown:
        fail(sorted(unknown)[0], f"unknown key '{sorted(unknown)[0]}'; allowed: {', '.join(sorted(_TOP_KEYS))}")
    for key, kind in (("id", str), ("category", str), ("description", str), ("guards", list),
                      ("P", int), ("S", int), ("cot", str), ("rules", list)):
        if key not in data:
            fail(key, f"missing required key '{key}'")
        if not isinstance(data[key], kind) or (kind is int and isinstance(data[key], bool)):
            fail(key, f"'{key}' must be a {kind.__name__}")
    sid = data["id"]
    if not re.fullmatch(r"[a-z][a-z0-9_]*", sid):
        fail("id", f"strategy id '{sid}' must be snake_case")
    if path.stem != sid:
        fail("id", f"strategy id '{sid}' must match the file name '{path.stem}.toml'")
    if data["category"] not in CATEGORIES:
        fail("category", f"unknown category '{data['category']}'; expected one of {', '.join(CATEGORIES)}")
    names = data.get("providers", [])
    names = [names] if isinstance(names, str) else names
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        fail("providers", "providers must be a file name or a list of file names (.py, a "
                          "package directory or .egg, relative to the rule file)")
    providers = []
    for name in names:
        where = provider_path(path, name)
        if not where.exists():
            fail("providers", f"provider '{name}' not found (looked for {where})")
        providers.append(str(where))
    providers = tuple(sorted(providers))
    try:
        vocab = vocabulary(providers)
    except ProviderError as err:
        raise RuleFileError(err.path, err.line, err.message) from None
    for g in data["guards"]:
        if g not in vocab.guards:
            fail("guards", f"unknown guard '{g}'; known guards: {', '.join(vocab.guards)}")
    if data["P"] < 1 or data["S"] < 0:
        fail("P", "difficulty inputs need P >= 1 and S >= 0")
    if data.get("direction", "simplify") not in DIRECTIONS:
        fail("direction", f"direction must be one of {', '.join(DIRECTIONS)}")
    inverse = data.get("inverse", [])
    inverse = [inverse] if isinstance(inverse, str) else inverse
    if not isinstance(inverse, list) or not all(isinstance(i, str) for i in inverse):
        fail("inverse", "inverse must be a strategy id or a list of ids")
    if not isinstance(data.get("run_alone", False), bool):
        fail("run_alone", "run_alone must be true or false")
    domain = data.get("domain", "float")
    if domain not in DOMAINS:
        fail("domain", f"domain must be one of {', '.join(DOMAINS)} (the inputs the guards "
                       "assume: any IEEE value, finite values, or finite values no product "
                       "or sum of two of which overflows)")
    ulps = exactness(data.get("exact", "bitwise"))
    if ulps is None:
        fail("exact", 'exact must be "bitwise" or a rounding bound "N ulp" (N a whole number '
                      "of units in the last place of the output's dtype, at the output's "
                      'largest magnitude) or "N ulp of values" (at the largest magnitude of '
                      "any value the program reads or writes)")
    scale = exactness_scale(data.get("exact", "bitwise"))
    if not data["rules"]:
        fail("rules", "a strategy needs at least one [[rules]] entry")
    rules = tuple(_load_rule(path, text, sid, i, r, vocab, variant)
                  for i, entry in enumerate(data["rules"])
                  for r, variant in _variants(path, text, i, entry))
    if len({r.name for r in rules}) != len(rules):
        fail("rules", "rule names must be unique within a file")
    examples = []
    for ex in data.get("examples", []):
        bad = set(ex) - _EXAMPLE_KEYS
        if bad or not {"before", "signature", "after"} <= set(ex):
            fail("examples", f"an [[examples]] entry needs before, signature, after "
                             f"(optional: bindings, note); got {', '.join(sorted(ex))}")
        examples.append(Example(ex["before"], ex["signature"], ex["after"], dict(ex.get("bindings", {}))))
    counters = []
    for ce in data.get("counterexamples", []):
        bad = set(ce) - _COUNTER_KEYS
        if bad or not {"before", "signature", "refused_by"} <= set(ce):
            fail("counterexamples", "a [[counterexamples]] entry needs before, signature, "
                                    f"refused_by (optional: note); got {', '.join(sorted(ce))}")
        if ce["refused_by"] not in data["guards"]:
            fail("refused_by", f"refused_by '{ce['refused_by']}' is not one of this strategy's "
                               f"guards ({', '.join(data['guards'])})")
        counters.append(CounterExample(ce["before"], ce["signature"], ce["refused_by"]))
    template_slots = set(re.findall(r"{(\w+)}", data["cot"]))
    known_slots = {n for r in rules for n in r.binding_names} | {"lhs", "rhs"}
    missing = template_slots - known_slots
    if missing:
        fail("cot", f"CoT template slot(s) {', '.join(sorted(missing))} are not bindings of any rule")
    return Strategy(sid, data["category"], data["description"].strip(), tuple(data["guards"]),
                    data["P"], data["S"], data["cot"].strip(), rules, tuple(examples),
                    tuple(counters), str(path), data.get("direction", ""), tuple(inverse),
                    providers, data.get("run_alone", False), domain, ulps, scale)


def exactness(text) -> int | None:
    """A rule file's ``exact`` value as a ULP bound (0 for ``bitwise``); ``None`` when it is
    neither ``"bitwise"`` nor ``"N ulp"`` nor ``"N ulp of values"``."""
    if text == "bitwise":
        return 0
    m = _EXACT.fullmatch(text) if isinstance(text, str) else None
    return int(m.group(1)) if m and int(m.group(1)) > 0 else None


def exactness_scale(text) -> str:
    """Where a valid ``exact`` value's ULPs are measured: ``"values"`` for ``"N ulp of
    values"``, else ``"output"``."""
    m = _EXACT.fullmatch(text) if isinstance(text, str) else None
    return "values" if m and m.group(2) else "output"


_SLOT = re.compile(r"\{(\w+)\}")


def _variants(path: Path, text: str, index: int, data) -> list[tuple[dict, str]]:
    """A ``[[rules]]`` entry, or the rules its ``variants`` table stands for, each with the name
    of its variant ("" for an entry without variants).

    Rules that differ in a few terms are written once: the ``egglog`` text holds ``{slot}``
    placeholders and each variant gives its rule ``name``, a text for every slot and, optionally,
    ``bindings`` of its own (added to the entry's)::

        egglog = "(rewrite (MkEq y {consumer}) ...)"
        variants = [{ name = "softmax", consumer = "(Div e (Read sv))" },
                    { name = "log-softmax", consumer = "(Sub x (Log (Read sv)))" }]

    (egglog itself never uses braces.) Each variant becomes one rule, with the entry's other
    keys; a slot no variant fills, or a key no slot uses, is an error."""
    if not isinstance(data, dict) or "variants" not in data:
        return [(data, "")]
    line = line_of(text, "variants", nth=0)
    variants, source = data["variants"], data.get("egglog", "")
    slots = set(_SLOT.findall(source)) if isinstance(source, str) else set()
    if not isinstance(variants, list) or not variants or "name" in data:
        raise RuleFileError(path, line, "variants must be a non-empty list of tables, and the "
                                        "entry's rules are named by its variants, not by 'name'")
    out = []
    for variant in variants:
        if not isinstance(variant, dict) or "name" not in variant:
            raise RuleFileError(path, line, "each variant needs a name")
        given = set(variant) - {"name", "bindings"}
        if given != slots:
            raise RuleFileError(path, line, f"variant '{variant['name']}' fills "
                                            f"{', '.join(sorted(given)) or 'no slot'}; the egglog "
                                            f"text has the slots {', '.join(sorted(slots)) or 'none'}")
        rule = {k: v for k, v in data.items() if k != "variants"}
        rule["name"] = variant["name"]
        if "bindings" in variant:   # more bindings, reported after the entry's own
            rule["bindings"] = {**data.get("bindings", {}), **variant["bindings"]}
        rule["egglog"] = _SLOT.sub(lambda m: str(variant[m.group(1)]), source)
        out.append((rule, variant["name"]))
    return out


def _load_rule(path: Path, text: str, sid: str, index: int, data: dict, vocab: Vocabulary,
               variant: str = "") -> Rule:
    line = line_of(text, "egglog", nth=index)
    # a variant is located at its name, the first line naming it from its entry on
    where = (_line_of_text(text, f'"{variant}"', line, start=line_of(text, "rules", nth=index))
             if variant else line)

    def fail(message: str, at: int | None = None):
        raise RuleFileError(path, at or line, message)

    if not isinstance(data, dict) or set(data) - _RULE_KEYS or not {"name", "egglog"} <= set(data):
        fail("a [[rules]] entry needs name and egglog (optional: bindings, lhs_sort, cot)")
    name = data["name"]
    if not re.fullmatch(r"[a-z][a-z0-9_-]*", name):
        fail(f"rule name '{name}' must be lowercase kebab-case")
    bindings = tuple((k, v) for k, v in data.get("bindings", {}).items())
    for var, sort in bindings:
        if sort not in VALUE_SORTS + TERM_SORTS:
            fail(f"binding '{var}' has unknown sort '{sort}'; use one of {', '.join(VALUE_SORTS + TERM_SORTS)}")
    source = data["egglog"]
    body_line = _line_of_text(text, source.strip().splitlines()[0] if source.strip() else "", line)
    from egglog import bindings as egg

    try:
        commands = egg.EGraph().parse_program(source)
    except Exception as err:  # egglog raises its own error type
        m = re.search(r"In (\d+):", str(err))
        at = body_line + int(m.group(1)) - _first_content_line(source) if m else body_line
        fail(f"egglog syntax: {str(err).splitlines()[-1]}", at)
    if len(commands) != 1 or type(commands[0]).__name__ != "RewriteCommand":
        fail("the egglog text of a rule must be exactly one (rewrite LHS RHS :when (...)) command")
    command = commands[0]
    if command.name:
        fail("do not give a :ruleset; the engine puts each strategy in its own ruleset")
    rewrite = command.rewrite
    lhs, rhs = str(rewrite.lhs), str(rewrite.rhs)
    conditions = tuple(str(c) for c in rewrite.conditions)
    declared = dict(bindings)
    head = type(rewrite.lhs).__name__
    if head == "Call" and rewrite.lhs.name in SORT_OF:
        lhs_sort = SORT_OF[rewrite.lhs.name]
    else:
        lhs_sort = data.get("lhs_sort") or declared.get(lhs)
        if lhs_sort not in TERM_SORTS:
            fail("the left-hand side is not a schema constructor; declare its sort with "
                 "lhs_sort (or as a binding of the same variable)")
    atoms = []
    for cond in rewrite.conditions:
        expr = getattr(cond, "expr", None)
        if type(cond).__name__ != "Fact" or type(expr).__name__ != "Call":
            continue
        if expr.name in vocab.relations or expr.name in vocab.parameters:
            args = tuple(str(a) for a in expr.args)
            for a in expr.args:
                if type(a).__name__ == "Var" and a.name not in declared and a.name != lhs:
                    fail(f"guard/parameter argument '{a.name}' of ({expr.name} ...) must be "
                         "declared in bindings so the chain of thought can state the fact")
            atoms.append(GuardAtom(expr.name, args))
    text_all = " ".join((lhs, rhs) + conditions)
    for var, _ in bindings:
        if not re.search(rf"(?<![\w\-\"]){re.escape(var)}(?![\w\-\"])", text_all):
            fail(f"binding '{var}' does not occur in the rule")
    parsed = tuple(_condition(c) for c in rewrite.conditions)
    cot = data.get("cot", "")
    if not isinstance(cot, str):
        fail("a rule's cot is a template string")
    missing = set(re.findall(r"{(\w+)}", cot)) - set(dict(bindings)) - {"lhs", "rhs"}
    if missing:
        fail(f"the rule's CoT template slot(s) {', '.join(sorted(missing))} are not its bindings",
             _line_of_text(text, cot.splitlines()[0], line))
    return Rule(name, lhs, rhs, conditions, parsed, frozenset(_variables(rewrite.lhs)), bindings,
                lhs_sort, tuple(atoms), source, cot.strip(),
                rhs_variables=frozenset(_variables(rewrite.rhs)), line=where, variant=variant)


def _variables(expr) -> set[str]:
    kind = type(expr).__name__
    if kind == "Var":
        return {expr.name}
    if kind == "Call":
        out: set[str] = set()
        for a in expr.args:
            out |= _variables(a)
        return out
    return set()


def _condition(cond) -> Condition:
    if type(cond).__name__ == "Eq":
        left, right = cond.left, cond.right
        defines = left.name if type(left).__name__ == "Var" else None
        head = right.name if type(right).__name__ == "Call" else "="
        return Condition(str(cond), head, frozenset(_variables(left) | _variables(right)),
                         defines, frozenset(_variables(right)))
    expr = cond.expr
    head = expr.name if type(expr).__name__ == "Call" else ""
    return Condition(str(cond), head, frozenset(_variables(expr)))


def line_of(text: str, key: str, nth: int = 0) -> int | None:
    hits = [i + 1 for i, line in enumerate(text.splitlines())
            if re.match(rf"\s*{re.escape(key)}\s*=", line) or re.match(rf"\s*\[+{re.escape(key)}\]+", line)]
    return hits[nth] if len(hits) > nth else (hits[0] if hits else None)


def _line_of_text(text: str, snippet: str, default: int | None, start: int | None = None) -> int:
    """The first line (from line ``start`` on) holding ``snippet``; ``default`` (or 1) if none."""
    if snippet:
        for i, line in enumerate(text.splitlines()):
            if i + 1 >= (start or 1) and snippet.strip() and snippet.strip() in line:
                return i + 1
    return default or 1


def _first_content_line(source: str) -> int:
    for i, line in enumerate(source.splitlines()):
        if line.strip():
            return i + 1
    return 1
