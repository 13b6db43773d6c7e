"""LEIR program -> TVM ``tirx`` PrimFunc, built with TVM's IR builder.

The function takes the signature's inputs then its outputs as buffers (0-d buffers for
scalars). Top-level nests are emitted in order; before each one come the allocations of the
intermediates it writes first, then the implicit initialisations its accumulations need
(docs/LEIR.md §3)::

    B^{16}_{tx=0}L^{256}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,a});];
    ->
    D = T.alloc_buffer((16,))
    for i0 in range(16): D[i0] = T.float32(-inf)          # implicit init, whole shape
    for tx in range(16):                                  # B is serial on the CPU
        for a in range(256):
            D[tx] = max(D[tx], A[tx, a])                   # NaN-propagating max

Loop kinds (CPU): L serial, P parallel, V vectorized, U unrolled (while the product of the
unrolled extents stays <= 256, else serial), B serial. A P loop inside a loop that already
runs in parallel or vectorized, and a V loop inside a vectorized loop, are emitted serial
(TVM rejects nested parallel loops and nested vectorisation). On CUDA, B loops bind to the
thread axis named by the index (``tx`` -> threadIdx.x, ``bya`` -> blockIdx.y); P is serial.

Options: ``reverse_parallel`` runs every P/V/B loop serially from its last iteration to its
first; ``serial`` runs them serially in order; ``directed`` runs them serially in the order a
trailing ``int32`` argument ``leir_reverse`` chooses at run time (0 in order, 1 reversed: one
build serves both runs of the reverse-order check); ``poison`` fills every intermediate with
NaN (ints: their largest value, bool: True) right after allocation.
"""

from __future__ import annotations

import math
from contextlib import ExitStack
from dataclasses import dataclass

from ..leir.ast import Equation, LoopNest
from ..leir.hardware import thread_tag
from ..leir.program import Program
from ..leir.validate import check
from .cuda import CudaInvalid, check_launch, kernel_scoped_intermediates
from .expr import ExprLowering, identity, poison_value, tvm_dtype
from .placement import Plan, plan
from .segments import Partition, Segment
from .targets import TargetLike, target_kind

MAX_UNROLL = 256
SEGMENT_PARAM_ALIGN = 16  # bytes: what a segment may assume of its parameters' data (see run)
_PARALLEL_FILL_ELEMENTS = 1 << 14  # fills at least this large get a parallel outer loop


@dataclass(frozen=True)
class LowerOptions:
    """How loop kinds are emitted; the defaults are the program's own meaning and speed."""
    reverse_parallel: bool = False
    poison: bool = False
    serial: bool = False
    directed: bool = False

    def key(self) -> tuple:
        return (self.reverse_parallel, self.poison, self.serial, self.directed)

    @property
    def pipeline(self) -> str:
        """TVM's TIR pass pipeline for a build with these options (``tvm.compile``'s
        ``tir_pipeline``). The poisoned builds, which only verification runs, take ``"tirx"``:
        the passes for plain-loop TIR. Ours has no blocks, so the s_tir passes of TVM's default
        pipeline (schedule lowering: CompactBufferAllocation alone was 55-63% of the pass time
        on zoo programs) find nothing to do; the outputs are bitwise the same
        (tests/test_lower_build.py), the compilation about 25% cheaper. Every other build
        (timing, CUDA) takes TVM's ``"default"``."""
        return "tirx" if self.poison else "default"

    def pipeline_for(self, target) -> str:
        """:attr:`pipeline` for a build on ``target`` (a TVM target dict): the default one
        with libmvec's SIMD ``exp``/``log`` in V loops where the CPU target allows it
        (``vector_math.py``)."""
        from .vector_math import pipeline_name
        return pipeline_name(self.pipeline, target)


def lower(program: Program, target: TargetLike = "llvm", *, reverse_parallel: bool = False,
          poison: bool = False, serial: bool = False, directed: bool = False):
    """Lower a valid program to one ``tvm.tirx.PrimFunc`` named ``main`` (the program's TIR as a
    whole; ``build`` compiles large programs in segments, ``lower/link.py``).

    Raises ``LeirValidationError`` for an invalid program, ``LoweringError`` when the program
    cannot be expressed for the target, and ``CudaInvalid`` (a LoweringError) when it cannot be
    a valid CUDA kernel."""
    check(program)
    kind = target_kind(target)
    options = LowerOptions(reverse_parallel, poison, serial, directed)
    whole = plan(program)
    kernel_scoped: dict[int, list[str]] = {}
    if kind == "cuda":
        check_launch(program)
        kernel_scoped = kernel_scoped_intermediates(program, whole.scopes)
    sig = program.signature
    params = [(t.name, t.shape, t.dtype) for t in sig.inputs + sig.outputs]
    return _Lowering(program.leir.nests, params, whole, kind, options, "main",
                     kernel_scoped).run()


def lower_segment(segment: Segment, symbol: str, options: LowerOptions = LowerOptions()):
    """One segment (``lower/segments.py``) as a CPU PrimFunc exported as ``symbol``: it takes
    the segment's parameters as buffers and allocates its own intermediates.

        segment  L^{4}_{a=0}[C_{a}=A_{a}*2;]   ->   @T.prim_func def symbol(A, C): for a ...
    """
    p = Plan(segment.shapes(), segment.dtypes())
    for pos, (name, _, _) in segment.locals:
        p.allocate_before.setdefault(pos, []).append(name)
    for pos, name, op in segment.inits:
        p.init_before.setdefault(pos, []).append((name, op))
    for pos, name in segment.poisoned:
        p.poison_before.setdefault(pos, []).append(name)
    return _Lowering(segment.leir.nests, list(segment.params), p, "llvm", options, symbol,
                     exported=True).run()


def lower_driver(program: Program, partition: Partition, symbols: list[str], *,
                 directed: bool = False):
    """The ``main`` PrimFunc of a segmented build: it takes the signature's tensors, allocates
    the intermediates that cross segments and calls the segments' functions in order.

        main(A, C): X = alloc((4,)); call_packed(symbol1, A, X); call_packed(symbol2, X, C)

    ``directed``: the segments were lowered ``directed`` and the driver takes the trailing
    ``leir_reverse`` too, passing it to every segment (one build, both directions).

    The signature's tensors after the first are taken as opaque handles and passed through as
    they came: each segment checks and binds its own buffers, and binding hundreds of buffer
    arguments in one function is what grows faster than linearly in TVM (docs/ARCHITECTURE.md).
    The first is a buffer, which gives the driver its device (for its own allocations)."""
    import tvm  # noqa: F401  (loads the TVM runtime before the builder modules)
    from tvm.script.ir_builder import IRBuilder
    from tvm.tirx.script.builder import ir as T
    sig = program.signature
    buffers = {}
    with IRBuilder() as ib:
        with T.prim_func():
            T.func_name("main")
            for k, spec in enumerate(sig.inputs + sig.outputs):
                kind = T.buffer(spec.shape, spec.dtype) if k == 0 else T.handle()
                buffers[spec.name] = T.arg(spec.name, kind)
            reverse = [T.arg("leir_reverse", T.int32())] if directed else []
            T.func_attr({"tir.noalias": True})
            for k, symbol in enumerate(symbols):
                for name, shape, dtype in partition.allocations[k]:
                    buffers[name] = T.alloc_buffer(shape, dtype)
                    IRBuilder.name(name, buffers[name])
                args = [buffers[name] for name in partition.arguments[k]]
                T.evaluate(T.call_packed(symbol, *args, *reverse))
    return ib.get()


class _Lowering:
    """Emits the nests of one function through TVM's IR builder."""

    def __init__(self, nests, params, plan_: Plan, kind: str, options: LowerOptions,
                 name: str, kernel_scoped: dict[int, list[str]] | None = None,
                 exported: bool = False):
        import tvm  # noqa: F401  (loads the TVM runtime before the builder modules)
        from tvm import tirx
        from tvm.script.ir_builder import IRBuilder
        from tvm.tirx.script.builder import ir as T
        self.tirx, self.IRBuilder, self.T = tirx, IRBuilder, T
        self.nests, self.params, self.name, self.exported = nests, params, name, exported
        self.kind, self.options = kind, options
        self.plan = plan_
        self.buffers: dict = {}
        self.cuda = kind == "cuda"
        self.kernel_scoped = kernel_scoped or {}

    # ------------------------------------------------------------ function

    def run(self):
        T, IRBuilder = self.T, self.IRBuilder
        in_kernel = {n for names in self.kernel_scoped.values() for n in names}
        with IRBuilder() as ib:
            with T.prim_func():
                T.func_name(self.name)
                for name, shape, dtype in self.params:
                    # a segment's parameters may be the driver's intermediates, and TVM puts
                    # an allocation under 1 KiB on the stack, 16-byte aligned: a segment that
                    # assumed TVM's default 64 crashed on AVX (vmovaps on workload-sized
                    # softmax rows); 16 costs nothing (unaligned vector loads are as fast)
                    align = SEGMENT_PARAM_ALIGN if self.exported else 0
                    self.buffers[name] = T.arg(name, T.buffer(shape, dtype, align=align))
                if self.options.directed:
                    self.reverse = T.arg("leir_reverse", T.int32())
                attrs = {"tir.noalias": True}
                if self.exported:
                    attrs["global_symbol"] = self.name
                T.func_attr(attrs)
                for n, nest in enumerate(self.nests):
                    for name in self.plan.allocate_before.get(n, ()):
                        if name not in in_kernel:
                            self._allocate(name, "global")
                    if self.options.poison:
                        for name in self.plan.poison_before.get(n, ()):
                            self._fill(name, poison_value(self.plan.dtypes[name]))
                    for name, op in self.plan.init_before.get(n, ()):
                        if name not in in_kernel:
                            self._fill(name, identity(op, self.plan.dtypes[name]))
                    self._top_level(n, nest)
        return ib.get()

    def _allocate(self, name: str, scope: str):
        T = self.T
        dtype = self.plan.dtypes[name]
        buf = T.alloc_buffer(self.plan.shapes[name], dtype, scope=scope)
        self.IRBuilder.name(name, buf)
        self.buffers[name] = buf
        if self.options.poison:
            self._fill(name, poison_value(dtype), kernel=self.cuda and scope == "global")

    def _fill(self, name: str, value, kernel: bool | None = None):
        """``name[...] = value`` over the whole shape (as its own kernel on CUDA at top level)."""
        T = self.T
        buf, shape = self.buffers[name], self.plan.shapes[name]
        kernel = self.cuda if kernel is None else kernel
        if kernel:
            self._fill_kernel(buf, shape, value)
            return
        if not shape:
            T.buffer_store(buf, value, [])
            return
        total = math.prod(shape)
        with ExitStack() as stack:
            idx = []
            for d, extent in enumerate(shape):
                parallel = (d == 0 and not self.cuda and extent > 1
                            and total >= _PARALLEL_FILL_ELEMENTS)
                frame = T.parallel(0, extent) if parallel else T.serial(0, extent)
                v = stack.enter_context(frame)
                self.IRBuilder.name(f"i{d}", v)
                idx.append(v)
            T.buffer_store(buf, value, idx)

    def _fill_kernel(self, buf, shape, value):
        T, tirx = self.T, self.tirx
        total = math.prod(shape)
        threads = min(total, 256)
        blocks = -(-total // threads)
        with T.thread_binding(blocks, thread="blockIdx.x") as b:
            self.IRBuilder.name("bx", b)
            with T.thread_binding(threads, thread="threadIdx.x") as t:
                self.IRBuilder.name("tx", t)
                flat = b * threads + t
                idx, rest = [], flat
                for extent in reversed(shape):
                    idx.append(tirx.floormod(rest, extent))
                    rest = tirx.floordiv(rest, extent)
                idx.reverse()
                if total % threads:
                    with T.If(flat < total):
                        with T.Then():
                            T.buffer_store(buf, value, idx)
                else:
                    T.buffer_store(buf, value, idx)

    # ------------------------------------------------------------ nests and loops

    def _top_level(self, n: int, nest: LoopNest):
        if not self.cuda:
            self._nest(nest, _Context())
            return
        scoped = self.kernel_scoped.get(n, [])
        if not _has_bound_loop(nest):
            # a nest with no B loop runs as a single-thread kernel
            T = self.T
            with T.thread_binding(1, thread="blockIdx.x") as b:
                self.IRBuilder.name("bx", b)
                with T.thread_binding(1, thread="threadIdx.x") as t:
                    self.IRBuilder.name("tx", t)
                    self._kernel_locals(n, scoped)
                    self._nest(nest, _Context())
            return
        if scoped and not any(l.kind == "B" for l in nest.loops):
            raise CudaInvalid(f"nest {n + 1}: shared/local intermediate(s) {', '.join(scoped)} "
                              "need a B loop among the nest's own loops to be placed in")
        self._nest(nest, _Context(), kernel_locals=(n, scoped))

    def _kernel_locals(self, n: int, names: list[str]):
        """Shared/local intermediates of one kernel: allocated (and implicitly initialised) in
        the kernel, once every thread index of the nest is bound."""
        scope_names = {"g": "global", "s": "shared", "l": "local"}
        for name in names:
            self._allocate(name, scope_names[self.plan.scopes[name]])
        for name, op in self.plan.init_before.get(n, ()):
            if name in names:
                self._fill(name, identity(op, self.plan.dtypes[name]), kernel=False)

    def _nest(self, nest: LoopNest, ctx: "_Context", kernel_locals=None):
        with ExitStack() as stack:
            env = dict(ctx.env)
            last_bound = max((i for i, l in enumerate(nest.loops) if l.kind == "B"), default=-1)
            for i, loop in enumerate(nest.loops):
                frame, reverse, ctx = self._loop_frame(loop, ctx)
                var = stack.enter_context(frame)
                self.IRBuilder.name(loop.index, var)
                if reverse == "runtime":   # directed: leir_reverse is 0 or 1
                    env[loop.index] = var + self.reverse * (loop.extent - 1 - 2 * var)
                else:
                    env[loop.index] = (loop.extent - 1 - var) if reverse else var
                if kernel_locals is not None and i == last_bound:
                    self._kernel_locals(*kernel_locals)
            ctx = ctx.with_env(env)
            for item in nest.body:
                if isinstance(item, Equation):
                    self._equation(item, env)
                else:
                    self._nest(item, ctx)

    def _loop_frame(self, loop, ctx: "_Context"):
        """(frame, runs reversed? (True, False or "runtime"), context for the loop's body)."""
        T, opts = self.T, self.options
        extent, kind = loop.extent, loop.kind
        if kind == "B" and self.cuda and not (opts.reverse_parallel or opts.serial):
            return T.thread_binding(extent, thread=thread_tag(loop.index)), False, ctx
        if kind in ("P", "V", "B") and opts.reverse_parallel:
            return T.serial(0, extent), True, ctx
        if kind in ("P", "V", "B") and opts.directed:
            return T.serial(0, extent), "runtime", ctx
        if kind in ("P", "V", "B") and opts.serial:
            return T.serial(0, extent), False, ctx
        if kind == "P" and not self.cuda and not (ctx.in_parallel or ctx.in_vector):
            return T.parallel(0, extent), False, ctx.replace(in_parallel=True)
        if kind == "V" and not ctx.in_vector and (not self.cuda or extent in (2, 4)):
            return T.vectorized(0, extent), False, ctx.replace(in_vector=True)
        if kind == "U" and extent * ctx.unrolled <= MAX_UNROLL:
            return T.unroll(0, extent), False, ctx.replace(unrolled=ctx.unrolled * extent)
        return T.serial(0, extent), False, ctx

    # ------------------------------------------------------------ equations

    def _equation(self, eq: Equation, env):
        target = eq.target
        dtype = self.plan.dtypes.get(target.name) or tvm_dtype(target.dtype)
        lowering = ExprLowering(env, self.buffers, self.cuda)
        value = lowering.value(eq.value, dtype)
        indices = [lowering.index(s) for s in target.subscripts]
        self.T.buffer_store(self.buffers[target.name], value, indices)


@dataclass(frozen=True)
class _Context:
    """What the enclosing loops imply for a loop being emitted."""
    env: tuple = ()
    in_parallel: bool = False
    in_vector: bool = False
    unrolled: int = 1

    def replace(self, **changes) -> "_Context":
        from dataclasses import replace
        return replace(self, **changes)

    def with_env(self, env: dict) -> "_Context":
        return self.replace(env=env)


def _has_bound_loop(nest: LoopNest) -> bool:
    return any(l.kind == "B" for l in nest.loops) or any(
        isinstance(item, LoopNest) and _has_bound_loop(item) for item in nest.body)
