"""An analytical CPU cost model of a LEIR program as TVM compiles it for ``llvm`` (docs/COST.md).

``cost(program)`` estimates the run time in seconds from the AST alone -- no TVM, no
egglog -- in tens to hundreds of microseconds, so that search and exploration can rank
thousands of candidates before verifying a few of them. The model follows what the lowering
does on a CPU (``lower/tir.py``): B loops run serially, the outermost P loop runs on the
machine's cores, V loops become vector instructions, U loops are unrolled, scopes are plain
allocations, and an accumulation's implicit initialisation is its own fill loop.

Per equation, with its enclosing loops ``l_1 .. l_d`` (outermost first):

* **compute** = trip count x operation cycles of the right-hand side, divided by the vector
  lanes when the innermost loop vectorises (explicit V, or LLVM's loop vectoriser on a serial
  innermost loop whose accesses are unit-stride or invariant and which carries no
  accumulation); an accumulation whose target does not move with the innermost loop is a
  dependency chain and costs the operation's latency per iteration;
* **memory** = for each cache level, the cache lines the accesses touch inside the deepest
  sub-nest whose footprint fits that level, times the trips of the loops around it; each
  level's misses cost its line-transfer time;
* **overhead** = loop bookkeeping per iteration (less when unrolled) and, per entry into a
  parallel loop, the thread-pool launch.

The nest's work below its outermost P loop is divided by ``min(cores, extent)``.

    >>> from leir_egraph import Program
    >>> sig = {"inputs": [{"name": "A", "dtype": "float32", "shape": [64, 128]},
    ...                   {"name": "C", "dtype": "float32", "shape": [128, 64]}],
    ...        "outputs": [{"name": "D", "dtype": "float32", "shape": [64, 64]}]}
    >>> eq = "[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+A^{f32,g}_{tx,c}*C^{f32,g}_{c,a};];"
    >>> ijk = Program.parse("B^{64}_{tx=0}L^{64}_{a=0}L^{128}_{c=0}" + eq, sig)
    >>> ikj = Program.parse("B^{64}_{tx=0}L^{128}_{c=0}L^{64}_{a=0}" + eq, sig)
    >>> cost(ijk).seconds > cost(ikj).seconds    # a dependency chain over a strided read
    True
"""

from __future__ import annotations

import itertools
import math
from operator import itemgetter
from functools import lru_cache, update_wrapper
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Sequence

from ..leir.analysis import accesses, accumulation_op, affine, index_range, merge_extent
from ..leir.ast import (Bin, Call, Compare, Equation, IBin, IConst, IfThenElse, IName,
                        Logic, Loop, LoopNest, Neg, Var)
from ..leir.program import Program
from ..leir.traverse import walk, walk_values

HALF_DTYPES = ("f16", "bf16")
DTYPE_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8, "i8": 1, "u8": 1, "i16": 2, "u16": 2,
               "i32": 4, "u32": 4, "i64": 8, "u64": 8, "bool": 1}


_MISSING = object()


def _memo_by_node(maxsize: int) -> Callable:
    """``lru_cache(maxsize)`` for a pure function of one AST node, keyed by the node itself:
    ``lru_cache`` keys such a call by a one-tuple holding the node, an object the garbage
    collector tracks (about 55,000 of them per attention node's ranking, walked by every full
    collection). Full, it forgets its oldest entry; ``cache_clear`` empties it."""
    def wrap(fn: Callable) -> Callable:
        memo: dict = {}
        get = memo.get

        def call(node):
            value = get(node, _MISSING)
            if value is _MISSING:
                value = fn(node)
                if len(memo) >= maxsize:
                    del memo[next(iter(memo))]
                memo[node] = value
            return value
        call.cache_clear = memo.clear
        return update_wrapper(call, fn)
    return wrap


@dataclass(frozen=True)
class Machine:
    """The CPU the model describes. Defaults: a 2-core x86 server core with AVX2 (the machines
    this project runs on), calibrated against TVM llvm opt-level-3 timings
    (``benchmarks/cost_model.py``, docs/COST.md)."""
    cores: int = 2
    ghz: float = 2.5
    vector_bytes: int = 32
    line_bytes: int = 64
    caches: tuple[tuple[int, float], ...] = ((32 << 10, 2.0), (1 << 20, 6.0), (32 << 20, 24.0))
    """(capacity in bytes, cycles to bring one line from the next level) for L1, L2, LLC; the
    last entry's cost is a line from DRAM."""
    op_cycles: tuple[tuple[str, float], ...] = (
        ("+", 0.5), ("-", 0.5), ("*", 0.5), ("/", 4.0), ("**", 40.0), ("neg", 0.5),
        ("max", 0.5), ("min", 0.5), ("abs", 0.5), ("sqrt", 6.0), ("exp", 14.0), ("log", 16.0),
        ("erf", 20.0), ("cmp", 0.5), ("select", 0.5), ("logic", 0.5), ("load", 0.5),
        ("store", 1.0))
    vector_math: bool = True
    """An explicit ``V`` loop of float16/32/64 computes ``exp``/``log``/``erf`` with one SIMD
    call per vector (libmvec, ``lower/vector_math.py``; ``LEIR_VECTOR_MATH=0`` turns it off).
    Every other transcendental costs its cycles once per lane: ``**`` anywhere, ``exp``, ``log``
    and ``erf`` in bfloat16 and in loops only LLVM's own vectoriser takes (it has no vector
    library on TVM's targets and calls the scalar routine per lane)."""
    chain_latency: float = 4.0
    """Cycles per iteration of an accumulation chain held in a register (an add's latency): a
    local (``l``) accumulator."""
    memory_chain_latency: float = 8.0
    """Cycles per iteration of an accumulation chain whose target is a global or shared
    buffer: LLVM does not keep it in a register across the loop (the generated IR loads and
    stores it in every iteration: the buffer may alias the others), so every iteration waits
    for the store of the last one to forward to its load, and then for the add."""
    unrolled_reduction: int = 40
    """A serial reduction loop of at most this many iterations innermost: LLVM at opt-level 3
    unrolls it whole and vectorises the loop around it (a matrix product with an inner
    dimension of 18 or 33 ran as fast as its reordered forms)."""
    loop_cycles: float = 1.0
    launch_cycles: float = 20000.0
    """Thread-pool fork/join of one parallel region."""
    serial_launch_cycles: float = 200.0
    """Entering a parallel region on a one-thread pool (``cores=1``): TVM calls the region's
    closure on the calling thread, no fork or join."""
    half_cycles: float = 1.0
    """Converting one float16/bfloat16 element to or from float32 (every f16 access of a
    scalar loop; divided by the lanes when the loop vectorises: one F16C instruction converts
    a vector)."""
    gather_cycles: float = 1.0
    """One lane of a strided access in a vectorised loop: a scalar load or store (a gather
    or scatter); the arithmetic on the lanes stays vectorised."""
    parallel_efficiency: float = 0.9
    memory_weight: float = 1.0
    """Memory and compute overlap: time = max(compute, memory) + (1 - overlap) * min(...)."""
    overlap: float = 0.5
    unroll_budget: int = 32
    """Copies of a loop body up to which unrolling (``U``) saves the loop's bookkeeping. LLVM
    at opt-level 3 unrolls short loops itself; beyond this many copies (the lowering unrolls
    up to 256, nested U levels multiply) the code only grows: those U levels are charged as
    serial loops and the equation's time grows by ``code_growth`` (docs/COST.md)."""
    code_growth: float = 0.1

    def ops(self) -> dict[str, float]:
        return dict(self.op_cycles)


CPU = Machine()


@dataclass(frozen=True)
class NestCost:
    """The estimate for one top-level nest, in seconds."""
    nest: int
    iterations: int
    compute_s: float
    memory_s: float
    overhead_s: float
    seconds: float
    vectorized: bool
    parallel: bool
    chain: bool

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class Cost:
    """Estimated run time (seconds) with its breakdown per top-level nest and the implicit
    initialisation fills. Orders like a float (smaller is faster)."""
    seconds: float
    nests: tuple[NestCost, ...] = ()
    fill_s: float = 0.0
    problem: str | None = None   # set when the program could not be costed (then seconds=inf)

    def __float__(self) -> float:
        return self.seconds

    def __lt__(self, other: "Cost") -> bool:
        return self.seconds < float(other)

    @property
    def breakdown(self) -> dict[str, float]:
        return {"compute_s": sum(n.compute_s for n in self.nests),
                "memory_s": sum(n.memory_s for n in self.nests),
                "overhead_s": sum(n.overhead_s for n in self.nests), "fill_s": self.fill_s}

    def to_dict(self) -> dict:
        return {"seconds": self.seconds, "fill_s": self.fill_s, "problem": self.problem,
                "breakdown": self.breakdown, "nests": [n.to_dict() for n in self.nests]}


# ---------------------------------------------------------------- operations

SIMD_MATH = ("exp", "log", "erf")   # the functions vector_math.py calls libmvec for


def _op_cycles(expr, ops: dict[str, float]) -> tuple[float, float, float]:
    """(cycles of cheap operations, of SIMD_MATH calls, of the other transcendental one:
    ``**``) of one evaluation. Every access is a load, the gathers in a subscript too; nothing
    else in a subscript costs (so only the subscripts of a gather are walked)."""
    cheap = simd = trans = 0.0
    for node in walk_values(expr):
        if isinstance(node, Var):
            for _ in _accesses(node):
                cheap += ops["load"]
        elif isinstance(node, Bin):
            cheap += ops.get(node.op, 1.0) if node.op != "**" else 0.0
            trans += ops["**"] if node.op == "**" else 0.0
        elif isinstance(node, Neg):
            cheap += ops["neg"]
        elif isinstance(node, Call):
            c = ops.get(node.fn, 1.0)
            if node.fn in SIMD_MATH:
                simd += c
            else:
                cheap += c
        elif isinstance(node, Compare):
            cheap += ops["cmp"] * len(node.ops)
        elif isinstance(node, IfThenElse):
            cheap += ops["select"]
        elif isinstance(node, Logic):
            cheap += ops["logic"]
    return cheap, simd, trans


@lru_cache(maxsize=1 << 14)
def _value_cycles(value, op_items: tuple) -> tuple[float, float, float]:
    """``_op_cycles(value, dict(op_items))``, kept per value expression: a search node's new
    nests restate the right-hand sides of their parent's (about 7,300 distinct among 16,300
    equations of an attention node's steps). ``op_items``: the machine's own
    ``Machine.op_cycles``, one object however many entries hold it (a copy per call kept 19
    tuples alive per entry, about 190,000 objects for the garbage collector to walk after
    ranking two attention nodes)."""
    return _op_cycles(value, dict(op_items))


# ---------------------------------------------------------------- access patterns

def _subscript_form(sub) -> tuple[dict[str, float], bool]:
    """Coefficient per index of one subscript (``//``/``%`` approximated as a divided /
    bounded use); the flag says the form is exact (affine)."""
    form = affine(sub)
    if form is not None:
        return {k: float(v) for k, v in form[0].items()}, True
    if isinstance(sub, IBin) and sub.op in ("//", "%") and isinstance(sub.rhs, IConst):
        inner, _ = _subscript_form(sub.lhs)
        k = max(sub.rhs.value, 1)
        return ({n: c / k for n, c in inner.items()} if sub.op == "//" else inner), False
    coef: dict[str, float] = {}
    for node in walk(sub):
        if isinstance(node, IName):
            coef[node.name] = 1.0
    return coef, False


@dataclass(frozen=True, eq=False, slots=True)
class _Access:
    """One access's shape, element size and subscript forms. Made once per (access, shape) by
    ``_access`` (cached), so it is compared by identity. What is read off it per loop index
    (``_stride``) and per loop spans (``_line_column``) is kept in its own dicts, keyed by strings
    and ints: such a dict holds no object the garbage collector tracks (a tuple key is one),
    and a search node's ranking keeps about 100,000 of these values."""
    name: str
    shape: tuple[int, ...]
    bytes: int
    forms: tuple[dict[str, float], ...]
    gather: bool
    half: bool = False   # float16/bfloat16: converted to float32 to compute
    # name and subscript forms as a string (``_var_forms``; a value the garbage collector does
    # not track): accesses with equal ``same`` move the same lines, and ``_memory_cycles``
    # counts them once
    same: str = ""
    names: frozenset = frozenset()   # the loop indices its forms read
    # shared by the accesses of one layout (``_layout``): what they read of the access
    strides: dict = field(default_factory=dict)   # loop index -> _stride
    columns: dict = field(default_factory=dict)   # _span_number -> _line_column


def _access(var: Var, shapes: dict[str, tuple[int, ...]]) -> _Access:
    """``var``'s access in ``shapes``. A search's candidates restate most accesses of their
    parent (a relayout changes the accesses of one tensor), so each is made once per shape."""
    shape = shapes.get(var.name)
    return _access_of(var, tuple(shape) if shape else None)


@lru_cache(maxsize=1 << 16)
def _access_of(var: Var, shape: tuple[int, ...] | None) -> _Access:
    forms, gather, same, names, layout = _var_forms(var)
    shape = tuple(shape or (1 for _ in var.subscripts))
    size = DTYPE_BYTES.get(var.dtype, 4)
    return _Access(var.name, shape, size, forms, gather, var.dtype in HALF_DTYPES, same, names,
                   *_layout(layout, shape, size, gather))


@_memo_by_node(1 << 16)
def _var_forms(var: Var) -> tuple:
    """``(forms, gather, same, names, layout)`` of ``_Access`` for ``var``, whatever its
    shape: read per subscript (``_subscript_facts``), since a search node's accesses are a few
    hundred distinct subscripts in new combinations. ``same``: the name and each form's
    sorted items; ``layout``: each form's items in their order (strings joined by ``;``, which
    neither a name nor the repr of a form holds)."""
    facts = [_subscript_facts(sub) for sub in var.subscripts]
    forms = tuple(f[0] for f in facts)
    return (forms, any(f[1] for f in facts), ";".join((var.name, *(f[2] for f in facts))),
            frozenset(name for f in forms for name in f), ";".join(f[3] for f in facts))


@_memo_by_node(1 << 14)
def _subscript_facts(sub) -> tuple[dict[str, float], bool, str, str]:
    """``(form, gather, repr of the sorted items of form, repr of its items)`` of one
    subscript: its ``_subscript_form`` (shared by every access that has it, never changed),
    whether it reads a tensor."""
    form, _ = _subscript_form(sub)
    return (form, any(isinstance(n, Var) for n in walk(sub)), repr(sorted(form.items())),
            repr(list(form.items())))


@lru_cache(maxsize=1 << 14)
def _layout(layout: str, shape: tuple[int, ...], size: int, gather: bool
            ) -> tuple[dict, dict]:
    """The ``strides`` and ``columns`` dicts of every access with these forms (``layout``: their
    items in order, which ``_range`` adds in), shape, element size and gather flag: all that
    ``_stride_of`` and ``_line_column_of`` read of an access. Accesses of other tensors with the
    same shape and subscripts (most of an attention program's) share what is read off them."""
    return {}, {}


def _stride(acc: _Access, index: str) -> float | None:
    """Elements between two consecutive values of ``index`` (``0`` when invariant); ``None``
    for a gather. Kept per access (``acc.strides``): an access is asked about the same loop
    indices many times (its equation's vectorisation, chains, tiles, memory)."""
    try:
        return acc.strides[index]
    except KeyError:
        stride = acc.strides[index] = _stride_of(acc, index)
        return stride


def _stride_of(acc: _Access, index: str) -> float | None:
    if acc.gather:
        return None
    stride, inner = 0.0, 1
    for dim in range(len(acc.forms) - 1, -1, -1):
        stride += acc.forms[dim].get(index, 0.0) * inner
        inner *= max(acc.shape[dim] if dim < len(acc.shape) else 1, 1)
    return abs(stride)


# (loop spans, line bytes) -> number, for ``_line_column``'s per-access dicts. Numbers are never
# reused: when the table is emptied (it holds at most SPANS entries) the count goes on, and
# the dicts' entries under old numbers are never read again.
_spans: dict[tuple, int] = {}
_span_count = itertools.count()   # next() is atomic: no two keys get one number
SPANS = 1 << 16


def _span_number(spans: tuple[tuple[str, int], ...], line_bytes: int) -> int:
    key = (spans, line_bytes)
    number = _spans.get(key)
    if number is None:
        if len(_spans) >= SPANS:
            _spans.clear()
        number = _spans[key] = next(_span_count)
    return number


def _range(form: dict[str, float], size: int, extents: dict[str, int]) -> float:
    """Distinct values one dimension of subscript form ``form`` (of ``size`` elements) takes
    while the loops of ``extents`` (index -> extent) run through all their values."""
    # one pass: the span's terms added left to right from 0, as sum() adds them
    spread, touched = 0, 1.0
    for i, c in form.items():  # a dim visited with gaps touches extent points, not span
        extent = extents.get(i)
        if extent is not None:
            spread += abs(c) * (extent - 1)
            touched *= extent
    return min(1.0 + spread, touched, float(max(size, 1))) if touched > 1 else 1.0


# ---------------------------------------------------------------- one nest

def _flatten(nest: LoopNest, loops: tuple[Loop, ...] = ()) -> list[tuple[tuple[Loop, ...], Equation]]:
    out = []
    loops = loops + nest.loops
    for item in nest.body:
        if isinstance(item, Equation):
            out.append((loops, item))
        else:
            out.extend(_flatten(item, loops))
    return out


def _vectorizes(loops: tuple[Loop, ...], accs: list[_Access], target: _Access,
                chain: bool) -> tuple[bool, int]:
    """(vectorised, strided accesses) for the innermost loop of an equation: an explicit V
    loop always vectorises, its accesses that are neither unit-stride nor invariant along it
    becoming gathers (or a scatter); a serial one only when LLVM's loop vectoriser can take it
    (the target stored unit-stride along it, no chain, at least 4 iterations; a strided read
    becomes a gather, as AVX2 and AVX-512 have them)."""
    if not loops:
        return False, 0
    inner = loops[-1]
    if inner.kind not in ("L", "V", "B"):
        return False, 0
    strides = [_stride(a, inner.index) for a in accs + [target]]
    strided = sum(1 for s in strides if s is None or s not in (0.0, 1.0))
    if inner.kind == "V":
        return True, strided
    stores_dense = _stride(target, inner.index) == 1.0
    vec = stores_dense and not chain and inner.extent >= 4
    return vec, strided if vec else 0


def _outer_vector_loop(loops: tuple[Loop, ...]) -> Loop | None:
    """The innermost explicit V loop of ``loops`` that has serial loops inside it (None when
    there is none, or the innermost loop is itself the V loop)."""
    for loop in reversed(loops[:-1]):
        if loop.kind == "V":
            return loop
    return None


def _unrolled_reduction(loops: tuple[Loop, ...], target: _Access, m: Machine) -> int:
    """How many innermost loops LLVM unrolls whole as one short reduction: the longest run of
    innermost serial (L, U) loops that do not move the target, together at most
    ``Machine.unrolled_reduction`` iterations, inside a loop that moves the target (0: none;
    inside a further reduction loop the unrolled copies still chain). A reduction of 18 split
    6 x 3 is unrolled like the loop of 18."""
    count, trip = 0, 1
    for loop in reversed(loops):
        if loop.kind not in ("L", "U") or _stride(target, loop.index) != 0.0:
            break
        if trip * loop.extent > m.unrolled_reduction:
            break
        trip *= loop.extent
        count += 1
    if count == len(loops) or _stride(target, loops[-count - 1].index) == 0.0:
        return 0   # a longer reduction goes on around it: the chain goes on through the copies
    return count


def _nest_cost(n: int, nest: LoopNest, shapes: dict[str, tuple[int, ...]], m: Machine
               ) -> NestCost:
    return NestCost(n, *_nest_terms(nest, shapes, m))


def _nest_terms(nest: LoopNest, shapes: dict[str, tuple[int, ...]], m: Machine) -> tuple:
    """``NestCost``'s fields after ``nest`` (``SharedSeconds`` reads the seconds alone and builds
    no ``NestCost``)."""
    cycle = 1e-9 / m.ghz
    ops = m.ops()
    compute = memory = overhead = 0.0
    any_vec = any_chain = False
    equations = _flatten(nest)
    loops_all = nest.loops
    # the outermost P loop (the lowering parallelises only the first one on a path)
    p_at = next((i for i, l in enumerate(loops_all) if l.kind == "P"), None)
    if p_at is None:
        for loops, _ in equations:
            p_at2 = next((i for i, l in enumerate(loops) if l.kind == "P"), None)
            if p_at2 is not None:
                p_at, loops_all = p_at2, loops
                break
    total_iters = 0
    for loops, eq in equations:
        iters = math.prod(l.extent for l in loops)
        total_iters += iters
        target = _access(eq.target, shapes)
        reads = [_access(v, shapes) for v in _equation_reads(eq)]
        acc_op = accumulation_op(eq)
        chain = bool(acc_op) and bool(loops) and _stride(target, loops[-1].index) == 0.0
        # a short reduction (a pooling window) LLVM unrolls whole and vectorises the loop
        # around it, in float16 too since the lowering's max/min test NaN on the bits (a 2x2
        # max pool over 4x8x16x16: float16 0.005 ms, float32 0.008 ms; TVM's isnan had made
        # the float16 one a scalar chain, 0.12 ms)
        unrolled = _unrolled_reduction(loops, target, m) if chain else 0
        if unrolled:
            # LLVM unrolls the short reduction whole; the loop around it is the innermost
            # the vectoriser sees, each lane running its own element's chain
            chain = False
            vec, strided = _vectorizes(loops[:-unrolled], reads, target, chain)
            vec = vec and loops[-unrolled - 1].kind != "V"
        else:
            vec, strided = _vectorizes(loops, reads, target, chain)
        # an explicit V loop around serial ones: TVM vectorises the whole body along its lanes
        # (the inner loops run once per group of lanes), its accesses strided along it gathers
        outer_v = _outer_vector_loop(loops) if not vec else None
        cheap, simd, trans = _value_cycles(eq.value, m.op_cycles)
        cheap += ops["store"]
        # float16/bfloat16 accesses convert to and from float32, one instruction per vector
        cheap += m.half_cycles * sum(1 for a in reads + [target] if a.half)
        # an accumulation along vector lanes whose target stays put in the loop around them (a
        # reduction loop outside the lanes, or outside unrolled U rows around them: a 2-D
        # tile): each vector of lanes is a dependency chain over that loop, the tile's vectors
        # independent chains, and a local target (a register tile) is never loaded or stored
        vloops = loops[:-unrolled] if unrolled else loops   # the vectoriser's innermost last
        tile, k = (vloops[-1].extent, len(vloops) - 2) if vloops else (1, -1)
        while (k >= 0 and vloops[k].kind in ("U", "V")
               and _stride(target, vloops[k].index) not in (None, 0.0)):
            tile, k = tile * vloops[k].extent, k - 1
        held = (bool(acc_op) and vec and not chain and k >= 0
                and _stride(target, vloops[k].index) == 0.0)
        if held and eq.target.scope == "l":
            cheap -= ops["load"] + ops["store"]
        lanes = max(m.vector_bytes // (4 if target.half else target.bytes), 1)
        if vec:
            # the arithmetic runs on vectors; each strided access is one scalar load per lane;
            # exp/log one SIMD call per vector of an explicit V loop (its lanes padded to a
            # register: vector_math.py), else one scalar call per lane
            v = vloops[-1]
            if m.vector_math and v.kind == "V" and eq.target.dtype in ("f16", "f32", "f64"):
                simd /= min(v.extent, lanes)
            per_iter = cheap / lanes + simd + trans + strided * m.gather_cycles
        elif outer_v is not None:
            width = min(outer_v.extent, lanes)
            gathers = sum(1 for a in reads + [target]
                          if _stride(a, outer_v.index) not in (0.0, 1.0))
            if m.vector_math and eq.target.dtype in ("f16", "f32", "f64"):
                simd /= width
            per_iter = cheap / width + simd + trans + gathers * m.gather_cycles
        else:
            per_iter = cheap + simd + trans
        latency = m.chain_latency if eq.target.scope == "l" else m.memory_chain_latency
        if chain:   # around V lanes, one chain per group of lanes
            per_iter = max(per_iter, latency / (min(outer_v.extent, lanes) if outer_v else 1))
        if held:   # the tile's chains run side by side: one latency per outer iteration
            per_iter = max(per_iter, latency / tile)
        any_vec |= vec or outer_v is not None
        any_chain |= chain
        copies = math.prod(l.extent for l in loops if l.kind == "U")
        grown = copies > m.unroll_budget
        compute += iters * per_iter * cycle * (1 + m.code_growth if grown else 1)
        # loop bookkeeping: one per iteration of each loop level, vector levels free, unrolled
        # levels free within the unroll budget; the loops inside a V loop around serial ones
        # run once per group of its lanes
        level_iters = 1
        for l in loops:
            level_iters *= 1 if l is outer_v else l.extent
            free = (l.kind == "V" or (l.kind == "U" and not grown) or (vec and l is vloops[-1])
                    or l in loops[len(vloops):])   # a short reduction LLVM unrolled
            if not free:
                overhead += level_iters * m.loop_cycles * cycle / max(len(equations), 1)
        memory += _memory_cycles(loops, [target] + reads, m) * cycle * m.memory_weight
    hi, lo = max(compute, memory), min(compute, memory)
    seconds = hi + (1 - m.overlap) * lo + overhead
    parallel = p_at is not None and loops_all[p_at].extent > 1
    if parallel:
        ext = loops_all[p_at].extent
        ways = min(m.cores, ext) * m.parallel_efficiency if m.cores > 1 else 1.0
        entries = math.prod(l.extent for l in loops_all[:p_at])
        launch = m.launch_cycles if m.cores > 1 else m.serial_launch_cycles
        seconds = seconds / max(ways, 1.0) + entries * launch * cycle
        overhead += entries * launch * cycle
    return total_iters, compute, memory, overhead, seconds, any_vec, parallel, any_chain


@lru_cache(maxsize=1 << 14)
def _nest_cost_of(nest: LoopNest, shapes: tuple, m: Machine) -> NestCost:
    return _nest_cost(0, nest, dict(shapes), m)


def _cached_nest_cost(nest: LoopNest, shapes: dict, m: Machine) -> NestCost:
    """Candidates share most nests with their parent: each nest is costed once per shapes of
    the tensors it touches (its cost reads no others), so a step that adds a tensor or changes
    one nest leaves the other nests' entries valid."""
    return _nest_cost_of(nest, tuple((n, shapes.get(n)) for n in _nest_tensors(nest)), m)


@lru_cache(maxsize=1 << 14)
def _nest_tensors(nest: LoopNest) -> tuple[str, ...]:
    names: set[str] = set()
    for _, eq in _flatten(nest):   # every access of a nest is in one of its equations
        names |= _equation_tensors(eq)
    return tuple(sorted(names))


# A step rebuilds the nests it changes around the equations it leaves alone (the decoder shares
# them), so what is read off an equation is kept per equation: hashing one is a walk in C, far
# cheaper than walking it again in Python.
@_memo_by_node(1 << 16)
def _equation_tensors(eq: Equation) -> frozenset[str]:
    """``analysis.tensor_names(eq)``: the target's name and those of the accesses it reads
    (``_equation_reads``, which hold the gathers in the target's subscripts), without walking
    the equation a second time."""
    return frozenset((eq.target.name, *(v.name for v in _equation_reads(eq))))


@_memo_by_node(1 << 16)
def _equation_reads(eq: Equation) -> tuple[Var, ...]:
    """``analysis.equation_reads(eq)``: the accesses of its right-hand side, then the gathers in
    its target's subscripts, each part kept per value expression and per target (equations
    are new far more often than their parts)."""
    return _value_reads(eq.value) + _target_reads(eq.target)


@_memo_by_node(1 << 14)
def _value_reads(value) -> tuple[Var, ...]:
    """``tuple(analysis.accesses(value))``, walking only the subscripts of gathers."""
    return tuple(v for node in walk_values(value) if isinstance(node, Var)
                 for v in _accesses(node))


def _accesses(var: Var) -> Iterable[Var]:
    """``analysis.accesses(var)``: ``var`` and the gathers in its subscripts (pre-order)."""
    return accesses(var) if _var_forms(var)[1] else (var,)


@_memo_by_node(1 << 14)
def _target_reads(target: Var) -> tuple[Var, ...]:
    return tuple(v for sub in target.subscripts for v in accesses(sub))


@lru_cache(maxsize=1 << 14)
def _nest_written_extents(nest: LoopNest) -> tuple:
    """``analysis.written_extents`` of the nest's tensors, as ``(name, extent)`` pairs in the
    order of their first writes: each equation's target extent under its loops' ranges, kept
    per (target, spans of the loops its subscripts name), since a step that changes a nest's
    loop kinds, other equations or loops the target does not read leaves most targets' extents
    as they were."""
    extents: dict[str, tuple[int, ...] | None] = {}
    for loops, eq in _flatten(nest):
        names = _index_names(eq.target)
        merge_extent(extents, eq.target.name, _target_extent(
            eq.target, tuple((l.index, l.extent) for l in loops if l.index in names)))
    return tuple(extents.items())


@_memo_by_node(1 << 14)
def _index_names(node) -> frozenset[str]:
    """Every loop index named in an access or a subscript (gathers' included): its extent
    reads the ranges of these alone."""
    return frozenset(n.name for n in walk(node) if isinstance(n, IName))


@lru_cache(maxsize=1 << 16)
def _target_extent(target: Var, spans: tuple[tuple[str, int], ...]) -> tuple[int, ...] | None:
    """``analysis.subscript_extent`` of ``target`` with each loop index of ``spans`` (``(index,
    extent)``, outermost first) ranging over ``0 .. extent - 1`` (the others it does not
    read), one subscript at a time: each under the spans of the loops it names alone, since
    targets that differ in one subscript share the others' bounds."""
    dims = []
    for sub in target.subscripts:
        names = _index_names(sub)
        bound = _subscript_bound(sub, tuple(span for span in spans if span[0] in names))
        if bound is None:
            return None
        dims.append(bound)
    return tuple(dims)


@lru_cache(maxsize=1 << 14)
def _subscript_bound(sub, spans: tuple[tuple[str, int], ...]) -> int | None:
    """The largest value of the subscript ``sub`` plus one (``subscript_extent``'s, per
    dimension) with the loops of ``spans`` ranging over ``0 .. extent - 1``."""
    r = index_range(sub, {index: (0, extent - 1) for index, extent in spans})
    return None if r is None else r[1] + 1


def _shapes(program: Program) -> dict[str, tuple[int, ...]]:
    """Every tensor's shape: the signature's, and each intermediate's per-dimension largest
    written subscript plus one (``analysis.intermediate_shapes``, merged from per-nest extents
    that are cached: candidates share most nests)."""
    return _merged_shapes(_signature_shapes(program.signature),
                          (_nest_written_extents(nest) for nest in program.leir.nests))


def _signature_shapes(signature) -> dict[str, tuple[int, ...]]:
    return {t.name: tuple(t.shape) for t in signature.tensors}


def _merged_shapes(signature_shapes: dict, written: Iterable[tuple]) -> dict:
    """The signature's shapes and the intermediates' shapes merged from each nest's written
    extents (``_nest_written_extents``), in nest order."""
    shapes = dict(signature_shapes)
    merged: dict[str, tuple[int, ...] | None] = {}
    for extents in written:
        for name, dims in extents:
            if name not in shapes:
                merge_extent(merged, name, dims)
    shapes.update({k: v for k, v in merged.items() if v is not None})
    return shapes


def _memory_cycles(loops: tuple[Loop, ...], accs: list[_Access], m: Machine) -> float:
    """Cycles spent moving lines between cache levels for one equation's accesses."""
    if not accs:
        return 0.0
    unique = {a.same: a for a in accs}
    accs = list(unique.values())
    d = len(loops)
    # lines of each access in the sub-nest loops[k:], for k = d (one iteration) .. 0 (whole nest)
    spans = tuple((l.index, l.extent) for l in loops)
    number = _span_number(spans, m.line_bytes)
    foot = [sum(row) for row in zip(*[_line_column(a, spans, number, m.line_bytes)
                                      for a in accs])]
    trips = [1]
    for l in loops:
        trips.append(trips[-1] * l.extent)
    cycles = 0.0
    inner = loops[-1].index if loops else None
    conflicts = inner is not None and any(_set_conflict(a, inner, m) for a in accs)
    for capacity, line_cost in m.caches:
        lines_fit = capacity / m.line_bytes
        # the outermost k whose sub-nest footprint fits: the accesses stream through the
        # cache once per trip of the loops outside it
        k = 0
        while k < d and foot[k] > lines_fit:
            k += 1
        moved = foot[k] * trips[k]
        if 0 < k and 2 * foot[k] <= lines_fit and not conflicts:
            # the previous trip's lines are still there: across the loop around the sub-nest
            # only the lines it has not touched yet are moved (a strided walk whose rows fit
            # reuses each line for its neighbouring columns)
            moved = min(moved, foot[k - 1] * trips[k - 1])
        cycles += moved * line_cost
    return cycles


def _line_column(acc: _Access, spans: tuple[tuple[str, int], ...], number: int,
                 line_bytes: int) -> tuple[float, ...]:
    """Distinct cache lines ``acc`` touches in each sub-nest ``spans[k:]`` (``(index, extent)``
    of its loops, outermost first, running through all their values), for k = 0 .. len(spans),
    kept per layout and ``number``: ``_span_number(spans, line_bytes)`` (the accesses a step
    leaves alone keep their loops' spans, and other tensors' accesses share a layout). Per
    dimension, the values its form takes (``_range``); a dimension whose form names no loop of
    the sub-nest is one value, and the last dimension, walked with a unit coefficient, is
    counted in lines."""
    try:
        return acc.columns[number]
    except KeyError:
        column = acc.columns[number] = _line_column_of(acc, spans, line_bytes)
        return column


def _line_column_of(acc: _Access, spans: tuple[tuple[str, int], ...], line_bytes: int
                    ) -> tuple[float, ...]:
    """Each sub-nest adds one loop around the last: only the dimensions whose forms name its
    index change their ranges (``_range``), and whether the last dimension is walked densely
    can only turn true."""
    d = len(spans)
    column = [1.0] * (d + 1)   # a sub-nest of loops the access does not read: one line
    if not acc.forms:
        return tuple(column)
    names, forms, shape, gather = acc.names, acc.forms, acc.shape, acc.gather
    last = forms[-1]
    per_line = max(line_bytes // acc.bytes, 1)
    extents: dict[str, int] = {}
    ranges = [1.0] * len(forms)
    lines, dense = 1.0, False
    for k in range(d - 1, -1, -1):
        index, extent = spans[k]
        if index in names and index not in extents:   # an inner loop of one index wins
            extents[index] = extent
            for dim, form in enumerate(forms):
                if index in form:
                    ranges[dim] = _range(form, shape[dim] if dim < len(shape) else 1, extents)
            if gather:
                lines = float(math.prod(ranges))
            else:
                dense = dense or abs(last.get(index, 0.0)) == 1
                last_lines = math.ceil(ranges[-1] / per_line) if dense else ranges[-1]
                lines = float(math.prod(ranges[:-1]) * last_lines)
        column[k] = lines
    return tuple(column)


def _set_conflict(acc: _Access, index: str, m: Machine) -> bool:
    """The access walks ``index`` with a stride of a multiple of 2 KiB: its lines fall into a
    few sets of the cache, which then holds far fewer of them than its capacity."""
    stride = _stride(acc, index)
    return stride is not None and stride * acc.bytes >= 2048 and (stride * acc.bytes) % 2048 == 0


def _fill_seconds(targets: Iterable[tuple[str, bool, int]], inputs: set[str], shapes,
                  m: Machine) -> float:
    """The lowering initialises an accumulation target over its whole shape before its first
    write: a streaming store of its bytes. ``targets``: every equation's ``_fill_targets``, in
    program order."""
    written: set[str] = set()
    total = 0
    for name, accumulates, size in targets:
        if accumulates and name not in written and name not in inputs:
            total += math.prod(shapes.get(name, (1,))) * size
        written.add(name)
    lines = total / m.line_bytes
    return lines * m.caches[-1][1] * 0.25 * 1e-9 / m.ghz


@lru_cache(maxsize=1 << 14)
def _fill_targets(nest: LoopNest) -> tuple[tuple[str, bool, int], ...]:
    """Per equation of ``nest``, in order: its target, whether it accumulates, and the bytes
    of one element of the target."""
    return tuple((eq.target.name, bool(accumulation_op(eq)), DTYPE_BYTES.get(eq.target.dtype, 4))
                 for _, eq in _flatten(nest))


# ---------------------------------------------------------------- API

def cost(program: Program, machine: Machine = CPU) -> Cost:
    """Estimated CPU run time of ``program`` (seconds) with a per-nest breakdown. Never raises:
    a program the model cannot read gets ``seconds=inf`` and ``problem``."""
    try:
        sig = program.signature
        shapes = _shapes(program)
        nests = tuple(replace(_cached_nest_cost(nest, shapes, machine), nest=i)
                      for i, nest in enumerate(program.leir.nests))
        fill = _fill_seconds((t for nest in program.leir.nests for t in _fill_targets(nest)),
                             set(sig.input_names), shapes, machine)
        return Cost(sum(n.seconds for n in nests) + fill, nests, fill)
    except Exception as err:  # noqa: BLE001 -- ranking must go on; the reason is kept
        return Cost(math.inf, problem=f"{type(err).__name__}: {err}")


def kernel_cost(program: Program, machine: Machine = CPU) -> Callable[[LoopNest], float]:
    """Modelled seconds of one top-level nest in ``program``'s tensor shapes. ``cost(p)`` is
    the sum of these over ``p``'s nests plus the fill of its accumulations, so programs with
    the same tensors and accumulations -- the loop strategies' variants of one program, which
    the factored exploration extracts from -- rank by the sum over their nests."""
    shapes = _shapes(program)

    def seconds(nest: LoopNest) -> float:
        try:
            return _cached_nest_cost(nest, shapes, machine).seconds
        except Exception:  # noqa: BLE001 -- as cost(): an unreadable nest ranks last
            return math.inf
    return seconds


_EXTENTS_NUMBER, _FILLS_NUMBER = itemgetter(4), itemgetter(5)   # of SharedSeconds._nest's facts


class SharedSeconds:
    """``cost(p, machine).seconds`` of many programs that share most of their nests -- a search
    node's steps and their own steps -- for ranking thousands of them. What ``cost`` computes
    per nest (written extents, tensors, accumulation fills) is kept per distinct nest, the
    shapes merged from the written extents per combination of them, and a nest's seconds per
    (nest, shapes), so a program costs one look-up per nest and a step pays only for the nests
    it changed. The result is exactly
    ``cost(p).seconds``: the same sums in the same order (tests/test_cost_model.py).

    ``of(signature, nests)`` costs a program given as its nests, for callers that never build
    the ``Program`` (a lookahead that only needs the cheapest of its steps)."""

    def __init__(self, machine: Machine = CPU):
        self.machine = machine
        self._nests: dict[int, tuple] = {}        # id(nest) -> facts of the first equal nest
        self._held: list[LoopNest] = []           # the nests _nests is keyed by (their ids)
        self._canonical: dict[LoopNest, int] = {}  # nest -> number of the first equal nest
        # by nest number: its facts, (number, ...) of ints, strings and tuples of them, which
        # the garbage collector untracks; and the first nest of that number
        self._facts: list[tuple] = []
        self._first: list[LoopNest] = []
        self._numbers: dict[tuple, int] = {}       # written extents, fill targets -> number
        self._values: dict[tuple, tuple] = {}      # a nest's facts -> the first equal ones
        # extents numbers -> (shapes, their number, changed tensors, reference number << 32)
        self._shapes: dict[tuple, tuple] = {}
        self._references: dict[int, tuple] = {}    # id(signature) -> (shapes, number) of the first
        # (shapes number << 32 | nest number) -> seconds: an int key is not tracked by the
        # garbage collector, a tuple is (about 100,000 of them per MHA node)
        self._by_shapes: dict[int, float] = {}
        self._fills: dict[tuple, float] = {}       # (shapes number, fill numbers) -> seconds
        # (number of the shapes a nest reads << 32 | nest number) -> seconds; each distinct
        # nest is costed here once per shapes, so not through _nest_cost_of's cache
        self._reads: dict[tuple, int] = {}         # shapes a nest reads -> number
        self._seconds: dict[int, float] = {}
        self._signatures: dict[int, tuple] = {}    # id(signature) -> (signature, shapes, inputs)

    def __call__(self, program: Program) -> float:
        return self.of(program.signature, program.leir.nests)

    def of(self, signature, nests: Sequence[LoopNest]) -> float:
        try:
            return self._seconds_of(signature, nests)
        except Exception:  # noqa: BLE001 -- as cost(): ranking goes on, the program ranks last
            return math.inf

    def _nest(self, nest: LoopNest) -> tuple:
        """``(its number, written extents, tensors, fill targets, ...)``, the facts computed
        once per distinct nest: a search node's steps are decoded afresh, so most of its nest
        objects equal one costed before (a child node shares all but one nest with its
        parent). Each object is kept in ``_held``, so that its id is not reused while it is a
        key; the entry is the first equal nest's own tuple (no tuple per object for the garbage
        collector to walk; it holds no nest, so the collector untracks it)."""
        hit = self._nests.get(id(nest))
        if hit is None:
            number = self._canonical.setdefault(nest, len(self._canonical))
            if number == len(self._facts):
                # each distinct nest is seen here once: the module's per-nest caches would
                # only keep a second copy of these facts (and the nest) alive
                # (equal facts are kept as one object: most nests share theirs with others)
                extents = self._one(_nest_written_extents.__wrapped__(nest))
                fills = self._one(_fill_targets.__wrapped__(nest))
                tensors = self._one(_nest_tensors.__wrapped__(nest))
                self._first.append(nest)
                self._facts.append((number, extents, tensors, fills,
                                    self._numbers.setdefault(extents, len(self._numbers)),
                                    self._numbers.setdefault(fills, len(self._numbers))))
            hit = self._nests[id(nest)] = self._facts[number]
            self._held.append(nest)
        return hit

    def _new_shapes(self, signature: int, shapes: dict) -> tuple:
        """``(shapes, their number, the tensors whose shape differs from the signature's
        reference shapes, the reference's number << 32)``; the reference is the first shapes
        numbered for the signature. A step that changes what one nest writes changes the shape
        of a tensor or two: the nests that touch none of them cost what they cost in the
        reference (one look-up, no key built of their tensors' shapes)."""
        number = len(self._shapes)
        reference = self._references.setdefault(signature, (shapes, number))
        ref_shapes, ref_number = reference
        changed = frozenset(n for n in shapes.keys() | ref_shapes.keys()
                            if shapes.get(n) != ref_shapes.get(n))
        return shapes, number, changed, ref_number << 32

    def _one(self, value: tuple) -> tuple:
        """The first value equal to ``value`` seen (``value`` when it is the first)."""
        return self._values.setdefault(value, value)

    def _seconds_of(self, signature, nests: Sequence[LoopNest]) -> float:
        known = self._signatures.get(id(signature))
        if known is None:
            known = self._signatures[id(signature)] = (
                signature, _signature_shapes(signature), set(signature.input_names))
        _, signature_shapes, inputs = known
        known_nest = self._nests.get
        facts = [known_nest(id(nest)) or self._nest(nest) for nest in nests]
        # A program's shapes depend only on its nests' written extents (and the signature):
        # the steps of one program mostly change nests without changing what they write, so
        # they share the merged shapes, each nest's seconds in them, and the fills' seconds.
        key = (id(signature), tuple(map(_EXTENTS_NUMBER, facts)))
        hit = self._shapes.get(key)
        if hit is None:
            hit = self._shapes[key] = self._new_shapes(
                id(signature), _merged_shapes(signature_shapes, (f[1] for f in facts)))
        shapes, shapes_number, changed, reference = hit
        parts = []
        high = shapes_number << 32   # fewer than 2**32 distinct nests: the pair is one int
        for number, _, tensors, _, _, _ in facts:
            pair = high | number
            seconds = self._by_shapes.get(pair)
            if seconds is None and changed.isdisjoint(tensors):
                # its tensors have the reference shapes: its seconds in those, when known
                seconds = self._by_shapes.get(reference | number)
            if seconds is None:
                read = tuple((n, shapes.get(n)) for n in tensors)
                key = self._reads.setdefault(read, len(self._reads)) << 32 | number
                seconds = self._seconds.get(key)
                if seconds is None:
                    seconds = self._seconds[key] = _nest_terms(
                        self._first[number], dict(read), self.machine)[4]
                self._by_shapes[pair] = seconds
            parts.append(seconds)
        fills = (shapes_number, tuple(map(_FILLS_NUMBER, facts)))
        fill = self._fills.get(fills)
        if fill is None:
            fill = self._fills[fills] = _fill_seconds((t for f in facts for t in f[3]), inputs,
                                                      shapes, self.machine)
        return sum(parts) + fill


def costs(programs: Iterable[Program], machine: Machine = CPU) -> list[Cost]:
    """``cost`` of many programs (exploration ranks thousands); programs with the same text
    and signature are costed once."""
    memo: dict[tuple[str, str], Cost] = {}
    out = []
    for p in programs:
        key = (p.text, p.signature.to_json())
        if key not in memo:
            memo[key] = cost(p, machine)
        out.append(memo[key])
    return out


def with_params(machine: Machine = CPU, **changes) -> Machine:
    """A machine with some parameters changed (calibration)."""
    return replace(machine, **changes)


__all__ = ["Machine", "CPU", "Cost", "NestCost", "SharedSeconds", "cost", "costs",
           "with_params"]
