"""Static validation of LEIR programs: every rule of docs/LEIR.md a program can break before it
runs, reported with line:column, the offending text and what was expected.

``check(program)`` raises :class:`LeirValidationError` listing every problem;
``problems(program)`` returns them as :class:`Problem` values.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from .analysis import (EquationSite, accesses, accumulation_op, equation_reads, equation_sites,
                       guarded_accesses, index_range, intermediate_shapes, written_extent)
from .ast import Compare, IfThenElse, Leir, Logic, LoopNest, Var
from .printer import to_text
from .program import Program
from .signature import dtype_code
from .traverse import walk


@dataclass(frozen=True)
class Problem:
    """One validation finding."""
    message: str
    line: int | None = None
    column: int | None = None
    severity: str = "error"  # "error" makes the program invalid; "warning" does not

    def render(self, filename: str = "<leir>") -> str:
        """``FILE:line:col: message`` (``FILE: message`` for a program-wide finding)."""
        where = f"{filename}:{self.line}:{self.column}" if self.line is not None else filename
        prefix = "warning: " if self.severity == "warning" else ""
        return f"{where}: {prefix}{self.message}"


class LeirValidationError(ValueError):
    """A program that parses but breaks a rule of the language; ``problems`` lists them all."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        first = problems[0]
        self.line, self.column, self.message = first.line, first.column, first.message
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        where = f"{first.line}:{first.column}: " if first.line is not None else ""
        super().__init__(f"{where}{first.message}{more}")

    def render(self, filename: str = "<leir>") -> str:
        return "\n".join(p.render(filename) for p in self.problems)


def check(program: Program) -> list[Problem]:
    """Raise :class:`LeirValidationError` if the program breaks any rule; return the warnings."""
    found = problems(program)
    errors = [p for p in found if p.severity == "error"]
    if errors:
        raise LeirValidationError(errors)
    return found


# Validation is a pure function of the AST and the signature, and the same program object is
# checked many times on its way through lowering and verification (each build variant of a
# verified transition checks it again): the findings of the most recent ASTs are kept, keyed by
# the AST object itself (held here, so its id is not reused while it is a key).
_MEMO: "OrderedDict[int, tuple[Any, str, tuple[Problem, ...]]]" = OrderedDict()
_MEMO_SIZE = 64


def problems(program: Program) -> list[Problem]:
    """Every finding for ``program`` (errors and warnings), in order of discovery."""
    signature = program.signature.to_json()
    hit = _MEMO.get(id(program.leir))
    if hit is not None and hit[0] is program.leir and hit[1] == signature:
        _MEMO.move_to_end(id(program.leir))
        return list(hit[2])
    found = _problems(program)
    _MEMO[id(program.leir)] = (program.leir, signature, tuple(found))
    while len(_MEMO) > _MEMO_SIZE:
        _MEMO.popitem(last=False)
    return found


def _problems(program: Program) -> list[Problem]:
    out: list[Problem] = []
    _check_loops(program.leir, out)
    sites = equation_sites(program.leir)
    _check_bound_indices(sites, out)
    _check_consistency(program, out)
    _check_dataflow(program, sites, out)
    if not any(p.severity == "error" for p in out):  # ranges need a structurally sound program
        _check_ranges(program, sites, out)
        _check_outputs_covered(program, sites, out)
    return out


def _at(node, message: str) -> Problem:
    pos = getattr(node, "pos", None)
    return Problem(message, *(pos if pos else (None, None)))


def _quote(node) -> str:
    text = to_text(node)
    return f"'{text if len(text) <= 60 else text[:57] + '...'}'"


# ---------------------------------------------------------------- loops and indices

def _check_loops(leir: Leir, out: list[Problem]) -> None:
    # nests with the index names bound around them, in textual order (no recursion: nests can
    # be nested deeply)
    stack: list[tuple[LoopNest, tuple[str, ...]]] = [(n, ()) for n in reversed(leir.nests)]
    while stack:
        nest, enclosing = stack.pop()
        names = list(enclosing)
        for loop in nest.loops:
            bound_name = loop.index[0] in "tb"
            if loop.kind == "B" and not bound_name:
                out.append(_at(loop, f"B loop index '{loop.index}' must be a GPU binding name "
                                     "(tx, ty, tz, bx, by, bz, optionally followed by lowercase "
                                     "letters, e.g. 'bya')"))
            if loop.kind != "B" and bound_name:
                out.append(_at(loop, f"index '{loop.index}' is a GPU binding name but its loop "
                                     f"is {loop.kind}; binding names belong to B loops"))
            if loop.index in names:
                out.append(_at(loop, f"index '{loop.index}' is already bound by an enclosing "
                                     "loop of this nest"))
            names.append(loop.index)
        stack.extend((item, tuple(names)) for item in reversed(nest.body)
                     if isinstance(item, LoopNest))


def _check_bound_indices(sites: list[EquationSite], out: list[Problem]) -> None:
    for site in sites:
        bound = {l.index for l in site.loops}
        for node in walk(site.equation):
            name = getattr(node, "name", None)
            if type(node).__name__ in ("IName", "Idx") and name not in bound:
                out.append(_at(node, f"index '{name}' is not bound by any enclosing loop "
                                     f"(bound here: {', '.join(sorted(bound)) or 'none'})"))
        for node in walk(site.equation.value):
            if isinstance(node, IfThenElse) and not _is_condition(node.cond):
                out.append(_at(site.equation, f"if_then_else condition {_quote(node.cond)} is not "
                                              "a comparison, a &/| of comparisons or a bool tensor"))
            if isinstance(node, Logic):
                for part in (node.lhs, node.rhs):
                    if not _is_condition(part):
                        out.append(_at(site.equation, f"operand {_quote(part)} of '{node.op}' is "
                                                      "not a condition"))


def _is_condition(expr) -> bool:
    return isinstance(expr, (Compare, Logic)) or (isinstance(expr, Var) and expr.dtype == "bool")


# ---------------------------------------------------------------- tensors against the signature

def _check_consistency(program: Program, out: list[Problem]) -> None:
    sig = program.signature
    first: dict[str, Var] = {}
    for var in accesses(program.leir):
        spec = sig.spec(var.name)
        if var.subscripts == () and var.empty_subscript and (spec is None or spec.shape):
            out.append(_at(var, f"{_quote(var)} has an empty subscript list; a tensor of rank "
                                f"{len(spec.shape) if spec else '>= 1'} needs "
                                f"{len(spec.shape) if spec else 'its'} subscripts"))
            continue
        if spec is not None:
            if len(spec.shape) != var.rank:
                out.append(_at(var, f"{_quote(var)} uses {var.rank} subscript(s) but the signature "
                                    f"gives '{var.name}' rank {len(spec.shape)} "
                                    f"(shape {list(spec.shape)})"))
            if dtype_code(spec.dtype) != var.dtype:
                out.append(_at(var, f"{_quote(var)} has dtype {var.dtype} but the signature says "
                                    f"{spec.dtype} ({dtype_code(spec.dtype)})"))
            if var.scope != "g":
                out.append(_at(var, f"known tensor '{var.name}' must live in global memory "
                                    f"(scope g), found scope {var.scope}"))
            continue
        seen = first.setdefault(var.name, var)
        if seen is var:
            continue
        if (seen.dtype, seen.scope) != (var.dtype, var.scope):
            out.append(_at(var, f"intermediate '{var.name}' is ^{{{var.dtype},{var.scope}}} here "
                                f"but ^{{{seen.dtype},{seen.scope}}} at "
                                f"{_where(seen)}; every occurrence must agree"))
        if seen.rank != var.rank:
            out.append(_at(var, f"intermediate '{var.name}' has {var.rank} subscript(s) here but "
                                f"{seen.rank} at {_where(seen)}"))
    for var in accesses(program.leir):
        for sub in var.subscripts:
            for gather in accesses(sub):
                if gather.dtype not in ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"):
                    out.append(_at(gather, f"gather index {_quote(gather)} must have an integer "
                                           f"dtype, not {gather.dtype}"))


def _where(var: Var) -> str:
    return f"{var.pos[0]}:{var.pos[1]}" if var.pos else "an earlier occurrence"


def _check_dataflow(program: Program, sites: list[EquationSite], out: list[Problem]) -> None:
    sig = program.signature
    inputs = set(sig.input_names)
    written: set[str] = set()
    all_writes = {s.equation.target.name for s in sites}
    for site in sites:
        eq = site.equation
        target = eq.target
        if target.name in inputs:
            out.append(_at(target, f"input '{target.name}' is written; inputs are read-only "
                                   "(write to an intermediate instead)"))
        for var in equation_reads(eq):
            name = var.name
            if name in inputs or name in written:
                continue
            if name == target.name:
                if var == target and accumulation_op(eq) is None:
                    # the element itself, before anything wrote it: not an accumulation form
                    out.append(_at(var, f"'{name}' is read before any equation writes it: "
                                        f"{_quote(eq)} is not an accumulation form (X=X+e, "
                                        "X=X-e, X=X*e, X=max(X,e), X=min(X,e)); parenthesise "
                                        "the accumulated term, e.g. X=X+(a-b)"))
                continue  # accumulation with implicit init, or a scan reading earlier elements
            if name not in all_writes and sig.spec(name) is None:
                out.append(_at(var, f"tensor '{name}' is neither in the signature nor written by "
                                    "any equation"))
            else:
                kind = "output" if name in sig.output_names else "intermediate"
                out.append(_at(var, f"{kind} '{name}' is read before any equation writes it"))
        written.add(target.name)
    present = {v.name for v in accesses(program.leir)}
    for spec in sig.inputs:
        if spec.name not in present:
            # Translated modules often carry parameters the computation never reads; an unused
            # input is reported but does not make the program invalid.
            out.append(Problem(f"known input '{spec.name}' does not occur in the program",
                               severity="warning"))
    for spec in sig.outputs:
        if spec.name not in all_writes:
            out.append(Problem(f"output '{spec.name}' is never written by the program"))


# ---------------------------------------------------------------- static bounds

def _check_ranges(program: Program, sites: list[EquationSite], out: list[Problem]) -> None:
    sig = program.signature
    shapes = {t.name: t.shape for t in sig.tensors}
    inter = intermediate_shapes(program.leir, set(shapes))
    for name in {s.equation.target.name for s in sites} - set(shapes):
        if name not in inter:
            var = next(s.equation.target for s in sites if s.equation.target.name == name)
            out.append(_at(var, f"cannot infer the shape of intermediate '{name}': a written "
                                "subscript is not bounded by the loops (gather in a write?)"))
    shapes.update(inter)
    for site in sites:
        for access in guarded_accesses(site):
            var = access.var
            shape = shapes.get(var.name)
            if shape is None or len(shape) != var.rank:
                continue
            for dim, (sub, size) in enumerate(zip(var.subscripts, shape)):
                r = index_range(sub, access.env)
                if r is None:
                    continue  # gathers: the value is only known at run time
                if r[0] < 0 or r[1] >= size:
                    verb = "writes" if access.is_write else "reads"
                    out.append(_at(var, f"{_quote(var)} {verb} index {r[0]}..{r[1]} in dimension "
                                        f"{dim} of '{var.name}', whose size is {size} "
                                        f"(valid: 0..{size - 1})"))


def _check_outputs_covered(program: Program, sites: list[EquationSite],
                           out: list[Problem]) -> None:
    """An output whose signature shape is larger than anything the program writes would come
    back with elements no equation ever sets. Only the largest written position per dimension
    is compared (a hole inside the written range is not detected)."""
    for spec in program.signature.outputs:
        extent = written_extent(program.leir, spec.name)
        if extent is None or len(extent) != len(spec.shape):
            continue  # never written (reported above), or a gather in a write
        for dim, (wrote, size) in enumerate(zip(extent, spec.shape)):
            if wrote < size:
                target = next(s.equation.target for s in sites
                              if s.equation.target.name == spec.name)
                out.append(_at(target, f"output '{spec.name}' has shape {list(spec.shape)} but "
                                       f"the program writes only positions 0..{wrote - 1} of "
                                       f"dimension {dim}; positions {wrote}..{size - 1} would "
                                       "never be written"))
                break
