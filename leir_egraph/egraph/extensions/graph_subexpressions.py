"""Facts for computing a sub-expression on its own: expression_splitting and
common_subexpression_elimination (leir.subexpressions).

expression_splitting, per top-level nest (properties of the nest and of tensor shapes, which are
the same everywhere in a program, so keying by the nest term is exact):

* parameter ``SubexpressionFrame nest e loops subs dtype``: e is a compound sub-expression of the
  nest that may be stored: its frame loops, the intermediate's subscript and dtype;
* dependency / ``Hoistable nest e``: e may be computed in a nest right before this one.

common_subexpression_elimination, per program suffix starting at a nest using e (suffix terms
are unique to their position):

* operation_identity / ``RepeatedIn s e``: e is computed at least twice in the suffix;
* loop_nest_consistency / ``SharedFrame s e loops subs dtype``: every nest of the suffix using e
  runs its indices over the same loops, outside conditions, in one dtype;
* dependency / ``UnchangedIn s e``: e has the same value at every use in the suffix.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Iterable

from ...leir.analysis import intermediate_shapes
from ...leir.subexpressions import common_subexpressions, hoistable, subexpressions
from ..facts import LoadedProgram
from ..guards import GuardExtension, Relation
from ..parameters import ParameterSet
from ..encoding import expr_term, loops_term, quoted, subs_term


@lru_cache(maxsize=4)
def program_shapes(program) -> dict[str, tuple[int, ...]]:
    """Shape of every known tensor (signature) and intermediate (inferred from its writes)."""
    shapes = {t.name: t.shape for t in program.signature.tensors}
    shapes.update(intermediate_shapes(program.leir, set(shapes)))
    return shapes


def _split_parameters(loaded: LoadedProgram) -> Iterable[str]:
    for i, nest in enumerate(loaded.program.leir.nests):
        for sub in subexpressions(nest):
            yield (f"(SubexpressionFrame {loaded.top_nest_name(i)} {expr_term(sub.expr)} "
                   f"{loops_term(sub.loops)} {subs_term(sub.subscripts)} {quoted(sub.dtype)})")


def _hoistable_facts(loaded: LoadedProgram) -> Iterable[str]:
    shapes = program_shapes(loaded.program)
    for i, nest in enumerate(loaded.program.leir.nests):
        for sub in subexpressions(nest):
            if hoistable(nest, sub.expr, shapes):
                yield f"(Hoistable {loaded.top_nest_name(i)} {expr_term(sub.expr)})"


@lru_cache(maxsize=4)
def _common(program):
    return common_subexpressions(program.leir, program_shapes(program))


def _cse_facts(kind: str):
    def facts(loaded: LoadedProgram) -> Iterable[str]:
        for c in _common(loaded.program):
            s, e = loaded.suffix_name(c.position), expr_term(c.expr)
            if kind == "repeated" and c.repeated:
                yield f"(RepeatedIn {s} {e})"
            elif kind == "frame" and c.shared_frame:
                yield (f"(SharedFrame {s} {e} {loops_term(c.loops)} {subs_term(c.subscripts)} "
                       f"{quoted(c.dtype)})")
            elif kind == "unchanged" and c.unchanged:
                yield f"(UnchangedIn {s} {e})"
    return facts


PARAMETER_SETS = (
    ParameterSet((Relation("SubexpressionFrame", ("Nest", "Expr", "Loops", "Subs", "String"),
                           "{1} is a compound sub-expression of {0}, used outside conditions; on "
                           "its own it varies over the loops {2}, as the element {3} of a {4} "
                           "tensor"),),
                 _split_parameters),
)

GUARD_EXTENSIONS = (
    GuardExtension(
        "dependency",
        relations=(Relation("Hoistable", ("Nest", "Expr"),
                            "{1} reads nothing {0} writes and can be evaluated at every point of "
                            "its loops, so it may be computed before {0}"),),
        facts=_hoistable_facts),
    GuardExtension(
        "operation_identity",
        relations=(Relation("RepeatedIn", ("Prog", "Expr"),
                            "{1} is computed more than once from this nest on"),),
        facts=_cse_facts("repeated")),
    GuardExtension(
        "loop_nest_consistency",
        relations=(Relation("SharedFrame", ("Prog", "Expr", "Loops", "Subs", "String"),
                            "every nest using {1} from this nest on runs its indices over the "
                            "same loops {2}, outside any condition and in {4}"),),
        facts=_cse_facts("frame")),
    GuardExtension(
        "dependency",
        relations=(Relation("UnchangedIn", ("Prog", "Expr"),
                            "no nest from this one to the last use of {1} writes a tensor it "
                            "reads, and it can be evaluated at every point of its loops"),),
        facts=_cse_facts("unchanged")),
)
