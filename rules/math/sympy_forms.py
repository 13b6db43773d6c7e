"""Fact provider of the sympy-form rules of the math family (factorization, expand_factorization,
cancellation, together, powsimp, collect name this file).

The paper's math strategies are sympy's own functions applied to an equation's right-hand side:
``sqf`` (factorization), ``expand`` (expand_factorization), ``cancel`` (cancellation),
``together``, ``powsimp`` and ``collect`` (once per variable). The local identities of the rule
files (``a*b+a*c -> a*(b+c)`` ...) are one step of those; the forms below are what the function
itself returns for the whole right-hand side, so a rule may offer exactly the move the paper's
dataset holds:

* ``SympyForm n e fn x y`` (parameter): ``x`` is the value of equation ``e`` of flat nest ``n``
  (for an accumulation ``X=X+r``: the whole ``X+r``), and ``y`` is the same with ``r`` -- or the
  whole value -- replaced by what sympy's ``fn`` returns for it, read back into LEIR. Each
  distinct tensor access is one symbol (``A_{a}`` and ``A_{a-1}`` are two), named by its tensor
  so sympy orders terms as it does for the paper's data. Only float equations (f32, f64, bf16)
  of value arithmetic with ``+ - * / **``, ``exp``, ``log``, ``sqrt``, ``max``, ``min`` and
  ``abs``; no conditions, loop-index values or other functions; the form must differ from the
  original beyond the exact re-printings of ``leir.canonical`` (``1-x`` is ``-x+1``).

* ``SympyDefined n e x y`` (guard ``defined_values``): the real-number identity sympy proves is
  also a program rewrite. Assumption (leir/ranges.py, FINITE domain, as for the value splits):
  inputs are finite and the two sides agree up to rounding wherever both are defined. So both
  sides must be defined for every finite input: every divisor provably non-zero, every logarithm
  argument provably positive, every square-root argument and every base of a non-integer power
  provably non-negative (by the FINITE sign classes of the values the nest reads); and both
  sides compute the same exponentials of tensor values (up to sympy's expansion of the
  argument; exponentials of constants are free). An exponential overflows at ordinary finite
  arguments (89 in f32), so a new one can turn a finite result into ``inf*0``: ``exp(a-m) ->
  exp(a)*exp(-m)`` (softmax's ``exp(x-max)``) is refused; so is a removed one, which can turn
  the original's overflow into a number (``exp(a)*exp(-a) -> 1``). The exponentials both sides
  share are assumed, as for the value splits, not to overflow where the original is finite.
  And a form may not distribute a factor over a sum whose terms may cancel
  (``cancelling_products``): ``(F-O)**2 -> F**2-2*F*O+O**2`` and ``(F-O)/s -> F/s-O/s`` are
  the same real functions, but where ``F`` is close to ``O`` the expanded form's rounding, at
  the scale of ``F**2`` or ``F/s``, is tens to hundreds of ULPs of the result (a variance or a
  normalisation of data far from zero), while ``F-O`` of two close values is exact. Where the
  range analysis proves the terms of one sign (``(a+b)**2`` with ``a, b >= 0``), or the factor
  is a power of two (an exact scaling), nothing new cancels and the form is offered. The
  check is one-sided: a form that removes such a product (sympy's ``cancel`` of
  ``(a*b-a*c)/a``) is refused too -- a move lost, never an unsound one.

Everything here is a pure function of the program; sympy's results are cached per expression.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterable

import sympy

from leir_egraph.egraph.vocabulary import (Fact, Guard, GuardExtension, LoadedProgram,
                                           ParameterSet, Relation)
from leir_egraph.leir.analysis import memoized_as_spelled, tensor_names
from leir_egraph.leir.ast import Bin, Call, Equation, Leir, LoopNest, Neg, Num, Var
from leir_egraph.leir.canonical import exact_normal_form
from leir_egraph.leir.parser import parse
from leir_egraph.leir.printer import to_text
from leir_egraph.leir.traverse import rebuild, walk_values
from leir_egraph.leir.ranges import (FINITE, FLOAT, analyse, expression_range, power_of_two,
                                     terms_apart)

REWRITABLE = ("f32", "f64", "bf16")

#: the rule files' function names -> how sympy computes the form (a list: collect gives one per
#: variable)
FUNCTIONS = {
    "sqf": lambda e, syms: [sympy.sqf(e)],
    "expand": lambda e, syms: [sympy.expand(e)],
    "cancel": lambda e, syms: [sympy.cancel(e)],
    "together": lambda e, syms: [sympy.together(e)],
    "powsimp": lambda e, syms: [sympy.powsimp(e)],
    "collect": lambda e, syms: [sympy.collect(e, s) for s in syms],
}
_NEEDS_DIVISION = ("cancel", "together")   # as the paper's data: only where '/' occurs

#: LEIR's functions sympy reads (by these names, in sympify's local namespace)
_FUNCTION_NAMES = {"exp": sympy.exp, "log": sympy.log, "sqrt": sympy.sqrt, "abs": sympy.Abs,
                   "max": sympy.Max, "min": sympy.Min}
_BACK = {"Max": "max", "Min": "min", "Abs": "abs"}   # sympy's printed names -> LEIR's
_VALUE_NODES = (Num, Var, Neg, Bin, Call)
_PREFIX = "T_"


class _Unsupported(Exception):
    """An expression sympy cannot take faithfully (conditions, index values, other calls)."""


# ---------------------------------------------------------------- LEIR <-> sympy

def _symbol_names(expr) -> dict:
    """Each distinct access -> a symbol name: its tensor's name (then ``_1``, ``_2`` ... for
    further accesses of the same tensor), prefixed so no sympy constant (E, I, S) is met."""
    names: dict = {}
    taken: dict[str, int] = {}
    for e in walk_values(expr):
        if isinstance(e, Var) and e not in names:
            k = taken.get(e.name, 0)
            taken[e.name] = k + 1
            names[e] = _PREFIX + e.name + (f"_{k}" if k else "")
    return names


def _check(e) -> None:
    """Raise _Unsupported unless ``e`` is value arithmetic sympy takes faithfully (no
    condition, index value, infinity, integer value or other function)."""
    for node in walk_values(e):
        if not isinstance(node, _VALUE_NODES):
            raise _Unsupported(type(node).__name__)
        if isinstance(node, Num) and "inf" in node.text:
            raise _Unsupported("infinite literal")
        if isinstance(node, Var) and node.dtype not in REWRITABLE:
            raise _Unsupported(f"a {node.dtype} value")   # 1.0*x is x only for a float x
        if isinstance(node, Bin) and node.op not in ("+", "-", "*", "/", "**"):
            raise _Unsupported(node.op)
        if isinstance(node, Call) and node.fn not in _FUNCTION_NAMES:
            raise _Unsupported(node.fn)


def _to_sympy(e, names: dict):
    """The expression as the paper's code builds it: its text, each access replaced by its
    symbol's name, read by ``sympify(text, evaluate=False)`` (which already distributes a
    unary minus over a sum and flattens products: the forms sympy returns depend on that)."""
    _check(e)
    return _parsed(_symbolic_text(e, names), tuple(sorted(names.values())))


def _symbolic_text(e, names: dict) -> str:
    text = to_text(e)
    for var, name in sorted(names.items(), key=lambda kv: -len(to_text(kv[0]))):
        text = text.replace(to_text(var), name)
    return text


@lru_cache(maxsize=8192)
def _parsed(text: str, symbols: tuple[str, ...]):
    local = {n: sympy.Symbol(n) for n in symbols}
    local.update(_FUNCTION_NAMES)
    return sympy.sympify(text, locals=local, evaluate=False)


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _from_sympy(printed: str, texts: dict[str, str]):
    """sympy's printed form read back as a LEIR expression (``None`` when it uses anything
    LEIR has no word for: E, pi, I, infinities, other functions)."""
    printed = printed.replace(" ", "")
    for old, new in _BACK.items():
        printed = printed.replace(old + "(", new + "(")

    def name(m):
        word = m.group(0)
        if word in texts:
            return texts[word]
        if word in _FUNCTION_NAMES or re.fullmatch(r"e\d*", word):
            return word
        raise _Unsupported(word)

    try:
        text = re.sub(_NAME, name, printed)
    except _Unsupported:
        return None
    try:
        leir = parse(f"B^{{1}}_{{tx=0}}[Z^{{f32,g}}={text};];")
    except ValueError:
        return None
    return _tidy(leir.nests[0].body[0].value)


def _tidy(e):
    """sympy's float 1.0 factors (``1.0*(1.0*x+1.0)`` for ``1.0+x``) multiply a float value by
    one, which changes nothing: they are dropped. (``p/q`` of two integer literals stays: a
    literal is cast to the float target dtype first, docs/LEIR.md, so it is the ratio.)"""
    def drop_one(node):
        if isinstance(node, Bin):
            if node.op == "*" and _float_one(node.lhs):
                return node.rhs
            if node.op in ("*", "/") and _float_one(node.rhs):
                return node.lhs
        return None

    return rebuild(e, drop_one)


def _float_one(e) -> bool:
    return isinstance(e, Num) and "." in e.text and float(e.text) == 1.0


def forms(fn: str, value) -> list:
    """LEIR expressions sympy's ``fn`` makes of ``value`` (each different from it beyond exact
    re-printing), or ``[]`` when ``value`` is outside what sympy takes faithfully."""
    if fn in _NEEDS_DIVISION and not _has_division(value):
        return []
    try:
        names = _symbol_names(value)
        _check(value)
        printed = _printed_forms(fn, _symbolic_text(value, names), tuple(sorted(names.values())))
    except (_Unsupported, sympy.SympifyError, sympy.PolynomialError, SyntaxError, TypeError,
            ValueError, RecursionError, AttributeError):
        return []
    texts = {n: to_text(v) for v, n in names.items()}
    own = _exact_text(value)
    out, seen = [], {own}
    for text in printed:
        form = _from_sympy(text, texts)
        if form is None:
            continue
        exact = _exact_text(form)
        if exact not in seen:
            seen.add(exact)
            out.append(form)
    return out


@lru_cache(maxsize=8192)
def _printed_forms(fn: str, text: str, symbols: tuple[str, ...]) -> tuple[str, ...]:
    """sympy's printed forms of one symbolic text (cached: programs share expressions, and the
    six functions read one text)."""
    expr = _parsed(text, symbols)
    ordered = sorted(expr.free_symbols, key=lambda s: s.name)
    return tuple(dict.fromkeys(str(f) for f in FUNCTIONS[fn](expr, ordered)))


def _has_division(e) -> bool:
    return any(isinstance(n, Bin) and n.op == "/" for n in walk_values(e))


def _exact_text(value) -> str:
    eq = Equation(Var("Z", "f32", "g"), value)
    leir = exact_normal_form(Leir((LoopNest((), (eq,)),)))
    return to_text(leir.nests[0].body[0].value)


# ---------------------------------------------------------------- where, and the guard

def _reads(e, name: str) -> bool:
    return any(isinstance(n, Var) and n.name == name for n in walk_values(e))


def _value_forms(fn: str, eq: Equation) -> list:
    """New right-hand sides for ``eq``: sympy's ``fn`` of the whole value, or of ``r`` in an
    accumulation ``X=X+r`` (which keeps its form: its implicit initialisation stays)."""
    value, target = eq.value, eq.target
    try:
        if not _reads(value, target.name):
            return forms(fn, value)
        if (isinstance(value, Bin) and value.op == "+" and value.lhs == target
                and not _reads(value.rhs, target.name)):
            return [Bin("+", target, form) for form in forms(fn, value.rhs)]
    except _Unsupported:
        pass
    return []


@lru_cache(maxsize=16)
def _ranges(program, domain):
    return analyse(program, domain)


class _Spans:
    """What a sub-expression of one equation may be, in both domains of leir.ranges: FINITE
    (sign classes on finite inputs; a value that may be NaN or infinite is unknown there) and
    FLOAT (intervals of the extended reals: exp of anything is >= 0 or NaN, so 1+exp(x) is
    never zero). A fact of FLOAT holds on finite inputs too; a property holds when either
    domain proves it. The spans kept are those of the tensors the nest accesses (what an
    expression of it, or a form of one, can read), not of every tensor of the program."""

    def __init__(self, program, nest, dtype: str):
        written = {q.target.name for q in nest.body}
        accessed = tensor_names(nest)
        self.loops = {l.index: (0, l.extent - 1) for l in nest.loops}
        self.reads = {d: _ranges(program, d).reads_outside(written, accessed)
                      for d in (FINITE, FLOAT)}
        self.dtype = dtype

    def holds(self, node, prop: str) -> bool:
        return any(getattr(expression_range(node, self.reads[d], self.loops, d, self.dtype), prop)
                   for d in (FINITE, FLOAT))


def _defined_everywhere(e, spans: "_Spans") -> bool:
    """Every divisor non-zero, logarithm argument positive, square-root argument and base of a
    non-integer power non-negative."""
    holds = spans.holds
    for node in walk_values(e):
        if isinstance(node, Bin):
            if node.op == "/" and not holds(node.rhs, "nonzero"):
                return False
            if node.op == "**":
                exponent = _literal(node.rhs)
                if exponent is None or exponent != int(exponent):
                    if not holds(node.lhs, "nonnegative"):
                        return False
                elif exponent < 0 and not holds(node.lhs, "nonzero"):
                    return False
        if isinstance(node, Call):
            if node.fn == "log" and not holds(node.args[0], "positive"):
                return False
            if node.fn == "sqrt" and not holds(node.args[0], "nonnegative"):
                return False
    return True


def _literal(e) -> float | None:
    if isinstance(e, Num):
        try:
            return float(e.text)
        except ValueError:
            return None
    if isinstance(e, Neg):
        inner = _literal(e.operand)
        return None if inner is None else -inner
    return None


def _exponents(e, names: dict) -> set:
    """The arguments of the exponentials of ``e`` that read a tensor, expanded by sympy."""
    return {sympy.expand(_to_sympy(n.args[0], names)) for n in walk_values(e)
            if isinstance(n, Call) and n.fn == "exp"
            and any(isinstance(v, Var) for v in walk_values(n.args[0]))}


def _may_cancel(e, spans: "_Spans") -> bool:
    """``e`` (its sign aside) is a sum or difference whose two terms may cancel: not provably
    of one sign for ``+`` (both non-negative or both non-positive), nor of opposite signs for
    ``-`` (``leir.ranges.terms_apart``, as the local rules' ``MathTermsApart``)."""
    while isinstance(e, Neg):
        e = e.operand
    if not (isinstance(e, Bin) and e.op in "+-"):
        return False

    def signs(x) -> tuple[bool, bool]:
        return spans.holds(x, "nonnegative"), spans.holds(x, "nonpositive")

    return not terms_apart(e.op, signs(e.lhs), signs(e.rhs))


def _factors(e) -> list:
    """The factors of the product chain ``e``, signs dropped: a divisor is one factor, and a
    power with an integer exponent of 2 or more counts its base twice (enough to multiply two
    sums)."""
    if isinstance(e, Neg):
        return _factors(e.operand)
    if isinstance(e, Bin) and e.op == "*":
        return _factors(e.lhs) + _factors(e.rhs)
    if isinstance(e, Bin) and e.op == "/":
        return _factors(e.lhs) + [e.rhs]
    if isinstance(e, Bin) and e.op == "**":
        k = _literal(e.rhs)
        if k is not None and k == int(k) and k >= 2:
            return _factors(e.lhs) * 2
    return [e]


def _exact_scaling(e) -> bool:
    """A power-of-two literal: multiplying or dividing by it is exact (short of overflow)."""
    return power_of_two(_literal(e))


def cancelling_products(e, spans: "_Spans") -> int:
    """How many products and quotients of ``e`` multiply a sum whose terms may cancel by
    something that is not an exact scaling (``(F-O)**2``, ``(F-O)/s``, ``a*(b+c)``).
    Distributed over the sum, such a product is a sum of products that cancel where the sum
    is small beside its terms: ``F/s-O/s`` and ``F*F-2*F*O+O*O`` round at the scale of
    ``F/s`` and ``F*F``, the original at its own (``F-O`` of two close values is exact): a
    variance or a normalisation of data far from zero, 30-393 ULP of the result on the zoo."""
    count = 0
    for node in walk_values(e):
        if isinstance(node, Bin) and node.op in ("*", "/", "**"):
            factors = _factors(node)
            if (any(_may_cancel(f, spans) for f in factors)
                    and sum(not _exact_scaling(f) for f in factors) >= 2):
                count += 1
    return count


def defined_like(before, after, spans: "_Spans") -> bool:
    """The guard (module docstring): both sides defined for every finite input, the same
    exponentials of tensor values on both sides, and no product of a sum that may cancel
    multiplied out (``cancelling_products``: fewer in ``after`` than in ``before``)."""
    if not (_defined_everywhere(before, spans) and _defined_everywhere(after, spans)):
        return False
    if cancelling_products(after, spans) < cancelling_products(before, spans):
        return False
    names = _symbol_names(Bin("+", before, after))
    return _exponents(after, names) == _exponents(before, names)


def bounded(e, spans: "_Spans") -> bool:
    """Every sub-expression of ``e`` is never ±inf on every input the program may be given
    (leir.ranges FLOAT domain, with the dtype's overflow; NaN allowed): a form whose two sides
    are both bounded, and read the same tensor elements (so a NaN read reaches both: the forms
    have no conditions, and ``max``/``min`` propagate NaN), differs from the original by
    rounding only -- neither overflows or makes a NaN where the other does not. That is what a
    strategy declared for any IEEE input (``domain = "float"``) needs of a form."""
    return all(expression_range(node, spans.reads[FLOAT], spans.loops, FLOAT, spans.dtype).finite
               for node in walk_values(e))


def _reads_of(e) -> frozenset:
    return frozenset(n for n in walk_values(e) if isinstance(n, Var))


@memoized_as_spelled(1 << 13)
def _equation_forms(eq: Equation) -> tuple:
    """``(fn, new value)`` for every function's forms of ``eq``, in FUNCTIONS' order: a
    function of the equation alone, memoized on it (bounded; an entry holds its key), so
    programs sharing an equation -- a dataset's seeds, an exploration's children -- pay for
    its forms once."""
    return tuple((fn, new) for fn in FUNCTIONS for new in _value_forms(fn, eq))


@lru_cache(maxsize=64)
def _program_forms(program) -> tuple:
    """``(nest position, equation, fn, new value, defined, bounded)`` for every form of the
    program."""
    out = []
    for i, nest in enumerate(program.leir.nests):
        if any(isinstance(item, LoopNest) for item in nest.body):
            continue
        for eq in nest.body:
            if eq.target.dtype not in REWRITABLE:
                continue
            spans = None
            for fn, new in _equation_forms(eq):
                spans = spans or _Spans(program, nest, eq.target.dtype)
                defined = defined_like(eq.value, new, spans)
                out.append((i, eq, fn, new, defined,
                            defined and _reads_of(eq.value) == _reads_of(new)
                            and bounded(eq.value, spans) and bounded(new, spans)))
    return tuple(out)


def _form_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    out: dict[Fact, None] = {}
    for i, eq, fn, new, *_ in _program_forms(loaded.program):
        out[SYMPY_FORM(loaded.top_nest_term(i), eq, fn, eq.value, new)] = None
    return list(out)


def _defined_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    out: dict[Fact, None] = {}
    for i, eq, fn, new, defined, bound in _program_forms(loaded.program):
        nest = loaded.top_nest_term(i)
        if defined:
            out[SYMPY_DEFINED(nest, eq, eq.value, new)] = None
        if bound:
            out[SYMPY_BOUNDED(nest, eq, eq.value, new)] = None
    return list(out)


SYMPY_DEFINED = Relation(
    "SympyDefined", ("Nest", "Eqn", "Expr", "Expr"),
    "{2} and {3} are defined for every finite input, compute the same "
    "exponentials, and {3} distributes no factor over a sum that may cancel")
SYMPY_BOUNDED = Relation(
    "SympyBounded", ("Nest", "Eqn", "Expr", "Expr"),
    "{2} and {3} are defined like that, read the same tensor elements, and no value either "
    "side computes is ever infinite")

DEFINED_VALUES = Guard(
    "defined_values",
    "Extra soundness guard (not one of the paper's nine): sympy's form is an identity of real "
    "numbers; it is a program rewrite when both sides are defined for every finite input "
    "(leir.ranges FINITE domain: every divisor provably non-zero, every logarithm argument "
    "positive, every square-root argument and base of a non-integer power non-negative) and "
    "both sides compute the same exponentials of tensor values (up to sympy's expansion of the "
    "argument): a new exponential can overflow where the original is finite (exp(x-m) -> "
    "exp(x)*exp(-m) gives inf*0), a removed one can hide the original's overflow; and the "
    "form does not distribute a factor over a sum whose terms may cancel ((F-O)**2 -> "
    "F**2-2*F*O+O**2 rounds at the scale of F**2, hundreds of ULPs of a small result).",
    "a side may divide by zero, take a logarithm or root outside its domain, the sides "
    "compute different exponentials of tensor values, or the form distributes a factor over "
    "a sum whose terms may cancel",
    relations=(SYMPY_DEFINED, SYMPY_BOUNDED),
    facts=_defined_facts)

GUARD_EXTENSIONS = (GuardExtension("defined_values", new_guard=DEFINED_VALUES),)

SYMPY_FORM = Relation(
    "SympyForm", ("Nest", "Eqn", "String", "Expr", "Expr"),
    "sympy's {2} turns the value {3} of {1} into {4}")

PARAMETER_SETS = (ParameterSet((
    SYMPY_FORM,
), _form_facts),)
