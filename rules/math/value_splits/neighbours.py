"""More splitting values for additive_split and multiplicative_split: values the equation does
not read yet, in the forms real LEIR data uses (``ExtraSplitBy`` facts).

* **the neighbouring element** of the split operand ``X_{s..,k}`` along its last dimension,
  or the split's identity at the first one::

      A_{tx,a}  ->  A_{tx,a}+if_then_else(a-1<0,0,A_{tx,a-1})-if_then_else(a-1<0,0,A_{tx,a-1})
      A_{tx,a}  ->  A_{tx,a}/if_then_else(a-1<0,1,A_{tx,a-1})*if_then_else(a-1<0,1,A_{tx,a-1})

  ``k-1`` is read only where it is >= 0, and ``k`` is in range there, so the read is too.
  Only operands evaluated whenever the equation is (not inside an if_then_else branch, whose
  condition may be what keeps ``k`` in range).
* **the result of an earlier nest with the same loops**, read at the subscripts it was
  written at (so every iteration reads an element that nest wrote), when no other nest writes
  that tensor and its subscripts use every index the equation's target uses::

      B^{4}_{tx}L^{8}_{a}[D_{tx,a}=..];B^{4}_{tx}L^{8}_{a}[C_{tx,a}=A_{tx,a}*2;]
        -> ..[C_{tx,a}=(A_{tx,a}+D_{tx,a}-D_{tx,a})*2;]

* **any defined element** (additive splits only), as the reference picks one: an element of an
  input, or of an intermediate that every one of its writing nests has finished (all of them
  come before this nest, so nothing changes it later), read at the equation's target
  subscripts or at a subscript form the program already uses for that tensor, in bounds for
  every iteration. An intermediate is read anywhere in its shape only when one of its writes
  covers the shape (``covers_shape``); otherwise only at a form it is written at, over loops
  no longer than the writer's::

      B^{4}_{tx}L^{8}_{a}[C_{tx,a}=A_{tx,a}/E_{tx,a};]   (G an input of shape [4,8])
        -> ..[C_{tx,a}=A_{tx,a}/(E_{tx,a}+G_{tx,a}-G_{tx,a});]

  The whole right-hand side of an equation that accumulates nothing is split the same way
  (``A+E`` -> ``A+E+G-G``), and by the neighbour of one of its reads (``E+A`` ->
  ``E+A+if_then_else(a-1<0,0,A_{tx,a-1})-if_then_else(..)``). An exponential's operand may be
  split by a defined element too ("exp"); the guard's ExpSafeOperand refuses one that is not
  provably small (an input of any size).

Soundness stays with the ``finite_operand`` guard, whose FiniteOperand / NonZeroOperand facts
are given here for these values too (leir.ranges, FINITE domain): the neighbour is finite
(non-zero) when the operand's tensor is, and its identity 0 (1) is; an earlier result is judged by
its tensor.
A value that may be zero never divides (``x/0*0`` is NaN), one that may be infinite is never
subtracted (``x+inf-inf`` is NaN).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Iterable

from leir_egraph.egraph.encoding import encode, encode_value
from leir_egraph.egraph.vocabulary import (Fact, GuardExtension, LoadedProgram, ParameterSet,
                                           Relation)
from leir_egraph.leir.analysis import (accesses, exploration_memo, memoized_as_spelled,
                                      program_shapes)
from leir_egraph.leir.ast import (Bin, Call, Compare, IBin, IConst, IfThenElse, IName, LoopNest,
                                  Neg, Num, Var)
from leir_egraph.leir.memory import covers_shape, has_gather, subscript_index_names
from leir_egraph.leir.ranges import ANY, point
from leir_egraph.leir.signature import is_float
from leir_egraph.leir.traverse import walk_values
from leir_egraph.leir.values import index_as_value
from .splits import (FINITE_OPERAND, NON_ZERO_OPERAND, _analysis, _flat_nests, operands,
                     split_sites, whole_value)

IDENTITY = {"add": "0", "mul": "1"}


def neighbour(x: Var, kind: str):
    """``if_then_else(k-1<0, identity, X_{..,k-1})`` for the read ``X_{..,k}``; ``None`` for
    a scalar, a gather, or a last subscript that cannot be used as a value."""
    if not x.subscripts or has_gather(x):
        return None
    last = IBin("-", x.subscripts[-1], IConst(1))
    try:
        cond = Compare((index_as_value(last), Num("0")), ("<",))
    except Exception:  # noqa: BLE001 -- floor division / modulo have no value form
        return None
    shifted = Var(x.name, x.dtype, x.scope, x.subscripts[:-1] + (last,))
    return IfThenElse(cond, Num(IDENTITY[kind]), shifted)


def _earlier_results(loaded: LoadedProgram):
    """``{nest position: [written var]}``: results of earlier nests with the same loops."""
    nests = list(loaded.program.leir.nests)
    writers: dict[str, list[int]] = {}
    for i, nest in enumerate(nests):
        for eq in nest.equations:
            writers.setdefault(eq.target.name, []).append(i)
    out: dict[int, list[Var]] = {}
    for i, nest in enumerate(nests):
        for j in range(i):
            if nests[j].loops != nest.loops:
                continue
            for eq in nests[j].equations:
                v = eq.target
                if (set(writers[v.name]) == {j} and is_float(v.dtype) and not has_gather(v)
                        and v not in out.get(i, ())):
                    out.setdefault(i, []).append(v)
    return out


def _defined_elements(loaded: LoadedProgram):
    """``(position, target subscripts) -> [Var]``: the defined elements (module docstring) an
    equation of top-level nest ``position`` with those target subscripts may be split by."""
    program = loaded.program
    nests = list(program.leir.nests)
    shapes = program_shapes(program)
    inputs = {t.name for t in program.signature.inputs}
    writes: dict[str, list[tuple[int, Var, LoopNest]]] = {}
    forms: dict[str, dict[tuple, Var]] = {}
    for i, nest in enumerate(nests):
        for eq in nest.equations:
            writes.setdefault(eq.target.name, []).append((i, eq.target, nest))
        for v in accesses(nest):
            if all(isinstance(s, (IName, IConst)) for s in v.subscripts):
                forms.setdefault(v.name, {}).setdefault(v.subscripts, v)
    covered = {name for name, ws in writes.items() if name in shapes
               and any(covers_shape(v, n.loops, shapes[name]) for _, v, n in ws)}
    # what each call below asks of a tensor, asked once per program: (name, prototype access,
    # last writing nest or None, readable anywhere in its shape, the subscript forms it is
    # read at, its writes' (subscripts, loop extents)), in name order, for the tensors that
    # may be a defined element at all (a float without a gather)
    tensors = []
    for name in sorted(shapes):
        ws = writes.get(name, [])
        proto = ws[0][1] if ws else next(iter(forms.get(name, {}).values()), None)
        if proto is None or has_gather(proto) or not is_float(proto.dtype):
            continue
        tensors.append((name, proto, max(i for i, _, _ in ws) if ws else None,
                        name in inputs or name in covered, name in inputs, list(forms.get(name, {})),
                        [(v.subscripts, {l.index: l.extent for l in n.loops}) for _, v, n in ws]))
    cache: dict[tuple, list[Var]] = {}

    def elements(position: int, target: Var) -> list[Var]:
        key = (position, target.subscripts)
        if key in cache:
            return cache[key]
        nest = nests[position]
        extent = {loop.index: loop.extent for loop in nest.loops}

        def in_bounds(subs, shape, limit=None) -> bool:
            return len(subs) == len(shape) and all(
                (s.value < size) if isinstance(s, IConst) else
                (s.name in extent and extent[s.name] <= size
                 and (limit is None or extent[s.name] <= limit.get(s.name, 0)))
                for s, size in zip(subs, shape))

        out: dict[Var, None] = {}
        for name, proto, last, anywhere, is_input, read_at, written_at in tensors:
            if not is_input and (last is None or last >= position):
                continue
            shape = shapes[name]
            for subs in (target.subscripts, *read_at):
                if not all(isinstance(s, (IName, IConst)) for s in subs):
                    continue
                if anywhere:
                    ok = in_bounds(subs, shape)
                else:  # only where one writer wrote it, over loops no longer than its own
                    ok = any(w == subs and in_bounds(subs, shape, limit)
                             for w, limit in written_at)
                if ok:
                    out[Var(name, proto.dtype, proto.scope, subs)] = None
        cache[key] = list(out)
        return cache[key]

    return elements


def _extra_parts(loaded: LoadedProgram) -> list[tuple]:
    """Per flat top-level nest, in order, ``(its rows, its ExtraSplitBy facts, its
    FiniteOperand / NonZeroOperand facts)``: a function of the nest term and of what
    :func:`_nest_parts` asks of the program around it, memoised per exploration on exactly
    that (``analysis.exploration_memo``: a depth-2 program differs from its parent in a nest
    or two)."""
    ranges = _analysis(loaded.program)
    earlier = _earlier_results(loaded)
    defined = _defined_elements(loaded)
    positions = {id(n): i for i, n in enumerate(loaded.program.leir.nests)}
    out = []
    for name, nest in _flat_nests(loaded):
        position = positions[id(nest)]

        def ask(question, position=position):
            what, about = question
            if what == "after":      # the range a tensor holds once the program ran
                return ranges.after.get(about, ANY)
            if what == "results":    # results of earlier nests with the same loops
                return earlier.get(position, [])
            if what == "elements":   # defined elements for these target subscripts
                return defined(position, about)
            return whole_value(loaded.program, about)   # "whole": split the whole value

        out.append(exploration_memo("value_splits.extra", name, ask,
                                    lambda ask, name=name, nest=nest:
                                    _nest_parts(name, nest, ask)))
    return out


def _nest_parts(name, nest, ask) -> tuple:
    """One flat top-level nest's part of :func:`_extra_parts`, asking ``ask`` what it needs
    of the program around the nest."""
    rows = tuple(_nest_rows(name, nest, ask))
    split: dict[Fact, None] = {}
    finite: dict[Fact, None] = {}
    # the same value objects come back for every read and kind they split: each is made into
    # facts once (the objects are held by the rows, so their ids are theirs)
    seen: set[tuple] = set()
    for _, eq, x, m, kind, spans in rows:
        split[EXTRA_SPLIT_BY(name, eq, x, m, kind)] = None
        if all(s.real for s in spans):
            nonzero = all(s.nonzero for s in spans)
            key = (id(m), nonzero)
            if key in seen:
                continue
            seen.add(key)
            finite[FINITE_OPERAND(name, m)] = None
            if nonzero:
                finite[NON_ZERO_OPERAND(name, m)] = None
    return rows, tuple(split), tuple(finite)


def _nest_rows(name, nest, ask):
    """``(name, eq, site, m, "add" | "mul" | "exp", spans of m)`` for every extra splitting
    value of a split of that kind in the flat top-level nest ``name`` ("exp":
    exponential_split's, the add-form neighbour and earlier results the equation already
    reads); m is one of the values ``spans`` describe."""
    written = {eq.target.name for eq in nest.equations}
    results = ask(("results", None))
    for eq in nest.equations:
        if not is_float(eq.target.dtype):
            continue
        target_names = subscript_index_names(eq.target.subscripts)
        reads = _evaluated_reads(eq)
        # exponential_split splits exp(x), exp(x+r), exp(x-r) and exp(-x) of a read x: only
        # those reads get "exp" values (most equations have no exponential at all)
        in_exp = _exponent_reads(eq)
        for x in reads:
            known = ANY if x.name in written else ask(("after", x.name))
            kinds = ("add", "mul", "exp") if x in in_exp else ("add", "mul")
            for kind in ("add", "mul"):
                m = neighbour(x, kind)
                if m is not None:
                    # the value is x's neighbour or the identity (0 or 1)
                    spans = (known, point(float(IDENTITY[kind])))
                    for k in (("add", "exp") if kind == "add" else ("mul",)):
                        if k in kinds:
                            yield name, eq, x, m, k, spans
            for v in results:
                # v may be x itself: x+x-x and x/x*x are x for a finite (non-zero) x
                if (v.name not in written
                        and target_names <= subscript_index_names(v.subscripts)):
                    for kind in kinds:
                        yield name, eq, x, v, kind, (ask(("after", v.name)),)
        elements = ask(("elements", eq.target))
        whole = (eq.value,) if ask(("whole", eq)) else ()
        for x in (*reads, *whole):
            for v in elements:
                yield name, eq, x, v, "add", (ask(("after", v.name)),)
        for x in reads:
            if x not in in_exp:
                continue
            # an exponential of x split by a defined element (exp(x-m)*exp(m)): offered,
            # and refused by ExpSafeOperand unless the element is small in magnitude
            for v in elements:
                yield name, eq, x, v, "exp", (ask(("after", v.name)),)
        for v in whole:
            # the whole value split by the neighbour of one of its reads, v+n-n
            for x in reads:
                m = neighbour(x, "add")
                if m is not None:
                    known = ANY if x.name in written else ask(("after", x.name))
                    yield name, eq, v, m, "add", (known, point(0.0))


@lru_cache(maxsize=16)
def _extra_of(program) -> tuple:
    """``_extra_parts`` of a program, computed once for the fact producers below."""
    return tuple(_extra_parts(LoadedProgram(program)))


def _split_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    return list(dict.fromkeys(f for _, split, _ in _extra_of(loaded.program) for f in split))


def _finite_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    return list(dict.fromkeys(f for _, _, finite in _extra_of(loaded.program) for f in finite))


# The largest |value| ExpSafeOperand admits in any dtype (``_exp_facts``): a split argument
# a-m is then at most 40, whose rounding exp turns into at most 32 ULPs (exponential_split's
# declared 36 ulp: those and the roundings of the two exponentials and their product).
SPLIT_BOUND = 20.0


def _exp_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    """``ExpSafeOperand n e m``: splitting any exponential of ``e`` by ``m`` keeps every factor
    a normal number wherever the original exponential is one. The FLOAT range analysis
    (intervals: inputs of any size; every value a tensor ever holds) bounds the numbers of m,
    of the argument of every exponential of the equation and of that argument's operands (x
    and r of x-r, x+r, -x) within half the dtype's exp range and at most ``SPLIT_BOUND``
    (|.| <= 20 in f32 and f64, 2 in f16); every split argument (a-m, x-m, m-r, m+r, r-m, m) is
    then within exp_arg (40 in f32), where exponentials, their products and quotients stay
    normal. The cap keeps the rounding bound the rule file declares in every dtype: the new
    difference a-m (|a-m| <= 40) rounds by half an ULP of 40, 2^-19 in f32, which exp turns
    into a relative error of up to 32 ULPs of the result -- and of 2^-48, again 32 ULPs, in f64,
    where half the exp range (170) would allow 256.

    Nothing weaker holds: exp(x-r) split by a value the equation reads anyway, or by x's
    neighbour, overflows at large inputs where the original does not (TransformerSeq2Seq's
    attention: exp(Cn-Hd) -> exp(Cn-Hd-Cn)*exp(Cn) is NaN where exp(Cn) overflows, found by a
    verified sample), as does Mish's exp(H)+exp(-H) split by a cosh-like result."""
    from leir_egraph.egraph.extensions.math_ranges import analyse_ranges
    from leir_egraph.leir.ranges import format_of
    made: list = []   # the analysis, made only for a program with an exponential to split

    def small(node, half: float) -> bool:
        # the magnitude of the numbers it may hold; a NaN input gives NaN on both sides alike
        # (finite_operand's FiniteOperand keeps m itself from being NaN)
        if not made:
            made.append(analyse_ranges(loaded.program))
        analysis = made[0]
        if isinstance(node, Var):
            span = analysis.tensors.get(node.name, ANY)
        elif isinstance(node, Num):
            return abs(float(node.value)) <= half
        else:
            span = analysis.values.get(encode_value(node), ANY)
        return not span.empty and -half <= span.lo and span.hi <= half

    def read_small(m, half: float) -> bool:
        # a splitting value: a read, or a neighbour if_then_else(k-1<0,0,X_{..,k-1})
        if isinstance(m, Var):
            return small(m, half)
        return all(small(v, half) for v in walk_values(m) if isinstance(v, (Var, Num)))

    extra: dict[tuple, list] = {}
    for rows, _, _ in _extra_of(loaded.program):
        for name, eq, _, m, kind, _ in rows:
            if kind == "exp":
                extra.setdefault((name, eq), []).append(m)
    out: dict[Fact, None] = {}
    for name, nest in _flat_nests(loaded):
        for eq in nest.equations:
            if not is_float(eq.target.dtype):
                continue
            half = min(format_of(eq.target.dtype).exp_arg / 2, SPLIT_BOUND)
            parts = _exponent_parts(eq)
            if not parts or not all(small(p, half) for p in parts):
                continue
            e = encode(eq)
            for m in (*split_sites(eq)[1], *extra.get((name, eq), ())):
                if read_small(m, half):
                    out[EXP_SAFE_OPERAND(name, e, m)] = None
    return list(out)


def _operands_of(argument) -> tuple:
    """The operands an exponential's argument is split between: x and r of x-r or x+r, x of -x."""
    if isinstance(argument, Bin) and argument.op in ("+", "-"):
        return (argument.lhs, argument.rhs)
    if isinstance(argument, Neg):
        return (argument.operand,)
    return ()


@lru_cache(maxsize=1024)
def _exponent_parts(eq) -> tuple:
    """The argument of every exponential of ``eq`` and the operands it is split between (x and
    r of ``exp(x-r)``, ``exp(x+r)``; x of ``exp(-x)``), in order; empty without an exponential."""
    return tuple(p for node in walk_values(eq.value) if isinstance(node, Call) and node.fn == "exp"
                 for p in (node.args[0], *_operands_of(node.args[0])))


def _exponent_reads(eq) -> frozenset:
    """The reads among ``_exponent_parts``: the ``x`` of ``exp(x)``, ``exp(x+r)``, ``exp(x-r)``
    (and ``r``) and ``exp(-x)``, which exponential_split may split."""
    return frozenset(p for p in _exponent_parts(eq) if isinstance(p, Var))


@memoized_as_spelled(1024)   # the reads go into facts
def _evaluated_reads(eq) -> dict:
    """The reads of ``eq`` evaluated whenever it is (not in a branch or a condition), other than
    of its own target, in order (the rules still ask SplitSite of what they rewrite;
    exp(x)+exp(-x) reads x twice, each exp is a site)."""
    return dict.fromkeys(op.node for op in operands(eq.value)
                         if isinstance(op.node, Var) and not op.branch
                         and not op.condition and op.node.name != eq.target.name)


EXP_SAFE_OPERAND = Relation(
    "ExpSafeOperand", ("Nest", "Eqn", "Expr"),
    "{2} and the arguments of {1}'s exponentials and their operands are at most "
    "half the exp range in magnitude wherever they are evaluated (any inputs), so "
    "every exponential of the split stays a normal number")

GUARD_EXTENSIONS = (
    GuardExtension("finite_operand", facts=_finite_facts),
    GuardExtension("finite_operand", relations=(
        EXP_SAFE_OPERAND,),
        facts=_exp_facts),
)

EXTRA_SPLIT_BY = Relation(
    "ExtraSplitBy", ("Nest", "Eqn", "Expr", "Expr", "String"),
    "{3} is defined wherever {1} is evaluated (for a split by '{4}'): the neighbour of "
    "{2} (or, for a whole value, of one of its reads) along its last dimension (the "
    "split's identity before the first), a result "
    "of an earlier nest with the same loops read where it was written, or an element "
    "of an input or of a finished earlier result, in bounds")

PARAMETER_SETS = (ParameterSet((
    EXTRA_SPLIT_BY,
), _split_facts),)
