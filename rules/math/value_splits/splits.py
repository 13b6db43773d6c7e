"""Facts of the split strategies: exponential_split (exp(a) -> exp(a-m)*exp(m)),
multiplicative_split (x -> (x/m)*m) and additive_split (x -> (x-m)+m).

* ``finite_operand`` (a guard beyond the paper's nine, needed for soundness): the split keeps
  every value finite where it was. The splitting value m is provably finite -- and non-zero
  where the identity divides by it -- for finite inputs (leir.ranges); and the split operand
  x does not sit where rounding could push a value onto a singularity: inside a divisor, a
  logarithm's argument or a power's base. A relative split (``x/m*m``, ``exp(a-m)*exp(m)``)
  keeps the sign and zero-ness of what it rewrites, so it may sit in such an operand when that
  operand is provably positive; an absolute split (``x-m+m``) can round a tiny x to zero, so it
  never sits in one.
* Parameters: the sites (a tensor read, or an exp(...) call, occurring once in an equation of a
  flat top-level nest, outside any condition, not a read of the equation's own target, in an
  equation of a floating-point target; for additive_split also the whole right-hand side of an
  equation that reads nothing it writes) and the existing variables m a site may be split by
  (tensor reads of the same equation evaluated whenever the equation is: not inside an
  if_then_else branch or a condition).

Keeping x out of conditions matters: the split equals x only up to rounding, and a comparison
like ``x<0`` could flip on that rounding. Keeping x off the equation's own target keeps an
accumulation ``X=X+e`` recognisable, so its implicit initialisation stays where it was. Integer
targets are left alone: their division truncates.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Iterator

from leir_egraph.egraph.encoding import encode
from leir_egraph.egraph.vocabulary import (Fact, Guard, GuardExtension, LoadedProgram,
                                           ParameterSet, Relation)
from leir_egraph.leir.analysis import (equation_sites, exploration_memo, inputs_and_writes,
                                      reads)
from leir_egraph.leir.ast import Bin, Call, Compare, Equation, IfThenElse, Logic, LoopNest, Neg, Num, Var
from leir_egraph.leir.program import Program
from leir_egraph.leir.ranges import ANY, FINITE, analyse, expression_range
from leir_egraph.leir.signature import is_float


@dataclass(frozen=True)
class Operand:
    """A tensor read or exp call in an equation's value, with its context."""
    node: object
    branch: bool                    # inside an if_then_else branch (not always evaluated)
    condition: bool                 # inside a condition
    singular: tuple = ()            # enclosing divisors, log arguments and power bases


def operands(expr, branch: bool = False, condition: bool = False,
             singular: tuple = ()) -> Iterator[Operand]:
    """Every tensor read and ``exp`` call in value positions of ``expr``, outermost first. A
    power's base counts as singular unless the exponent is a non-negative integer literal (a
    polynomial has no singularity)."""
    if isinstance(expr, Var):
        yield Operand(expr, branch, condition, singular)
        return
    if isinstance(expr, Call) and expr.fn == "exp":
        yield Operand(expr, branch, condition, singular)
    if isinstance(expr, IfThenElse):
        yield from operands(expr.cond, branch, True, singular)
        yield from operands(expr.then, True, condition, singular)
        yield from operands(expr.otherwise, True, condition, singular)
    elif isinstance(expr, (Compare, Logic)):
        for child in (expr.operands if isinstance(expr, Compare) else (expr.lhs, expr.rhs)):
            yield from operands(child, branch, True, singular)
    elif isinstance(expr, Bin):
        polynomial = (isinstance(expr.rhs, Num) and expr.rhs.is_integer_literal)
        base = singular + (expr.lhs,) if expr.op == "**" and not polynomial else singular
        divisor = singular + (expr.rhs,) if expr.op == "/" else singular
        yield from operands(expr.lhs, branch, condition, base)
        yield from operands(expr.rhs, branch, condition, divisor)
    elif isinstance(expr, Neg):
        yield from operands(expr.operand, branch, condition, singular)
    elif isinstance(expr, Call):
        inner = singular + (expr.args[0],) if expr.fn == "log" else singular
        for arg in expr.args:
            yield from operands(arg, branch, condition, inner)


def split_sites(eq: Equation) -> tuple[list[Operand], list[Var]]:
    """``(sites, splitters)`` of one equation: the operands that may be split (tensor reads
    other than of the target, and exp calls, occurring once and outside conditions), and the
    tensor reads evaluated whenever the equation is, outside conditions (candidates for m)."""
    found = list(operands(eq.value))
    count: dict = {}
    for op in found:
        count[op.node] = count.get(op.node, 0) + 1
    sites = [op for op in found
             if not op.condition and count[op.node] == 1
             and not (isinstance(op.node, Var) and op.node.name == eq.target.name)]
    splitters = list(dict.fromkeys(op.node for op in found
                                   if isinstance(op.node, Var) and not op.branch
                                   and not op.condition))
    return sites, splitters


@lru_cache(maxsize=16)
def _analysis(program: Program):
    return analyse(program, FINITE)


def _flat_nests(loaded: LoadedProgram):
    for i, nest in enumerate(loaded.program.leir.nests):
        if not any(isinstance(item, LoopNest) for item in nest.body):
            yield loaded.top_nest_term(i), nest


def _positive(span) -> bool:
    return span.real and span.positive


def _finite_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    ranges = _analysis(loaded.program)
    out: dict[Fact, None] = {}
    for name, nest in _flat_nests(loaded):
        def ask(_, nest=nest):   # the spans of what the nest reads and does not write
            read, written = inputs_and_writes(nest)   # memoised per nest
            return ranges.reads_outside(written, among=read | written)
        out.update(dict.fromkeys(exploration_memo("value_splits.finite", name, ask,
                                                  lambda ask, name=name, nest=nest:
                                                  _nest_finite_facts(name, nest, ask))))
    return list(out)


def _split_equations(nest):
    """``(eq, its term, its sites, its splitters)`` for each floating-point equation of a flat
    nest (an integer target's division truncates: left alone)."""
    for eq in nest.equations:
        if is_float(eq.target.dtype):
            yield (eq, encode(eq), *split_sites(eq))


def _nest_finite_facts(name, nest, ask) -> tuple[Fact, ...]:
    """``_finite_facts`` about one flat top-level nest (``ask`` gives the spans of the
    tensors it reads and does not write)."""
    reads = ask("reads")
    loops = {l.index: (0, l.extent - 1) for l in nest.loops}
    out: dict[Fact, None] = {}
    for eq, e, sites, splitters in _split_equations(nest):
        for m in splitters:
            known = reads.get(m.name, ANY)
            if known.real:
                out[FINITE_OPERAND(name, m)] = None
            if known.real and known.nonzero:
                out[NON_ZERO_OPERAND(name, m)] = None
        for site in sites:
            if not site.singular:
                out[SHIFTABLE_OPERAND(name, e, site.node)] = None
            if all(_positive(expression_range(d, reads, loops, FINITE))
                   for d in site.singular):
                out[SCALABLE_OPERAND(name, e, site.node)] = None
    return tuple(out)


FINITE_OPERAND = Relation(
    "FiniteOperand", ("Nest", "Expr"),
    "{1} is finite wherever {0} reads it (for finite inputs)")
NON_ZERO_OPERAND = Relation(
    "NonZeroOperand", ("Nest", "Expr"),
    "{1} is finite and never zero wherever {0} reads it (for finite inputs)")
SHIFTABLE_OPERAND = Relation(
    "ShiftableOperand", ("Nest", "Eqn", "Expr"),
    "{2} sits in no divisor, logarithm argument or power base of {1}")
SCALABLE_OPERAND = Relation(
    "ScalableOperand", ("Nest", "Eqn", "Expr"),
    "every divisor, logarithm argument or power base of {1} around {2} is "
    "provably positive")

FINITE_OPERAND_GUARD = Guard(
    "finite_operand",
    "Extra soundness guard (not one of the paper's nine): a split keeps every value finite where "
    "it was. FiniteOperand/NonZeroOperand: the splitting value is provably finite (and non-zero "
    "for a division) for finite inputs, by the value ranges of leir.ranges in its FINITE domain "
    "(inputs finite, exact real arithmetic), read after the nests writing the value completed "
    "(a tensor the nest itself writes proves nothing there: it may hold a partial reduction or "
    "an initial identity). ShiftableOperand: the operand sits in no divisor, logarithm argument "
    "or power base, where x-m+m rounding a tiny value to zero would make an infinity. "
    "ScalableOperand: every divisor, logarithm argument or power base around the operand is provably positive, "
    "which x/m*m and exp(a-m)*exp(m) keep, as they keep sign and zero-ness.",
    "the split could put NaN or inf where the program had none: the splitting value may be "
    "infinite, NaN or zero, or the operand sits where rounding could reach a singularity",
    relations=(
        FINITE_OPERAND,
        NON_ZERO_OPERAND,
        SHIFTABLE_OPERAND,
        SCALABLE_OPERAND,
    ),
    facts=_finite_facts)

GUARD_EXTENSIONS = (GuardExtension("finite_operand", new_guard=FINITE_OPERAND_GUARD),)


@lru_cache(maxsize=16)
def _onto_written(program: Program) -> frozenset[Equation]:
    """The equations whose target an input or a textually earlier equation already holds at
    every place they occur: reading the target there reads those values (docs/LEIR.md: X=X+e
    accumulates onto them, no implicit initialisation), so its value is an ordinary expression,
    which a split may rewrite whole (X=X+e -> X=X+e+m-m). (Keyed by the equation itself, as
    facts are: one that also occurs where its target is fresh is left out.)"""
    inputs = set(program.signature.input_names)
    seen: set[str] = set()
    onto: set[Equation] = set()
    fresh: set[Equation] = set()
    for site in equation_sites(program.leir):
        eq = site.equation
        (onto if eq.target.name in seen or eq.target.name in inputs else fresh).add(eq)
        seen.add(eq.target.name)
    return frozenset(onto - fresh)


def whole_value(program: Program, eq: Equation) -> bool:
    """The equation's whole value may be split: it reads nothing it writes, or what it reads of
    its target was written before (``_onto_written``)."""
    return eq.target.name not in reads(eq) or eq in _onto_written(program)


def _site_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    out: dict[Fact, None] = {}
    for name, nest in _flat_nests(loaded):
        out.update(dict.fromkeys(exploration_memo(
            "value_splits.sites", name, lambda eq: whole_value(loaded.program, eq),
            lambda ask, name=name, nest=nest: _nest_site_facts(name, nest, ask))))
    return list(out)


def _nest_site_facts(name, nest, whole) -> tuple[Fact, ...]:
    """``_site_facts`` about one flat top-level nest (``whole(eq)``: ``whole_value``)."""
    out: dict[Fact, None] = {}
    for eq, e, sites, splitters in _split_equations(nest):
        for site in sites:
            out[SPLIT_SITE(name, e, site.node)] = None
        for m in splitters:
            out[SPLIT_BY(name, e, m)] = None
        if whole(eq):   # no accumulation from an initial value
            out[WHOLE_VALUE_SITE(name, e, eq.value)] = None
    return tuple(out)


SPLIT_SITE = Relation(
    "SplitSite", ("Nest", "Eqn", "Expr"),
    "{2} occurs once in {1}, outside any condition, and is not the equation's target")
SPLIT_BY = Relation(
    "SplitBy", ("Nest", "Eqn", "Expr"),
    "{2} is read by {1} whenever it is evaluated")
WHOLE_VALUE_SITE = Relation(
    "WholeValueSite", ("Nest", "Eqn", "Expr"),
    "{2} is the whole right-hand side of {1}, which reads nothing it writes, or reads "
    "only values written before it (no accumulation from an initial value, whose "
    "form X=X op e must stay)")

PARAMETER_SETS = (ParameterSet((
    SPLIT_SITE,
    SPLIT_BY,
    WHOLE_VALUE_SITE,
), _site_facts),)
