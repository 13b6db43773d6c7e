"""Facts of the memory-level strategies: cache_read_write, layout_transformation,
set_storage_layout and precompute_indices (the ``staging`` provider their rule files name).

* ``access_region`` (a guard beyond the paper's nine, needed for soundness): a copy built over
  a nest's loops must read only existing elements and keep its P/V/B loops independent, and a
  re-laid-out tensor must be addressed only through subscripts whose range is known.
* ``dependency`` gains ``ReadOnlyIn`` (a copy made just before the nest holds what it reads) and
  ``CacheableTarget`` (a nest's writes of a tensor can be redirected to a fresh one).
* ``pattern_match`` gains ``CompoundIndexRead`` (the pattern precompute_indices stores).
* Parameters: the loops a copy runs over, the kernel split of a nest and the scopes a staged
  copy fits, and the layouts a tensor can be re-stored in (each with the map of its accesses,
  so the Relayout helper consults no relation).

A copy in global memory (layout_transformation, precompute_indices) is a nest of its own placed
before the nest that reads it. A copy in shared or local memory (cache_read_write) must live in
the kernel that uses it -- such memory does not outlive a kernel (docs/LEIR.md, lowering) -- so
it is made inside the nest, within its loops up to the last B loop. Only top-level nests without
nested nests are considered.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Iterable

import numpy as np

from leir_egraph.leir.analysis import (accesses, accesses_by_name, equation_sites, guarded_accesses,
                                        index_range, intermediate_shapes, tensor_names)
from leir_egraph.leir.ast import Bin, Call, Compare, IfThenElse, Logic, LoopNest, Neg, Var
from leir_egraph.leir.hardware import MAX_SHARED_BYTES
from leir_egraph.leir.memory import (Layout, compound_read_indices, covers_shape, has_gather, in_bounds,
                            kernel_split, kernel_staging_loops, layouts, loops_used,
                            parallel_loops_determined, staged_extent)
from leir_egraph.leir.program import Program
from leir_egraph.leir.signature import dtype_bytes
from leir_egraph.egraph.encoding import encode, encode_index, uncons
from leir_egraph.egraph.vocabulary import (Fact, Guard, GuardExtension, LoadedProgram,
                                           ParameterSet, Relation, later)





def value_reads(expr) -> list[Var]:
    """Tensor reads in value positions of an expression (not the gathers inside subscripts),
    in source order."""
    out: list[Var] = []
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, Var):
            out.append(node)
        elif isinstance(node, (Bin, Logic)):
            stack.extend((node.rhs, node.lhs))
        elif isinstance(node, Neg):
            stack.append(node.operand)
        elif isinstance(node, Call):
            stack.extend(reversed(node.args))
        elif isinstance(node, IfThenElse):
            stack.extend((node.otherwise, node.then, node.cond))
        elif isinstance(node, Compare):
            stack.extend(reversed(node.operands))
    return out


# ---------------------------------------------------------------- per-program analysis

@dataclass(frozen=True)
class _Nest:
    """A flat top-level nest with what the memory facts need about it."""
    position: int
    nest: LoopNest
    reads: tuple[Var, ...]      # distinct value-position reads, in order
    targets: tuple[Var, ...]    # distinct written variables, in order
    written: frozenset[str]


@dataclass(frozen=True)
class _View:
    shapes: dict
    nests: tuple[_Nest, ...]
    first_writer: dict          # tensor -> position of the first top-level nest writing it


@lru_cache(maxsize=16)
def _view(program: Program) -> _View:
    sig = program.signature
    shapes = {t.name: t.shape for t in sig.tensors}
    shapes.update(intermediate_shapes(program.leir, set(shapes)))
    nests = []
    first_writer: dict[str, int] = {}
    sites = equation_sites(program.leir)
    for site in sites:
        first_writer.setdefault(site.equation.target.name, site.nest)
    for i, nest in enumerate(program.leir.nests):
        if any(isinstance(item, LoopNest) for item in nest.body):
            continue
        reads = dict.fromkeys(v for eq in nest.equations for v in value_reads(eq.value))
        targets = dict.fromkeys(eq.target for eq in nest.equations)
        nests.append(_Nest(i, nest, tuple(reads), tuple(targets),
                           frozenset(v.name for v in targets)))
    return _View(shapes, tuple(nests), first_writer)


@lru_cache(maxsize=16)
def storage_layouts(program: Program) -> dict[str, list[Layout]]:
    """For every intermediate, the layouts it can be stored in (``relayout_sound``, decided
    dimension by dimension where that is exact: :class:`DimensionVerdicts`). Each tensor's
    accesses are judged once per distinct (access, ranges, write, loop ranges) -- an
    accumulation reads and writes the same access under the same ranges -- and the bounds of a
    subscript under one set of ranges are computed once for all the tensor's layouts."""
    out: dict[str, list[Layout]] = {}
    for name, (shape, accesses_of) in relayout_accesses(program).items():
        by_dims = DimensionVerdicts(shape, accesses_of, {})
        out[name] = [lay for lay in layouts(shape, merged_ranks=(3, 4, 5), permutations_up_to=5)
                     if by_dims.sound(lay)]
    return out


def relayout_accesses(program: Program) -> dict[str, tuple[tuple[int, ...], tuple]]:
    """``(shape, guarded accesses with their loop ranges)`` of every intermediate of non-empty
    shape: what ``relayout_sound`` judges its layouts by."""
    view = _view(program)
    known = set(program.signature.names)
    found: dict[str, dict] = {}
    for site in equation_sites(program.leir):
        loop_env = site.loop_ranges
        loop_key = frozenset(loop_env.items())
        for access in guarded_accesses(site):
            if access.var.name not in known:
                key = (access.var, frozenset(access.env.items()), access.is_write, loop_key)
                found.setdefault(access.var.name, {}).setdefault(key, (access, loop_env))
    return {name: (shape, tuple(found.get(name, {}).values()))
            for name, shape in view.shapes.items() if name not in known and shape}


class DimensionVerdicts:
    """``relayout_sound`` of the layouts that only re-order dimensions and merge two of them
    (swap, permute, merge, permute-merge: up to 595 of one tensor's), decided dimension by
    dimension, each dimension and each merged pair once per tensor; the other layouts (and any
    tensor accessed with another number of subscripts than its rank) by ``relayout_sound``.

    Exact: ``relayout_sound`` is a conjunction over the new dimensions of a condition on that
    dimension's subscripts and size alone (every access in range; the writes' full extent equal
    to the size). A re-ordered dimension k is old dimension d with d's subscripts and size, and
    a merged one is old pair (a, b)'s subscripts merged row-major (``s_a*n_b+s_b``, the
    expression ``Layout.apply`` builds) with size ``n_a*n_b``."""

    def __init__(self, shape: tuple[int, ...], found, ranges: dict):
        self.shape, self.found, self.ranges = shape, found, ranges
        self.exact = all(len(access.var.subscripts) == len(shape) for access, _ in found)
        self._dims: dict[int, bool] = {}
        self._pairs: dict[tuple[int, int], bool] = {}

    def sound(self, layout: Layout) -> bool:
        kind = layout.kind
        if not self.exact or kind not in ("swap", "permute", "merge", "permute-merge"):
            return relayout_sound(layout, self.found, self.ranges)
        k = len(self.shape)
        if kind in ("swap", "permute"):
            return all(self._dim(d) for d in range(k))
        order = list(range(k)) if kind == "merge" else list(layout.dims[:-1])
        i = layout.dims[0] if kind == "merge" else layout.dims[-1]
        a, b = order[i], order[i + 1]
        return self._pair(a, b) and all(self._dim(d) for d in range(k) if d not in (a, b))

    def _dim(self, d: int) -> bool:
        if d not in self._dims:
            self._dims[d] = self._verdict(lambda subs: subs[d], self.shape[d])
        return self._dims[d]

    def _pair(self, a: int, b: int) -> bool:
        if (a, b) not in self._pairs:
            merge = Layout("merge", (0, 1), (self.shape[a], self.shape[b]))
            self._pairs[a, b] = self._verdict(lambda subs: merge.apply((subs[a], subs[b]))[0],
                                              self.shape[a] * self.shape[b])
        return self._pairs[a, b]

    def _verdict(self, sub_of, size: int) -> bool:
        """``relayout_sound``'s condition on one new dimension: ``sub_of(subscripts)`` its
        subscript, ``size`` its size."""
        extent = 0
        for access, loop_env in self.found:
            reach = _reach(access, loop_env, sub_of(access.var.subscripts), size, index_range)
            if reach is None:
                return False
            extent = max(extent, reach)
        return extent == size


def _reach(access, loop_env, sub, size: int, bounds) -> int | None:
    """One access's part in ``relayout_sound`` for one new dimension (subscript ``sub``, size
    ``size``): ``None`` where it reads out of range (or is a write of unknown range), else how
    far along the dimension it writes (0 for a read)."""
    r = bounds(sub, access.env)
    if r is not None and (r[0] < 0 or r[1] >= size):
        return None
    if not access.is_write:
        return 0
    full = bounds(sub, loop_env)
    return None if full is None else full[1] + 1


def relayout_sound(layout: Layout, found, ranges: dict | None = None) -> bool:
    """Re-addressed through ``layout``, every access of the tensor (``found``: its guarded
    accesses with their loop ranges) still reads statically in range, and its writes give it
    exactly the layout's new shape, so they stay a bijection onto it and an implicit
    initialisation still covers every element. (The same bounds rules as leir.validate.)
    ``ranges``: the bounds already computed for these accesses, by (subscript, ranges' id)."""
    ranges = {} if ranges is None else ranges

    def bounds(sub, env):
        key = (sub, id(env))
        if key not in ranges:
            ranges[key] = index_range(sub, env)
        return ranges[key]

    new_shape = layout.new_shape()
    extent = [0] * len(new_shape)
    for access, loop_env in found:
        subs = layout.apply(access.var.subscripts)
        if len(subs) != len(new_shape):
            return False
        for dim, (sub, size) in enumerate(zip(subs, new_shape)):
            reach = _reach(access, loop_env, sub, size, bounds)
            if reach is None:
                return False
            extent[dim] = max(extent[dim], reach)
    return tuple(extent) == new_shape


# ---------------------------------------------------------------- access_region

def _region_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    view = _view(loaded.program)
    out: dict[Fact, None] = {}
    for n in view.nests:
        name = loaded.top_nest_term(n.position)
        loops = n.nest.loops
        for x in n.reads:
            shape = view.shapes.get(x.name)
            if shape is None or has_gather(x) or not in_bounds(x.subscripts, loops, shape):
                continue
            if loops_used(loops, x.subscripts) and parallel_loops_determined(x, loops):
                out[STAGEABLE_READ(name, x)] = None
            if kernel_staging_loops(loops, x) is not None:
                out[STAGEABLE_IN_KERNEL(name, x)] = None
        for x in n.targets:
            shape = view.shapes.get(x.name)
            if shape is None or has_gather(x) or kernel_staging_loops(loops, x) is None:
                continue
            if x.name in _names_read(n) and not covers_shape(x, loops, shape):
                continue
            out[STAGEABLE_WRITE(name, x)] = None
    known = set(loaded.program.signature.names)
    by_name = accesses_by_name(loaded.program.leir)
    for tensor, shape in view.shapes.items():
        if tensor in known or not shape:
            continue
        vars_ = by_name.get(tensor, [])
        if all(v.rank == len(shape) and not has_gather(v) for v in vars_):
            out[RELAYOUTABLE_TENSOR(tensor)] = None
    return list(out)


def _stageable_read(x: Var, loops, shape) -> bool:
    return (not has_gather(x) and bool(loops_used(loops, x.subscripts))
            and in_bounds(x.subscripts, loops, shape) and parallel_loops_determined(x, loops))


def _names_read(n: _Nest) -> set[str]:
    return {v.name for eq in n.nest.equations for v in accesses(eq.value)} | {
        v.name for eq in n.nest.equations for s in eq.target.subscripts for v in accesses(s)}


STAGEABLE_READ = Relation(
    "StageableRead", ("Nest", "Var"),
    "the read {1} in {0} stays in bounds for every value of the loops it uses and "
    "determines each parallel loop among them")
STAGEABLE_IN_KERNEL = Relation(
    "StageableInKernel", ("Nest", "Var"),
    "the read {1} in {0} stays in bounds for every value of the loops, and a copy "
    "of it inside the kernel writes each element from one iteration of every "
    "parallel loop")
STAGEABLE_WRITE = Relation(
    "StageableWrite", ("Nest", "Var"),
    "the write {1} in {0} has no gather, a copy of it inside the kernel writes "
    "each element from one iteration of every parallel loop, and it covers the "
    "whole tensor wherever the nest accumulates into it")
RELAYOUTABLE_TENSOR = Relation(
    "RelayoutableTensor", ("String",),
    "every access of {0} has its full rank and no gather")

ACCESS_REGION = Guard(
    "access_region",
    "Extra soundness guard (not one of the paper's nine): the accesses a memory strategy copies "
    "or re-addresses are fully known. StageableRead: the subscripts have no gather, stay in "
    "bounds for every value of the loops they use (no if_then_else narrowing), and determine "
    "every P/V/B loop they use, so a copy nest over those loops reads only existing elements "
    "and its parallel loops stay independent. StageableInKernel / StageableWrite: the same for "
    "a copy made inside the nest's kernel (within its loops up to the last B loop, over the "
    "inner loops the subscripts use): every P/V/B loop among those is determined by the "
    "element, so no two of their iterations write one element of the copy; for a write, if the "
    "nest accumulates into the tensor the element covers its whole shape (an implicit "
    "initialisation moved to a fresh tensor initialises nothing else). RelayoutableTensor: "
    "every access of the intermediate has its full rank and no gather, so a re-layout is proved "
    "on every subscript.",
    "an access the strategy would copy or re-address is not provably inside the tensor (a "
    "guarded out-of-range read, a gather, an undetermined parallel loop or a partial "
    "accumulation)",
    relations=(
        STAGEABLE_READ,
        STAGEABLE_IN_KERNEL,
        STAGEABLE_WRITE,
        RELAYOUTABLE_TENSOR,
    ),
    facts=_region_facts)


# ---------------------------------------------------------------- dependency

def _dependency_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    view = _view(loaded.program)
    out: dict[Fact, None] = {}
    for n in view.nests:
        name = loaded.top_nest_term(n.position)
        for x in n.reads:
            if x.name not in n.written:
                out[READ_ONLY_IN(name, x.name)] = None
        for x in n.targets:
            same = all(v == x for v in accesses(n.nest) if v.name == x.name)
            reads_it = x.name in _names_read(n)
            if same and (not reads_it or view.first_writer.get(x.name) == n.position):
                out[CACHEABLE_TARGET(loaded.suffix_terms[n.position], x)] = None
    return list(out)


READ_ONLY_IN = Relation(
    "ReadOnlyIn", ("Nest", "String"),
    "{0} reads {1} and never writes it, so a copy made just before the nest holds "
    "every value the nest reads")
CACHEABLE_TARGET = Relation(
    "CacheableTarget", ("Prog", "Var"),
    "every access of that tensor in the first nest of {0} is {1}, and if the nest "
    "reads it back, no earlier nest wrote it")

DEPENDENCY_EXTENSION = GuardExtension(
    "dependency",
    relations=(
        READ_ONLY_IN,
        CACHEABLE_TARGET,
    ),
    facts=_dependency_facts)


# ---------------------------------------------------------------- pattern_match

def compound_indices(loaded: LoadedProgram) -> Iterable[tuple[tuple, LoopNest, object]]:
    """``(nest term, nest, index)`` for every compound index a top-level nest reads at
    (``leir.memory.compound_read_indices``): what precompute_indices may store."""
    for n in _view(loaded.program).nests:
        name = loaded.top_nest_term(n.position)
        for e in compound_read_indices(n.nest):
            yield name, n.nest, e


def _pattern_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    return list(dict.fromkeys(COMPOUND_INDEX_READ(name, e)
                              for name, _, e in compound_indices(loaded)))


COMPOUND_INDEX_READ = Relation(
    "CompoundIndexRead", ("Nest", "IExpr"),
    "{0} reads tensors at the compound index {1}, which no write of the "
    "nest uses")

PATTERN_EXTENSION = GuardExtension(
    "pattern_match",
    relations=(COMPOUND_INDEX_READ,),
    facts=_pattern_facts)

GUARD_EXTENSIONS = (GuardExtension("access_region", new_guard=ACCESS_REGION),
                    DEPENDENCY_EXTENSION, PATTERN_EXTENSION)


# ---------------------------------------------------------------- parameters

def _staging_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    view = _view(loaded.program)
    out: dict[Fact, None] = {}
    for n in view.nests:
        name = loaded.top_nest_term(n.position)
        loops = n.nest.loops
        subs_lists = [x.subscripts for x in n.reads + n.targets if not has_gather(x)]
        subs_lists += [(e,) for e in compound_read_indices(n.nest)]
        for subs in subs_lists:
            used = loops_used(loops, subs)
            if used:
                out[STAGING_LOOPS(name, subs, used)] = None
    return list(out)


def _kernel_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    """How a nest splits into its kernel's loops and the loops inside them, the inner loops
    each access uses, and the scopes a copy of an access may take: local memory always, shared
    memory when the copy fits one block's share (lower.cuda.MAX_SHARED_BYTES)."""

    view = _view(loaded.program)
    out: dict[Fact, None] = {}
    for n in view.nests:
        split = kernel_split(n.nest.loops)
        if split is None:
            continue
        outer, inner = split
        name = loaded.top_nest_term(n.position)
        out[KERNEL_LOOPS(name, outer, inner)] = None
        for x in n.reads + n.targets:
            copy = kernel_staging_loops(n.nest.loops, x)
            if has_gather(x) or copy is None:
                continue
            out[INNER_LOOPS_USED(name, x.subscripts, copy)] = None
            extent = staged_extent(x, outer + copy)
            if extent is None:
                continue
            size = int(np.prod(extent)) * dtype_bytes(x.dtype)
            for scope in ("s", "l"):
                if scope != x.scope and (scope == "l" or size <= MAX_SHARED_BYTES):
                    out[STAGING_SCOPE(name, x, scope)] = None
    return list(out)


def _copy_layout_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    """Layouts for the reads a copy nest could stage (StageableRead's subscripts)."""
    view = _view(loaded.program)
    out: dict[tuple, Fact] = {}  # by key: one fact per (tensor, subscripts, layout)
    for n in view.nests:
        for x in n.reads:
            shape = view.shapes.get(x.name)
            if shape is None or not _stageable_read(x, n.nest.loops, shape):
                continue
            # a copy over loops one of which is bound to threads: every rank-5 permutation too,
            # alone or followed by a merge (bound_forms offers them where it binds a loop
            # itself; here the nest's own B loop is among the copy's loops)
            bound = any(l.kind == "B" for l in loops_used(n.nest.loops, x.subscripts))
            for lay in layouts(shape, merged_ranks=(5,) if bound else (),
                               permutations_up_to=5 if bound else 4):
                key = (x.name, x.subscripts, lay.label)
                if key not in out:
                    out[key] = NEW_LAYOUT(*key, later(partial(lay.apply, x.subscripts)))
    return list(out.values())


def _storage_layout_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    """Each sound layout of each intermediate with its map: one equation X_{old}=X_{new} per
    distinct access of X."""
    by_name = accesses_by_name(loaded.program.leir)
    out = []
    for tensor, options in storage_layouts(loaded.program).items():
        # the accesses' terms and their subscripts' (by the subscript object: a permutation
        # re-orders the same ones), encoded once for all the tensor's layouts
        forms = tuple((v, encode(v)) for v in dict.fromkeys(by_name.get(tensor, ())))
        subscripts = {id(sub): (sub, sub_term) for v, term in forms if term[0] == "MkVar"
                      for sub, sub_term in zip(v.subscripts, uncons(term[4], "SCons"))}
        for lay in options:
            out.append(STORAGE_LAYOUT(tensor, lay.label,
                                      later(partial(_relayout_map, lay, forms, subscripts))))
    return out


def _relayout_map(layout, forms, subscripts: dict) -> tuple:
    """The map of one storage layout: ``X_{old}=X_{new}`` for each distinct access (``forms``:
    each with its term; ``subscripts``: terms of subscripts by object, as ``(subscript,
    term)``)."""
    body: tuple = ("BNil",)
    for v, old in reversed(forms):
        subs: tuple = ("SNil",)
        for sub in reversed(layout.apply(v.subscripts)):
            hit = subscripts.get(id(sub))
            subs = ("SCons", hit[1] if hit is not None and hit[0] is sub else encode_index(sub),
                    subs)
        new = ("MkVar", v.name, v.dtype, v.scope, subs)
        body = ("BEq", ("MkEq", old, ("Read", new)), body)
    return body


def _tensor_use_facts(loaded: LoadedProgram) -> Iterable[Fact]:
    """For every intermediate with a storage layout, and every top-level nest and every program
    suffix, whether it accesses the intermediate anywhere (nested nests and gathers in
    subscripts included); and the suffix that begins with its first access."""
    tensors = sorted(t for t, options in storage_layouts(loaded.program).items() if options)
    out = []
    if not tensors:
        return out
    nests = list(loaded.top_nests())
    accessed: set[str] = set()  # tensors accessed by suffix i (nest i and every nest after it)
    first: dict[str, int] = {}  # tensor -> the position of the first nest accessing it
    for i, term, nest in reversed(nests):
        used = tensor_names(nest)
        accessed |= used
        first.update((tensor, i) for tensor in used)
        for tensor in tensors:
            out.append((TENSOR_IN_NEST if tensor in used else TENSOR_NOT_IN_NEST)(term, tensor))
            out.append((TENSOR_IN_SUFFIX if tensor in accessed else TENSOR_NOT_IN_SUFFIX)(
                loaded.suffix_terms[i], tensor))
    for tensor in tensors:
        out.append(TENSOR_NOT_IN_SUFFIX(loaded.suffix_terms[len(nests)], tensor))
        if tensor in first:
            out.append(FIRST_ACCESS_SUFFIX(loaded.suffix_terms[first[tensor]], tensor))
    return out


STAGING_LOOPS = Relation(
    "StagingLoops", ("Nest", "Subs", "Loops"),
    "the subscripts {1} use the loops {2} of {0}")
KERNEL_LOOPS = Relation(
    "KernelLoops", ("Nest", "Loops", "Loops"),
    "the kernel of {0} runs the loops {1} (up to its last B loop) around the loops "
    "{2}")
INNER_LOOPS_USED = Relation(
    "InnerLoopsUsed", ("Nest", "Subs", "Loops"),
    "the subscripts {1} use the inner loops {2} of {0}")
STAGING_SCOPE = Relation(
    "StagingScope", ("Nest", "Var", "String"),
    "a copy of {1} made in the kernel of {0} fits scope {2}")
NEW_LAYOUT = Relation(
    "NewLayout", ("String", "Subs", "String", "Subs"),
    "with its {2}, the element of {0} at {1} is stored at {3}",
    deferred=True)
STORAGE_LAYOUT = Relation(
    "StorageLayout", ("String", "String", "Body"),
    "{0} can be stored with its {1}, its accesses re-addressed as {2}, "
    "its writes still filling exactly the new shape", deferred=True)
TENSOR_IN_NEST = Relation("TensorInNest", ("Nest", "String"), "{0} accesses {1}")
TENSOR_NOT_IN_NEST = Relation("TensorNotInNest", ("Nest", "String"), "{0} never accesses {1}")
TENSOR_IN_SUFFIX = Relation("TensorInSuffix", ("Prog", "String"), "a nest of {0} accesses {1}")
TENSOR_NOT_IN_SUFFIX = Relation(
    "TensorNotInSuffix", ("Prog", "String"),
    "no nest of {0} accesses {1}")
FIRST_ACCESS_SUFFIX = Relation(
    "FirstAccessSuffix", ("Prog", "String"),
    "{1} is first accessed where the match begins")

PARAMETER_SETS = (
    ParameterSet((STAGING_LOOPS,), _staging_facts),
    ParameterSet((
        KERNEL_LOOPS,
        INNER_LOOPS_USED,
        STAGING_SCOPE,
    ), _kernel_facts),
    # deferred: the new subscripts of a layout of a stageable read are only written, and sent
    # to egglog, for the drawn copies (Relation.deferred)
    ParameterSet((NEW_LAYOUT,),
                 _copy_layout_facts),
    # deferred: a map restates every access of the tensor, for each of up to 595 layouts
    ParameterSet((STORAGE_LAYOUT,),
                 _storage_layout_facts),
    ParameterSet((TENSOR_IN_NEST,
                  TENSOR_NOT_IN_NEST,
                  TENSOR_IN_SUFFIX,
                  TENSOR_NOT_IN_SUFFIX,
                  FIRST_ACCESS_SUFFIX),
                 _tensor_use_facts),
)
