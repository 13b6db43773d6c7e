"""Pure analyses behind the memory-level strategies: which loops a tensor access depends on,
whether an access stays in bounds over whole loop ranges, whether a write covers a tensor's
whole shape, the layouts a tensor can be re-stored in, and compound index expressions.

A *layout* maps the subscripts of an access of a tensor with shape ``D`` to the subscripts of
the same element in a re-stored tensor. Every layout here is a bijection from the box
``0 <= s_k < D_k`` onto the box of its new shape, so accesses that stay inside the old box
keep addressing distinct elements::

    swap(0,1)    X_{s0,s1}      -> X_{s1,s0}                       shape (D1, D0)
    permute(1,2,0) X_{s0,s1,s2} -> X_{s1,s2,s0}                    shape (D1, D2, D0)
    flatten      X_{s0,s1,s2}   -> X_{s0*D1*D2+s1*D2+s2}           shape (D0*D1*D2,)
    flatten-last X_{s0,s1}      -> X_{s1*D0+s0}                    shape (D0*D1,)
    merge(1,2)   X_{s0,s1,s2}   -> X_{s0,s1*D2+s2}                 shape (D0, D1*D2)
    split(0,4)   X_{s0,s1}      -> X_{s0//4,s0%4,s1}               shape (D0/4, 4, D1)
"""

from __future__ import annotations

import itertools

from dataclasses import dataclass
from typing import Iterable

from .analysis import affine, index_range, subscript_extent
from .ast import INDEX_OPS, PARALLEL_KINDS, IBin, IConst, IExpr, IName, Loop, LoopNest, Var
from .legality import determined_loops
from .traverse import walk


# ---------------------------------------------------------------- the loops an access uses

def has_gather(var: Var) -> bool:
    """Does any subscript of ``var`` read a tensor (a gather)?"""
    return any(isinstance(n, Var) for sub in var.subscripts for n in walk(sub))


def subscript_index_names(subscripts: Iterable[IExpr]) -> frozenset[str]:
    return frozenset(n.name for sub in subscripts for n in walk(sub) if isinstance(n, IName))


def loops_used(loops: tuple[Loop, ...], subscripts: Iterable[IExpr]) -> tuple[Loop, ...]:
    """The loops whose index occurs in ``subscripts``, in nest order.

    ``loops_used((B tx, L a, L c), (tx, c-2))`` -> ``(B tx, L c)``
    """
    names = subscript_index_names(subscripts)
    return tuple(l for l in loops if l.index in names)


def in_bounds(subscripts: tuple[IExpr, ...], loops: tuple[Loop, ...],
              shape: tuple[int, ...]) -> bool:
    """Every subscript stays inside ``shape`` for *every* value of the loops (no if_then_else
    narrowing): a copy nest over those loops reads only existing elements. Unknown ranges
    (gathers, unbound names) are not in bounds."""
    if len(subscripts) != len(shape):
        return False
    env = {l.index: (0, l.extent - 1) for l in loops}
    for sub, size in zip(subscripts, shape):
        r = index_range(sub, env)
        if r is None or r[0] < 0 or r[1] >= size:
            return False
    return True


def parallel_loops_determined(var: Var, loops: tuple[Loop, ...]) -> bool:
    """Every P/V/B loop whose index ``var`` uses is determined by the element it addresses, so
    a nest over those loops writing ``var`` never writes one element from two iterations of a
    parallel loop."""
    used = loops_used(loops, var.subscripts)
    fixed = determined_loops(var, used)
    return all(l.index in fixed for l in used if l.kind in PARALLEL_KINDS)


def covers_shape(var: Var, loops: tuple[Loop, ...], shape: tuple[int, ...]) -> bool:
    """Does writing ``var`` over all values of ``loops`` touch every element of ``shape``?

    Proved structurally: each dimension is affine in its own loops (no loop shared between
    dimensions), with no constant, and its coefficients form a mixed radix that exactly fills
    the dimension (``a*8+c`` with ``c < 8``, ``a < D/8``); a dimension of size 1 may be the
    constant 0. Anything else is not proved to cover.
    """
    if len(var.subscripts) != len(shape):
        return False
    extent = {l.index: l.extent for l in loops}
    seen: set[str] = set()
    for sub, size in zip(var.subscripts, shape):
        form = affine(sub)
        if form is None:
            return False
        coef, const = form
        if const != 0 or any(n not in extent or c <= 0 for n, c in coef.items()):
            return False
        if seen & set(coef):
            return False
        seen |= set(coef)
        radix = 1
        for name in sorted(coef, key=lambda n: (coef[n], extent[n])):
            if coef[name] != radix:
                return False
            radix *= extent[name]
        if radix != size:
            return False
    return True


# ---------------------------------------------------------------- staging inside a kernel

def kernel_split(loops: tuple[Loop, ...]) -> tuple[tuple[Loop, ...], tuple[Loop, ...]] | None:
    """``(outer, inner)``: the loops up to and including the nest's last B loop (on CUDA the
    threads of its kernel, where shared and local memory is placed) and the loops inside them;
    ``None`` for a nest without a B loop (a one-thread kernel, with no place for such memory).

    ``B^{4}_{tx=0}L^{8}_{a=0}L^{2}_{c=0}`` -> ``((B tx,), (L a, L c))``
    """
    last = max((i for i, l in enumerate(loops) if l.kind == "B"), default=None)
    if last is None:
        return None
    return loops[:last + 1], loops[last + 1:]


def kernel_staging_loops(loops: tuple[Loop, ...], var: Var) -> tuple[Loop, ...] | None:
    """The inner loops (``kernel_split``) a copy of ``var`` made inside the kernel runs over:
    those whose index its subscripts use; ``None`` if the copy cannot be made there without two
    iterations of a P/V/B loop (outer ones included) writing one element of it -- every such
    loop among the outer loops and the copy's own must be determined by the element."""
    split = kernel_split(loops)
    if split is None:
        return None
    outer, inner = split
    copy = loops_used(inner, var.subscripts)
    fixed = determined_loops(var, outer + copy)
    if any(l.kind in PARALLEL_KINDS and l.index not in fixed for l in outer + copy):
        return None
    return copy


def staged_extent(var: Var, loops: tuple[Loop, ...]) -> tuple[int, ...] | None:
    """The shape a tensor written as ``var`` over all values of ``loops`` gets (the largest
    subscript plus one per dimension); ``None`` if a subscript is unbounded."""
    return subscript_extent(var, {l.index: (0, l.extent - 1) for l in loops})


# ---------------------------------------------------------------- layouts

def _mul(sub: IExpr, k: int) -> IExpr:
    if k == 1:
        return sub
    if isinstance(sub, IConst):
        return IConst(sub.value * k)
    return IBin("*", sub, IConst(k))


def _sum(terms: list[IExpr]) -> IExpr:
    """``t0+t1+...`` with zero constants dropped and constants folded into one last term."""
    const = sum(t.value for t in terms if isinstance(t, IConst))
    parts = [t for t in terms if not isinstance(t, IConst)]
    if const or not parts:
        parts.append(IConst(const))
    out = parts[0]
    for t in parts[1:]:
        out = IBin("+", out, t)
    return out


def _div(sub: IExpr, op: str, k: int) -> IExpr:
    if isinstance(sub, IConst):
        return IConst(INDEX_OPS[op](sub.value, k))
    return IBin(op, sub, IConst(k))


@dataclass(frozen=True)
class Layout:
    """A bijective re-layout of a tensor of shape ``shape`` (see the module docstring)."""
    kind: str                # swap | permute | flatten | flatten-last | merge | split
                             # | permute-merge
    dims: tuple[int, ...]    # swap: (i, j); permute: new dim k is old dim dims[k];
                             # merge: (i, i+1); split: (i, inner extent);
                             # permute-merge: (*permutation, i): permute, then merge i, i+1
    shape: tuple[int, ...]

    @property
    def label(self) -> str:
        """The layout as a short phrase (a chain-of-thought slot and the fact's key)."""
        if self.kind == "swap":
            return f"dimensions {self.dims[0]} and {self.dims[1]} exchanged"
        if self.kind == "permute":
            return "dimensions permuted to " + ",".join(map(str, self.dims))
        if self.kind == "flatten":
            return "dimensions flattened row-major"
        if self.kind == "flatten-last":
            return "dimensions flattened column-major (last dimension outermost)"
        if self.kind == "merge":
            return f"dimensions {self.dims[0]} and {self.dims[1]} merged row-major"
        if self.kind == "permute-merge":
            *perm, i = self.dims
            return (f"dimensions permuted to {','.join(map(str, perm))}, then its {i} and {i + 1} "
                    "merged row-major")
        i, inner = self.dims
        return f"dimension {i} split into {self.shape[i] // inner}x{inner}"

    def _split_permute_merge(self) -> tuple[Layout, Layout]:
        *perm, i = self.dims
        permuted = Layout("permute", tuple(perm), self.shape)
        return permuted, Layout("merge", (i, i + 1), permuted.new_shape())

    def new_shape(self) -> tuple[int, ...]:
        if self.kind == "permute-merge":
            return self._split_permute_merge()[1].new_shape()
        d = list(self.shape)
        if self.kind == "swap":
            i, j = self.dims
            d[i], d[j] = d[j], d[i]
            return tuple(d)
        if self.kind == "permute":
            return tuple(d[k] for k in self.dims)
        if self.kind in ("flatten", "flatten-last"):
            size = 1
            for n in d:
                size *= n
            return (size,)
        if self.kind == "merge":
            i, j = self.dims
            return tuple(d[:i] + [d[i] * d[j]] + d[j + 1:])
        i, inner = self.dims
        return tuple(d[:i] + [d[i] // inner, inner] + d[i + 1:])

    def apply(self, subs: tuple[IExpr, ...]) -> tuple[IExpr, ...]:
        """The subscripts of the same element in the new layout."""
        if self.kind == "permute-merge":
            permuted, merged = self._split_permute_merge()
            return merged.apply(permuted.apply(subs))
        s = list(subs)
        if self.kind == "swap":
            i, j = self.dims
            s[i], s[j] = s[j], s[i]
            return tuple(s)
        if self.kind == "permute":
            return tuple(s[k] for k in self.dims)
        if self.kind in ("flatten", "flatten-last"):
            pairs = list(zip(s, self.shape))
            if self.kind == "flatten-last":
                pairs.reverse()
            terms, stride = [], 1
            for sub, size in reversed(pairs):
                terms.append(_mul(sub, stride))
                stride *= size
            return (_sum(list(reversed(terms))),)
        if self.kind == "merge":
            i, j = self.dims
            return tuple(s[:i] + [_sum([_mul(s[i], self.shape[j]), s[j]])] + s[j + 1:])
        i, inner = self.dims
        return tuple(s[:i] + [_div(s[i], "//", inner), _div(s[i], "%", inner)] + s[i + 1:])


def layouts(shape: tuple[int, ...], merged_ranks: tuple[int, ...] = (),
            permutations_up_to: int = 4) -> list[Layout]:
    """Every elementary re-layout of a tensor of this shape, in a fixed order: exchanges of two
    dimensions, for rank 3 and 4 every other permutation (rank 3: the two rotations; rank 4:
    the 17 that are no single exchange -- the reference shuffles all subscripts at once, and
    rank 4 is where its outputs are; beyond rank 4 there are 114+ and only exchanges), the
    row-major and the column-major flattening (rank >= 2), merges of two adjacent dimensions
    (rank >= 3; for rank 2 that is the flattening), and splits of one dimension by each of its
    proper divisors. Any permutation or reshape is a sequence of these steps.

    ``merged_ranks`` adds, for a tensor of one of those ranks (3 or more), every permutation
    followed by the merge of two of its adjacent dimensions (``C_{tx,a,c}`` -> ``C_{a*16+tx,c}``;
    rank 3: 10, rank 4: 69, rank 5: 476), the reference's set-storage-layout move in one step.
    set_storage_layout asks for ranks 3 to 5; layout_transformation's copies over a thread-bound
    loop for rank 5 only (the reference's rank-3 and rank-4 copies do not use them).
    ``permutations_up_to=5`` offers every permutation of rank 5 too (the 109 that are no single
    exchange): set_storage_layout and layout_transformation's copies bound to threads ask for
    them, where the reference's rank-5 shuffles are."""
    k = len(shape)
    out = [Layout("swap", (i, j), shape) for i in range(k) for j in range(i + 1, k)]
    if 3 <= k <= permutations_up_to:
        swaps = {tuple(j if d == i else i if d == j else d for d in range(k))
                 for i in range(k) for j in range(i + 1, k)}
        out += [Layout("permute", p, shape) for p in itertools.permutations(range(k))
                if p != tuple(range(k)) and p not in swaps]
    if k >= 2:
        out.append(Layout("flatten", (), shape))
        out.append(Layout("flatten-last", (), shape))
    if k >= 3:
        out.extend(Layout("merge", (i, i + 1), shape) for i in range(k - 1))
    if k >= 3 and k in merged_ranks:
        out.extend(Layout("permute-merge", (*p, i), shape)
                   for p in itertools.permutations(range(k)) if p != tuple(range(k))
                   for i in range(k - 1))
    for i, size in enumerate(shape):
        out.extend(Layout("split", (i, inner), shape)
                   for inner in range(2, size) if size % inner == 0)
    return out


# ---------------------------------------------------------------- compound index expressions

def is_compound_index(sub: IExpr) -> bool:
    """An index expression worth storing: ``+ - *`` over loop indices and integer constants,
    using at least one index, and not a bare index or constant (``c-2``, ``a*8+c``). Floor
    division and modulo are excluded: they have no value form to compute the table with."""
    if not isinstance(sub, IBin):
        return False
    names = False
    for node in walk(sub):
        if isinstance(node, IBin) and node.op not in ("+", "-", "*"):
            return False
        if isinstance(node, Var):
            return False
        names = names or isinstance(node, IName)
    return names


def compound_read_indices(nest: LoopNest) -> list[IExpr]:
    """Compound subscript entries (``is_compound_index``) of the tensors the nest's equations
    read in value positions, which occur in no written subscript of the nest, in order of first
    appearance. Writes are left alone so that an accumulation keeps its form and an
    intermediate's shape stays inferable."""
    written: set[IExpr] = set()
    for eq in nest.equations:
        for sub in eq.target.subscripts:
            written.update(n for n in walk(sub) if isinstance(n, IBin))
    found: dict[IExpr, None] = {}
    for eq in nest.equations:
        for node in walk(eq.value):
            if isinstance(node, Var):
                for sub in node.subscripts:
                    if is_compound_index(sub) and sub not in written:
                        found.setdefault(sub, None)
    return list(found)
