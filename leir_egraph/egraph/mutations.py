"""Program mutations for the soundness check (``soundcheck``): the programs a rule is tried on
beyond its author's examples, each a valid LEIR program (docs/RULES.md section 10).

Every mutation is labelled with its *kind* (``KINDS``):

* ``dtype``: every float tensor in f16, f32 and f64;
* ``literal``: every literal replaced (a third of it, 1e30, its negation minus 0.5);
* ``extent``: one loop extent value replaced everywhere it occurs (loops and the signature's
  dimensions of that size) by 1 or by a prime;
* ``loop_kind``: one loop's kind changed among L, U, P, V, B -- P, V and B only where the loop's
  iterations are independent (the claim those kinds make, docs/LEIR.md section 3), the index
  renamed where B's binding-name convention requires it;
* ``neighbour``: a nest added before or after a nest that touches the same tensor: a reader of
  what it writes (into a fresh output), an overwrite of it after it, or a writer of it before it
  (an accumulation then no longer starts from its implicit identity);
* ``twice``: a nest repeated after itself, verbatim and with what it writes renamed to fresh
  outputs (the other occurrences a pattern can match, in another context).

Each candidate is printed, parsed back and validated (``leir.validate.check``); one that does
not parse or validate is dropped, never tried. Which candidates of a kind are kept is drawn
from ``seed`` (``random.Random``), so the same program and seed give the same mutations.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Callable

from ..leir.analysis import intermediate_shapes
from ..leir.ast import Equation, Idx, IName, Leir, Loop, LoopNest, Num, Var
from ..leir.legality import independent_iterations
from ..leir.parser import parse
from ..leir.printer import to_text
from ..leir.program import Program
from ..leir.signature import Signature
from ..leir.traverse import rebuild, walk
from ..leir.validate import check
from ..verify.soundness import FLOAT_CODES, with_float_dtype

KINDS = ("dtype", "literal", "extent", "loop_kind", "neighbour", "twice")

# each literal L becomes one of these (a mutation per entry)
LITERAL_MUTATIONS = (("a third", lambda v: v / 3), ("1e30", lambda v: 1e30),
                     ("negated", lambda v: -v - 0.5))
# the values an extent may take: 1 (a loop that runs once) and primes (no factor to split by)
EXTENTS = (1, 2, 3, 5, 7, 11, 13)
LOOP_KINDS = ("L", "U", "P", "V", "B")
# loop kinds that claim independent iterations (docs/LEIR.md section 3)
CLAIMING = frozenset("PVB")
# at most this many mutations of one kind are kept per program
PER_KIND = 4

Mutation = tuple[str, str, Program]   # (kind, label, program)


def valid(program: Program) -> Program | None:
    """``program`` printed, parsed back and validated, or None if any of that fails."""
    try:
        again = Program(parse(program.text), program.signature, program.name, program.values)
        check(again)
    except ValueError:   # LeirSyntaxError, LeirValidationError
        return None
    return again


def mutations(program: Program, seed: int = 0, kinds=KINDS) -> list[Mutation]:
    """The valid mutations of ``program`` of the given ``kinds``, in a fixed order: at most
    ``PER_KIND`` per kind, chosen by ``seed``."""
    rng = random.Random(seed)
    out: list[Mutation] = []
    for kind in KINDS:
        if kind not in kinds:
            continue
        found = []
        for label, candidate in _MAKERS[kind](program, rng):
            kept = valid(candidate) if candidate is not None else None
            if kept is not None and kept != program:
                found.append((kind, label, kept))
        if len(found) > PER_KIND:
            found = rng.sample(found, PER_KIND)
        out += found
    return out


# ---------------------------------------------------------------- dtypes and literals

def _dtypes(program: Program, rng: random.Random):
    codes = {v.dtype for v in walk(program.leir) if isinstance(v, Var)} & set(FLOAT_CODES)
    if not codes:
        return
    for code in ("f16", "f32", "f64"):
        if codes != {code}:
            yield f"in {code}", with_float_dtype(program, code)


def _literals(program: Program, rng: random.Random):
    for label, change in LITERAL_MUTATIONS:
        changed = False

        def swap(node, change=change):
            nonlocal changed
            if isinstance(node, Num) and node.text not in ("inf", "-inf", "nan"):
                changed = True
                return replace(node, text=repr(float(change(float(node.text)))))
            return None

        leir = rebuild(program.leir, swap)
        if changed:
            yield f"literals {label}", program.with_leir(leir)


# ---------------------------------------------------------------- extents

def _extents(program: Program, rng: random.Random):
    if program.values:      # stored constants keep their shapes
        return
    present = sorted({n.extent for n in walk(program.leir) if isinstance(n, Loop)} - {1})
    for old in present:
        choices = [e for e in EXTENTS if e != old]
        for new in sorted({1, rng.choice(choices[1:])}):
            leir = rebuild(program.leir, lambda n, old=old, new=new: (
                replace(n, extent=new) if isinstance(n, Loop) and n.extent == old else None))
            sig = program.signature.to_dict()
            for spec in sig["inputs"] + sig["outputs"]:
                spec["shape"] = [new if d == old else d for d in spec["shape"]]
            yield (f"extent {old} -> {new}",
                   Program(leir, Signature.from_dict(sig), program.name))


# ---------------------------------------------------------------- loop kinds

def _fresh_index(used: set[str], binding: bool) -> str:
    names = (["tx", "ty", "tz", "bx", "by", "bz"] + [f"tx{c}" for c in "abcdefgh"] if binding
             else list("ijkmnpqrsuvw") + [f"i{c}" for c in "abcdefgh"])
    return next(n for n in names if n not in used)


def _rename_index(nest: LoopNest, old: str, new: str) -> LoopNest:
    def fn(node):
        if isinstance(node, IName) and node.name == old:
            return replace(node, name=new)
        if isinstance(node, Idx) and node.name == old:
            return replace(node, name=new)
        if isinstance(node, Loop) and node.index == old:
            return replace(node, index=new)
        return None
    return rebuild(nest, fn)


def _loop_kinds(program: Program, rng: random.Random):
    nests = program.leir.nests
    used = {n.index for n in walk(program.leir) if isinstance(n, Loop)}
    for at, nest in enumerate(nests):
        for k, loop in enumerate(nest.loops):
            for kind in LOOP_KINDS:
                if kind == loop.kind:
                    continue
                if kind in CLAIMING and not independent_iterations(nest, loop.index):
                    continue
                changed = replace(nest, loops=tuple(replace(l, kind=kind) if j == k else l
                                                    for j, l in enumerate(nest.loops)))
                binding = kind == "B"
                if binding != (loop.index[0] in "tb"):
                    changed = _rename_index(changed, loop.index, _fresh_index(used, binding))
                leir = Leir(nests[:at] + (changed,) + nests[at + 1:])
                yield f"nest {at} loop '{loop.index}' {loop.kind} -> {kind}", \
                    program.with_leir(leir)


# ---------------------------------------------------------------- neighbouring nests

def _fresh_tensor(program: Program, taken: set[str]) -> str:
    used = {v.name for v in walk(program.leir) if isinstance(v, Var)} | \
        set(program.signature.names) | taken
    return next(n for n in ("Q", "R", "S", "W", "X", "Y", "Z", "QA", "QB", "QC", "QD")
                if n not in used)


def _shapes(program: Program) -> dict[str, tuple[int, ...]]:
    shapes = {t.name: tuple(t.shape) for t in program.signature.tensors}
    shapes.update(intermediate_shapes(program.leir, set(shapes)))
    return shapes


def _with_outputs(program: Program, leir_text: str, added: list[tuple[str, str, tuple]]
                  ) -> Program | None:
    """A program of ``leir_text`` whose signature also has the outputs ``added``
    ((name, dtype code, shape) each); None if a text does not parse (a dropped mutation)."""
    sig = program.signature.to_dict()
    for name, code, shape in added:
        sig["outputs"].append({"name": name, "dtype": FLOAT_CODES.get(code, code),
                               "shape": list(shape)})
    try:
        return Program(parse(leir_text), Signature.from_dict(sig), program.name,
                       program.values)
    except ValueError:
        return None


def _target_nest(nest: LoopNest, target: Var) -> str | None:
    """The loops of ``nest`` that ``target``'s subscripts use, as LEIR loop text, or None
    when the target is written inside an inner nest (its indices are not all bound here)."""
    names = {n.name for s in target.subscripts for n in walk(s) if isinstance(n, IName)}
    loops = [l for l in nest.loops if l.index in names]
    if names - {l.index for l in loops}:
        return None
    return "".join(to_text(l) for l in loops)


def _nest_context(program: Program):
    """The top-level nests, their texts, every tensor's shape and the input names."""
    nests = program.leir.nests
    return (nests, [to_text(n) for n in nests], _shapes(program),
            set(program.signature.input_names))


def _neighbours(program: Program, rng: random.Random):
    nests, texts, shapes, inputs = _nest_context(program)
    for at, nest in enumerate(nests):
        targets = {}
        for eq in nest.equations:
            targets.setdefault(eq.target.name, eq.target)
        for name, target in targets.items():
            loops = _target_nest(nest, target)
            if loops is None or name in inputs or name not in shapes:
                continue
            read = to_text(target)
            fresh = _fresh_tensor(program, set())
            out = to_text(replace(target, name=fresh))
            reader = f"{loops}[{out}={read}*3;];"
            overwrite = f"{loops}[{read}={read}*2;];"
            writer = f"{loops}[{read}=1.5;];"
            for label, where, extra, added in (
                    (f"a reader of {name} after nest {at}", at + 1, reader,
                     [(fresh, target.dtype, shapes[name])]),
                    (f"an overwrite of {name} after nest {at}", at + 1, overwrite, []),
                    (f"a writer of {name} before nest {at}", at, writer, [])):
                text = "".join(texts[:where] + [extra] + texts[where:])
                yield label, _with_outputs(program, text, added)


# ---------------------------------------------------------------- the same nest twice

def _twice(program: Program, rng: random.Random):
    nests, texts, shapes, inputs = _nest_context(program)
    for at, nest in enumerate(nests):
        yield (f"nest {at} twice", program.with_leir(Leir(nests[:at + 1] + nests[at:])))
        written = {v.target.name: v.target.dtype for v in walk(nest) if isinstance(v, Equation)}
        if set(written) & inputs or not set(written) <= set(shapes):
            continue
        taken: set[str] = set()
        names = {}
        for name in sorted(written):
            names[name] = _fresh_tensor(program, taken)
            taken.add(names[name])
        copy = rebuild(nest, lambda n: replace(n, name=names[n.name])
                       if isinstance(n, Var) and n.name in names else None)
        text = "".join(texts[:at + 1] + [to_text(copy)] + texts[at + 1:])
        added = [(names[n], written[n], shapes[n]) for n in sorted(written)]
        yield (f"nest {at} twice, the copy writing {', '.join(names[n] for n in sorted(names))}",
               _with_outputs(program, text, added))


_MAKERS: dict[str, Callable] = {"dtype": _dtypes, "literal": _literals, "extent": _extents,
                                "loop_kind": _loop_kinds, "neighbour": _neighbours,
                                "twice": _twice}
