"""Cutting a program into segments: runs of consecutive top-level nests that are lowered and
compiled as functions of their own, so that compile time grows linearly with the number of
nests and a nest compiled once is reused by every program (and every place in one program)
that contains it again.

A segment is written in canonical names (``leir/canonical.py``: tensors ``A C D ...`` and
loop indices in order of first appearance), so two runs of nests that differ only in the names
of their tensors -- the repeated blocks of a network, or a rewritten program that left most of
its nests alone -- are one segment with one key::

    L^{4}_{a=0}[X^{f32,g}_{a}=A^{f32,g}_{a}*2;];     segment 1: L^{4}_{a=0}[C_{a}=A_{a}*2;]
    L^{4}_{a=0}[C^{f32,g}_{a}=X^{f32,g}_{a}+1;];     segment 2: L^{4}_{a=0}[C_{a}=A_{a}+1;]
                                                     driver: alloc X; seg1(A, X); seg2(X, C)

An intermediate that only one segment uses is allocated inside it; one that crosses segments is
allocated by the driver (right before the segment that writes it first) and passed in. The
implicit initialisations and the NaN poisoning of intermediates happen where the whole-program
lowering does them: right before the nest that needs them.

Pure: no TVM. ``lower/tir.py`` lowers a segment; ``lower/link.py`` compiles and links them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from ..leir.analysis import tensor_names
from ..leir.ast import Leir
from ..leir.canonical import canonical_renaming
from ..leir.printer import to_text
from ..leir.program import Program
from .placement import Plan, plan

# Segment boundaries are content-defined (docs/ARCHITECTURE.md, "Lowering at network scale"):
# a segment ends after a nest whose canonical text hashes to the smallest value among the
# nests within WINDOW positions on either side (all of them on a tie), or after MAX_NESTS
# nests without such a cut. The decision looks only at the nests nearby, so a rewrite that
# changes, adds or removes a nest moves only the boundaries next to it, and repeated blocks
# are cut the same way every time (about one segment per 2*WINDOW-1 nests on varied code).
WINDOW = 4
MAX_NESTS = 24

Spec = tuple[str, tuple[int, ...], str]  # (name, shape, TVM dtype)


@dataclass(frozen=True)
class Segment:
    """Consecutive top-level nests as one function, in canonical names.

    ``params`` are the buffers the function takes (in call order), ``locals`` the intermediates
    it allocates itself, each before the nest at position ``pos`` of ``leir`` (with the
    buffer's spec); ``inits`` the implicit initialisations ``(pos, name, op)``; ``poisoned``
    the parameters first written here, ``(pos, name)``, which a ``poison`` build fills with NaN
    before that nest (locals are poisoned when allocated)."""
    leir: Leir
    params: tuple[Spec, ...]
    locals: tuple[tuple[int, Spec], ...]
    inits: tuple[tuple[int, str, str], ...]
    poisoned: tuple[tuple[int, str], ...]

    @property
    def key(self) -> str:
        """A digest of everything the compiled function depends on (target and lowering
        options are added by the caller)."""
        text = repr((to_text(self.leir), self.params, self.locals, self.inits, self.poisoned))
        return hashlib.sha256(text.encode()).hexdigest()

    def shapes(self) -> dict[str, tuple[int, ...]]:
        return {name: shape for name, shape, _ in self.params + tuple(s for _, s in self.locals)}

    def dtypes(self) -> dict[str, str]:
        return {name: dtype for name, _, dtype in self.params + tuple(s for _, s in self.locals)}


@dataclass(frozen=True)
class Partition:
    """A program as segments and a driver: ``arguments[k]`` are the program's tensors passed
    to segment ``k`` (in its parameter order); ``allocations[k]`` the intermediates the driver
    allocates right before calling segment ``k``."""
    segments: tuple[Segment, ...]
    arguments: tuple[tuple[str, ...], ...]
    allocations: tuple[tuple[Spec, ...], ...]


def spans(leir: Leir) -> list[range]:
    """The segments' nest ranges (content-defined, see above)."""
    hashes = []
    for nest in leir.nests:
        text = to_text(canonical_renaming(Leir((nest,)), ())[0])
        hashes.append(hashlib.sha256(text.encode()).digest()[:8])
    n = len(hashes)
    out, start = [], 0
    for i in range(n):
        nearby = hashes[max(0, i - WINDOW + 1):i + WINDOW]
        if hashes[i] == min(nearby) or i + 1 - start >= MAX_NESTS or i + 1 == n:
            out.append(range(start, i + 1))
            start = i + 1
    return out


def partition(program: Program, whole: Plan | None = None) -> Partition:
    """Cut ``program`` (valid; ``whole`` its ``plan``) into segments."""
    whole = whole or plan(program)
    nests = program.leir.nests
    signature = set(program.signature.names)
    users: dict[str, list[int]] = {}
    for n, nest in enumerate(nests):
        for name in sorted(tensor_names(nest)):
            users.setdefault(name, []).append(n)
    allocated_at = {name: n for n, names in whole.allocate_before.items() for name in names}
    segments, arguments, allocations = [], [], []
    for span in spans(program.leir):
        start = span.start
        leir, rename = canonical_renaming(Leir(nests[span.start:span.stop]), ())

        def spec(name: str) -> Spec:
            return rename[name], tuple(whole.shapes[name]), whole.dtypes[name]

        inside = {name for name in rename if name not in signature
                  and all(u in span for u in users[name])}
        params = [name for name in rename if name not in inside]
        locals_ = tuple((allocated_at[name] - start, spec(name))
                        for name in rename if name in inside)
        inits = tuple((n - start, rename[name], op) for n in span
                      for name, op in whole.init_before.get(n, ()))
        poisoned = tuple((allocated_at[name] - start, rename[name]) for name in params
                         if name not in signature and allocated_at[name] in span)
        segments.append(Segment(leir, tuple(spec(name) for name in params), locals_, inits,
                                poisoned))
        arguments.append(tuple(params))
        allocations.append(tuple((name, tuple(whole.shapes[name]), whole.dtypes[name])
                                 for name in params if name not in signature
                                 and allocated_at[name] in span))
    return Partition(tuple(segments), tuple(arguments), tuple(allocations))
