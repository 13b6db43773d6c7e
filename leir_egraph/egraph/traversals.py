"""Schema-generated helper functions that walk a term: substitute an index, move a tensor to
another scope, rename a tensor.

Each helper ``H`` over sort ``S`` is an ``:unextractable`` constructor ``(H<S> term extra...)``
plus one push-down rewrite per schema constructor of ``S`` (ruleset ``helpers``), so a rule's
right-hand side can say ``(SubstBody body "a" (IAdd ...))`` and the ``helpers`` ruleset,
saturated after the strategy step, evaluates it to a plain term. Constructors that need their
own behaviour (the leaves a helper actually changes) are listed as ``special`` and written by
hand in ``rules/prelude/core.egg``. A helper with a ``match_sort`` replaces whole subterms: its
generated rules only push down where the subterm differs from the one being replaced, and a
generated exact-match rule puts the replacement in.

Generating the boring cases from the schema keeps one source of truth: a new constructor in
``schema.egg`` is traversed by every helper automatically.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

SCHEMA_FILE = Path(__file__).with_name("schema.egg")

STATEMENT_SORTS = ("Body", "Nest", "Eqn", "Var", "Subs", "IExpr", "Expr", "CmpTail")
PROGRAM_SORTS = ("Prog",) + STATEMENT_SORTS


@dataclass(frozen=True)
class MapHelper:
    """A helper family: ``{prefix}{Sort}`` for each traversed sort."""
    prefix: str
    extra_sorts: tuple[str, ...]
    sorts: tuple[str, ...]
    special: frozenset[str]  # constructors whose rules are hand-written in the prelude
    doc: str
    match_sort: str = ""  # replace subterms of this sort equal to the first extra argument


MAP_HELPERS = (
    MapHelper("Subst", ("String", "IExpr"), STATEMENT_SORTS, frozenset({"IName", "Idx"}),
              "replace every use of an index name by an index expression"),
    MapHelper("Rescope", ("String", "String"), PROGRAM_SORTS, frozenset({"MkVar", "MkVarEmpty"}),
              "give every access of a tensor a new scope"),
    MapHelper("Rename", ("String", "String"), PROGRAM_SORTS, frozenset({"MkVar", "MkVarEmpty"}),
              "give every access of a tensor a new name"),
    MapHelper("Replace", ("Expr", "Expr"), PROGRAM_SORTS, frozenset(),
              "replace every occurrence of an expression by another", match_sort="Expr"),
)


@lru_cache(maxsize=1)
def schema_constructors() -> tuple[tuple[str, tuple[str, ...], str], ...]:
    """``(name, input sorts, output sort)`` of every schema constructor, via egglog's parser."""
    from egglog import bindings

    commands = bindings.EGraph().parse_program(SCHEMA_FILE.read_text())
    return tuple((c.name, tuple(c.schema.input), c.schema.output)
                 for c in commands if type(c).__name__ == "Constructor")


def contained_sorts(sort: str) -> set[str]:
    """``sort`` and every schema sort its terms can contain (strings and integers left out)."""
    constructors = schema_constructors()
    needed, grew = {sort}, True
    while grew:
        inner = {s for _, ins, out in constructors if out in needed for s in ins
                 if s not in ("String", "i64")}
        grew = not inner <= needed
        needed |= inner
    return needed


def traversed_sorts(helper: MapHelper) -> tuple[str, ...]:
    """The sorts a helper walks: all its ``sorts``; for one that replaces subterms of its
    ``match_sort``, only those whose terms can contain such a subterm. A term of any other
    sort (a ``Var``, its subscripts and their index expressions hold no ``Expr``) is left as
    it is, so no helper constructor of that sort is declared and no rewrite walks it."""
    if not helper.match_sort:
        return helper.sorts
    return tuple(s for s in helper.sorts if helper.match_sort in contained_sorts(s))


def evaluated_program(sort: str) -> list[str]:
    """``Evaluated<S> t``: the class of ``t`` holds a term of schema constructors only, for
    ``sort`` and every sort its terms contain (ruleset ``helpers``).

    A helper that replaces subterms equal to ``p0`` must push down only where the subterm
    *differs* from ``p0``, and inequality is not monotone: a subterm still holding an unevaluated
    helper (the output of another helper, ``(Replace (Replace x a b) c d)``) can look different
    from ``p0`` now and turn out equal once evaluated, and pushing down early would then union
    ``p0`` with its replacement. Two evaluated classes never merge later, so the test is sound
    between them.
    """
    constructors = schema_constructors()
    needed = contained_sorts(sort)
    lines = [f"(relation Evaluated{s} ({s}))" for s in sorted(needed)]
    for name, inputs, output in constructors:
        if output not in needed:
            continue
        args = [f"x{i}" for i in range(len(inputs))]
        conds = "".join(f" (Evaluated{s} {a})" for a, s in zip(args, inputs) if s in needed)
        lhs = f"({name}{''.join(' ' + a for a in args)})"
        lines.append(f"(rule ((= t {lhs}){conds}) ((Evaluated{output} t)) :ruleset helpers)")
    return lines


def helper_program() -> str:
    """egglog text declaring every map helper and its generic push-down rewrites."""
    lines = []
    for sort in sorted({h.match_sort for h in MAP_HELPERS if h.match_sort}):
        lines.extend(evaluated_program(sort))
    for helper in MAP_HELPERS:
        extras = " ".join(helper.extra_sorts)
        sorts = traversed_sorts(helper)
        lines.append(f";; {helper.prefix}<Sort>: {helper.doc}")
        for sort in sorts:
            lines.append(f"(constructor {helper.prefix}{sort} ({sort} {extras}) {sort} :unextractable)")
        params = " ".join(f"p{i}" for i in range(len(helper.extra_sorts)))
        for name, inputs, output in schema_constructors():
            if output not in sorts or name in helper.special:
                continue
            args = [f"x{i}" for i in range(len(inputs))]
            mapped = [f"({helper.prefix}{s} {a} {params})" if s in sorts else a
                      for a, s in zip(args, inputs)]
            lhs = f"({name}{''.join(' ' + a for a in args)})"
            rhs = f"({name}{''.join(' ' + m for m in mapped)})"
            when = (f" :when ((Evaluated{output} {lhs}) (Evaluated{output} p0) (!= {lhs} p0))"
                    if output == helper.match_sort else "")
            lines.append(f"(rewrite ({helper.prefix}{output} {lhs} {params}) {rhs}{when} "
                         ":ruleset helpers)")
        if helper.match_sort:
            s = helper.match_sort
            lines.append(f"(rewrite ({helper.prefix}{s} p0 {params}) p1 :ruleset helpers)")
    return "\n".join(lines) + "\n"
