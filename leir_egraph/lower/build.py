"""Compile, run and time lowered LEIR programs.

``build`` caches compiled modules keyed by (canonical text, signature, target, lowering
options), so verifying many rewrites of one program compiles the original once per process.
On llvm a program of more than ``link.WHOLE_UP_TO`` nests is compiled in segments, each
compiled once per process and reused by every program containing it (``link.py``,
docs/ARCHITECTURE.md "Lowering at network scale").

    >>> run(program, {"A": a})                       # doctest: +SKIP
    {'C': array([[...]], dtype=float32)}

Outputs are allocated filled with NaN (integers: their largest value, bool: True) before the
call, so an element the program never writes shows up instead of reading as a plausible 0.
"""

from __future__ import annotations

import statistics
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable, Mapping

import numpy as np

from ..leir.program import Program
from .expr import LoweringError
from .targets import TargetLike, target_dict, target_key, target_kind
from .link import WHOLE_UP_TO, link
from .threads import configure as configure_threads
from .threads import in_use
from .tir import LowerOptions, lower

CACHE_SIZE = 256
_cache: "OrderedDict[tuple, Built | str]" = OrderedDict()  # str: a CUDA source
_counts = {"compiled": 0, "cached": 0}   # build() calls in this process, by outcome


@dataclass(frozen=True)
class Built:
    """A compiled program: the PrimFunc, TVM's executable and how long lowering+compiling took."""
    text: str
    target: str
    func: Any
    executable: Any
    seconds: float
    extra_args: tuple = ()   # trailing scalar arguments (a directed build's leir_reverse)
    entry: str = "main"      # the function's name in ``executable`` (``build_many``: several)

    def function(self):
        """The compiled entry point; call it with the arguments, then ``extra_args``."""
        return self.executable if self.entry == "main" else self.executable[self.entry]

    def source(self) -> str:
        """Device source (CUDA C) or, on the CPU, the TIR script."""
        if self.target == "cuda":
            return self.executable.mod.imports[0].inspect_source()
        return self.func.script()


# The two builds of the reverse-order check (docs/VERIFY.md): P/V/B loops serial, in order or
# reversed, intermediates poisoned. They compile as one ``directed`` build (a whole program's
# function, or a segmented program's segments and driver) that takes the direction at run
# time: one compilation instead of two.
_DIRECTED = {LowerOptions(serial=True, poison=True): 0,
             LowerOptions(reverse_parallel=True, poison=True): 1}


def build(program: Program, target: TargetLike = "llvm", **options) -> Built:
    """Lower and compile ``program`` (cached). ``options`` are ``lower``'s keywords:
    ``reverse_parallel``, ``poison``, ``serial``, ``directed``."""
    opts = LowerOptions(**options)
    key = _key(program, target, opts)
    hit = _cache.get(key)
    if hit is not None:
        _cache.move_to_end(key)
        _counts["cached"] += 1
        return hit
    kind = target_kind(target)
    if kind == "llvm" and opts in _DIRECTED:
        base = build(program, target, directed=True, poison=True)
        return _remember(key, replace(base, extra_args=(_DIRECTED[opts],)))
    import tvm
    if kind == "llvm":
        configure_threads()  # before anything creates TVM's pool with its own default size
    start = time.perf_counter()
    linked = link(program, target, opts) if kind == "llvm" else None
    if linked is not None:
        func, executable = linked.mod, linked.executable
    else:
        func = lower(program, target, **options)
        if kind == "cuda":
            from .cuda import CudaInvalid, verify_device_kernels
            verify_device_kernels(func, target_dict(target))
        executable = tvm.compile(func, target=target_dict(target),
                                 tir_pipeline=opts.pipeline_for(target_dict(target)))
        if kind == "cuda" and not executable.mod.imports:
            raise CudaInvalid("TVM produced no device kernel (host-only code)")
    built = Built(program.text, kind, func, executable, time.perf_counter() - start)
    _counts["compiled"] += 1
    return _remember(key, built)


def build_many(programs, target: TargetLike = "llvm", **options) -> int:
    """Compile the programs that are not built yet into one module and cache each as its own
    build, so that later ``build`` calls with the same target and options find them. Returns
    how many were compiled.

    One ``tvm.compile`` and one JIT for many programs, the verifier's use (``verify.session``:
    the candidates of one original): each function is lowered exactly as ``build`` lowers it,
    only the packaging differs, and a module's fixed costs (the pass pipeline's, LLVM's and
    the JIT's set-up, about 20 ms per module here) are paid once. Each build's ``seconds`` is
    its share of the whole.

        build_many([after1, after2, after3], equal_target(), serial=True, poison=True)
        run(after2, inputs, equal_target(), serial=True, poison=True)   # no compilation

    Only CPU builds of whole programs (at most ``link.WHOLE_UP_TO`` nests) are batched; a
    program that does not lower is skipped, and a module that does not compile compiles
    nothing: ``build`` then builds each one alone and reports its own error."""
    import tvm
    opts = LowerOptions(**options)
    if opts in _DIRECTED:
        opts = LowerOptions(directed=True, poison=True)
    if target_kind(target) != "llvm":
        return 0
    start = time.perf_counter()
    funcs: dict[tuple, tuple[Program, str, Any]] = {}  # key -> program, symbol, PrimFunc
    for program in programs:
        key = _key(program, target, opts)
        if key in _cache or key in funcs or len(program.leir.nests) > WHOLE_UP_TO:
            continue
        try:
            func = lower(program, target, **asdict(opts))
        except Exception:  # noqa: BLE001 -- build() reports it when the program is built alone
            continue
        name = f"leir_batch_{len(funcs)}"
        funcs[key] = (program, name, func.with_attr("global_symbol", name))
    if len(funcs) < 2:
        return 0
    try:
        executable = tvm.compile(tvm.IRModule({name: func for _, name, func in funcs.values()}),
                                 target=target_dict(target),
                                 tir_pipeline=opts.pipeline_for(target_dict(target)))
        for _, name, _ in funcs.values():
            executable[name]  # the JIT compiles here, not in the first run
    except Exception:  # noqa: BLE001
        return 0
    share = (time.perf_counter() - start) / len(funcs)
    for key, (program, name, func) in funcs.items():
        _remember(key, Built(program.text, "llvm", func, executable, share, entry=name))
    _counts["compiled"] += len(funcs)
    return len(funcs)


def _key(program: Program, target: TargetLike, opts: LowerOptions) -> tuple:
    """The cache key of a build: canonical text, signature, target, lowering options and the
    TIR pipeline they take there (``LEIR_VECTOR_MATH`` may change it)."""
    pipeline = opts.pipeline_for(target_dict(target)) if target_kind(target) == "llvm" else ""
    return (program.text, program.signature.to_json(), target_key(target), opts.key(), pipeline)


def _remember(key: tuple, value):
    """Keep ``value`` in the cache under ``key``, dropping the least recently used beyond
    CACHE_SIZE; returns ``value``."""
    _cache[key] = value
    while len(_cache) > CACHE_SIZE:
        _cache.popitem(last=False)
    return value


def clear_cache() -> None:
    _cache.clear()


def build_counts() -> dict[str, int]:
    """How many ``build`` calls of this process compiled, and how many the cache answered."""
    return dict(_counts)


def cuda_source(program: Program) -> str:
    """The CUDA C source of ``program``'s kernels; CudaInvalid says why there is none.

    A program already built for CUDA gives its module's source; otherwise only the device side
    is compiled (``cuda.device_source``), cached like ``build``."""
    key = _key(program, "cuda", LowerOptions())
    built = _cache.get(key)
    if built is not None:
        return built.source()
    key = ("source",) + key
    hit = _cache.get(key)
    if hit is None:
        from .cuda import device_source
        return _remember(key, device_source(lower(program, "cuda"), target_dict("cuda")))
    _cache.move_to_end(key)
    return hit


# ---------------------------------------------------------------- arguments

def fill_value(dtype: np.dtype):
    """What an output holds before the program writes it."""
    if dtype.kind == "f" or dtype.name == "bfloat16":
        return np.nan
    if dtype.kind == "b":
        return True
    return np.iinfo(dtype).max


def numpy_dtype(name: str) -> np.dtype:
    if name == "bfloat16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def arguments(program: Program, inputs: Mapping[str, Any]) -> list[np.ndarray]:
    """Input arrays in call order (stored ``program.values`` fill the missing ones), each
    checked against the signature. Raises ValueError naming the offending input."""
    sig = program.signature
    unknown = sorted(set(inputs) - set(sig.input_names))
    if unknown:
        raise ValueError(f"unexpected input(s) {', '.join(unknown)}: the signature's inputs are "
                         f"{', '.join(sig.input_names)}")
    out = []
    for spec in sig.inputs:
        if spec.name in inputs:
            value = inputs[spec.name]
        elif spec.name in program.values:
            value = program.values[spec.name]
        else:
            raise ValueError(f"missing input '{spec.name}' ({spec.dtype}{list(spec.shape)}): "
                             "pass it or store it in program.values")
        array = np.asarray(value)
        want = numpy_dtype(spec.dtype)
        if array.shape != spec.shape:
            raise ValueError(f"input '{spec.name}' has shape {list(array.shape)} but the signature "
                             f"says {list(spec.shape)}")
        if array.dtype != want:
            if not (np.can_cast(array.dtype, want, "same_kind") or want.name == "bfloat16"):
                raise ValueError(f"input '{spec.name}' has dtype {array.dtype} but the signature "
                                 f"says {spec.dtype}")
            array = array.astype(want)
        out.append(array if array.flags.c_contiguous else array.copy(order="C"))
    return out


def call_tensors(program: Program, inputs: Mapping[str, Any]):
    import tvm
    args = [tvm.runtime.tensor(a) for a in arguments(program, inputs)]
    outs = []
    for spec in program.signature.outputs:
        dtype = numpy_dtype(spec.dtype)
        outs.append(tvm.runtime.tensor(np.full(spec.shape, fill_value(dtype), dtype=dtype)))
    return args, outs


# ---------------------------------------------------------------- running and timing

def run(program: Program, inputs: Mapping[str, Any], target: TargetLike = "llvm",
        **options) -> dict[str, np.ndarray]:
    """Run ``program`` on ``inputs`` (name -> array); returns every output by name."""
    if target_kind(target) != "llvm":
        raise LoweringError("only the llvm target can run here; use cuda_source() for CUDA")
    built = build(program, target, **options)
    args, outs = call_tensors(program, inputs)
    configure_threads()
    built.function()(*args, *outs, *built.extra_args)
    return {spec.name: out.numpy() for spec, out in zip(program.signature.outputs, outs)}


def prepared_calls(programs: list[Program], inputs: Mapping[str, Any], target: TargetLike = "llvm",
                   **options) -> list[Callable[[], None]]:
    """A zero-argument call per program (builds cached) on one set of argument and output
    tensors made once from ``inputs`` (the programs share a signature; ``programs[0]``'s stored
    values fill the rest), on ``threads.in_use()`` threads: for timing programs with the same
    clock as something that is not TVM (``benchmarks/peers.py`` times them beside torch eager
    and torch.compile). One set of tensors for all, as ``time_pair`` does: where buffers lie
    relative to each other changes a kernel's time, and would otherwise differ between them."""
    if target_kind(target) != "llvm":
        raise LoweringError("only the llvm target can run here; use cuda_source() for CUDA")
    builds = [build(program, target, **options) for program in programs]
    args, outs = call_tensors(programs[0], inputs)
    configure_threads()

    def call(built):
        function, extra = built.function(), built.extra_args
        return lambda: function(*args, *outs, *extra)
    return [call(built) for built in builds]


def build_for_timing(program: Program, target: TargetLike = "llvm", **options) -> Built:
    """The build ``time_pair`` (``time_program``) times ``program`` on, compiled and its entry
    JIT-compiled now (both cached), so that a later timing compiles nothing."""
    built = build(program, target, **options)
    built.executable[built.entry]   # the JIT compiles here, not in the timing's warm-up
    return built


def _evaluator(program: Program, inputs: Mapping[str, Any], target: TargetLike, warmup: int,
               repeat: int, min_repeat_ms: float, options: dict, tensors=None):
    """A zero-argument call returning TVM's ProfileResult for ``program`` on ``inputs``: the
    build (cached), its argument tensors (``tensors``, an ``(args, outs)`` pair from
    ``call_tensors``, when given) and ``warmup`` untimed calls are done once, here."""
    import tvm
    if target_kind(target) != "llvm":
        raise LoweringError("only the llvm target can be timed here")
    built = build_for_timing(program, target, **options)
    args, outs = tensors if tensors is not None else call_tensors(program, inputs)
    configure_threads()
    function = built.function()
    for _ in range(warmup):
        function(*args, *outs, *built.extra_args)
    timer = built.executable.mod.time_evaluator(built.entry, tvm.cpu(), number=1, repeat=repeat,
                                                min_repeat_ms=int(min_repeat_ms))
    return lambda: timer(*args, *outs, *built.extra_args)


def time_program(program: Program, inputs: Mapping[str, Any], target: TargetLike = "llvm", *,
                 warmup: int = 2, repeat: int = 5, min_repeat_ms: float = 10.0,
                 **options) -> float:
    """Median run time in milliseconds: ``warmup`` untimed calls, then ``repeat`` timed
    repeats, each looping the kernel until it has run at least ``min_repeat_ms``; on
    ``threads.in_use()`` threads (``lower.threads``)."""
    timer = _evaluator(program, inputs, target, warmup, repeat, min_repeat_ms, options)
    return float(timer().median) * 1e3


@dataclass(frozen=True)
class PairedTiming:
    """Two programs timed back to back (``time_pair``): per-round times in milliseconds.
    ``speedup`` is the median of the per-round ratios ``before / after``; ``min_speedup``
    the ratio of the fastest rounds (load only ever adds time, so the minimum is the least
    disturbed measurement of each). ``threads``: TVM's runtime threads the programs ran on
    (``lower.threads``; None: not recorded); ``target``: the TVM target dict they were built
    for (``targets.target_dict``; None: not recorded)."""
    before_ms: tuple[float, ...]
    after_ms: tuple[float, ...]
    compiled: int | None = None   # builds the measurement had to compile (None: not counted)
    threads: int | None = None
    target: dict[str, Any] | None = None

    @property
    def ratios(self) -> list[float]:
        return [b / a for b, a in zip(self.before_ms, self.after_ms) if a > 0]

    @property
    def speedup(self) -> float:
        return statistics.median(self.ratios) if self.ratios else float("nan")

    @property
    def min_speedup(self) -> float:
        return min(self.before_ms) / min(self.after_ms) if min(self.after_ms) > 0 else \
            float("nan")

    @property
    def before_median_ms(self) -> float:
        return statistics.median(self.before_ms)

    @property
    def after_median_ms(self) -> float:
        return statistics.median(self.after_ms)

    def faster(self, threshold: float) -> bool:
        """``after`` is faster beyond noise: both the median paired ratio and the ratio of the
        minima reach ``threshold`` (e.g. 1.05)."""
        return self.speedup >= threshold and self.min_speedup >= threshold

    def to_dict(self) -> dict[str, Any]:
        return {"before_ms": list(self.before_ms), "after_ms": list(self.after_ms),
                "compiled": self.compiled, "threads": self.threads, "target": self.target}


def time_pair(before: Program, after: Program, inputs: Mapping[str, Any],
              target: TargetLike = "llvm", *, rounds: int = 31, warmup: int = 2,
              min_repeat_ms: float = 2.0, **options) -> PairedTiming:
    """``before`` and ``after`` (same signature) timed back to back on the same ``inputs``,
    ``rounds`` times, interleaved: each round is one ``time_program``-style repeat of each (a
    ``time_evaluator`` repeat looping the kernel for at least ``min_repeat_ms``), and which
    of the two goes first alternates (ABBA...), so that a change of machine load affects
    both sides of a round alike. Many short rounds rather than a few long ones: on a loaded
    machine a no-op pair (a program against itself) stays much closer to 1 that way, in less
    time.

    Both sides run on the same argument and output tensors, made from ``inputs`` (and
    ``before``'s stored values for the rest). With a set of tensors each, a no-op pair (one
    cached build on both sides) can be biased as a whole, every round alike: where buffers lie
    relative to each other (4 KiB aliasing of stores and loads, cache sets) is a property of
    the allocation, not of the program."""
    compiled = _counts["compiled"]
    tensors = call_tensors(before, inputs)
    timers = [_evaluator(p, inputs, target, warmup, 1, min_repeat_ms, options, tensors)
              for p in (before, after)]
    times: list[list[float]] = [[], []]
    for r in range(max(rounds, 1)):
        for side in ((0, 1) if r % 2 == 0 else (1, 0)):
            times[side].append(float(timers[side]().results[0]) * 1e3)
    return PairedTiming(tuple(times[0]), tuple(times[1]), _counts["compiled"] - compiled,
                        in_use(), target_dict(target))
