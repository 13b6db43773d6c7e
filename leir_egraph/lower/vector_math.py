"""SIMD transcendentals for V loops on the CPU: glibc's libmvec instead of one scalar call a lane.

TVM vectorises ``exp(x)`` in a V loop to LLVM's ``llvm.exp.v8f32``; LLVM has no vector
library on TVM's targets, so the x86 back end splits it into eight ``expf`` calls: a V loop
holding ``exp`` ran no faster than a serial one (the sigmoid of workload #81 stayed at the
root's time). LLVM's own remedy, ``-vector-library=LIBMVEC``, cannot be set through TVM 0.27:
its ``cl-opt`` target key parses bool, int, uint and string options only, and that one is an
enumeration.

So the timing builds take TVM's default pipeline with one extra pass in its host finalisation,
after vectorisation and before ``LowerIntrin``: a vector ``exp`` or ``log`` of float32 or
float64 (or float16, below) becomes a call to libmvec's variant of that width under the x86 vector function ABI
(``_ZGV<isa>N<lanes>v_<name>``: ``b`` 128-bit SSE, ``d`` 256-bit AVX2, ``e`` 512-bit
AVX-512), e.g. ``exp`` of ``float32x8`` -> ``_ZGVdN8v_expf``. A vector wider than the widest
register the target has is cut into register-wide pieces (``Shuffle``), each called, then
joined; one that fills no whole 128-bit register (``V^{5}`` of float32) is padded with copies
of its last lane, whose results are dropped. float16 is widened to float32, computed so and
rounded back (what LLVM does per lane for ``llvm.exp.f16``). ``erf`` of float32 and float64
too, though TVM's vectoriser scalarises a call of ``tirx.erf`` (the op is not marked
vectorisable): the pipeline renames it to a vectorisable stand-in (``ERF_CARRIER``) before
vectorisation and turns the stand-in back after it -- libmvec's erf where it became a vector,
``tirx.erf`` where it stayed a scalar (a GELU over 5 x 546 ran 12x faster in a V loop). Other
functions, bfloat16 and scalars stay as TVM emits them. libmvec is
loaded into the process with ``RTLD_GLOBAL`` so that TVM's JIT resolves the calls.

**Which builds.** Only builds for a CPU target that has AVX2 (the host target,
``targets.cpu_target``) and TVM's default pipeline, i.e. timing and plain runs. The builds
that judge equality (``targets.exact_target``: baseline x86-64, and the poisoned ``"tirx"``
pipeline) keep the scalar calls, so Equal compares the original and the rewrite lowered the
same way, like with like. ``LEIR_VECTOR_MATH=0`` switches the pass off (the build cache keys
on the pipeline, so a switch inside one process rebuilds).

**Accuracy.** libmvec is not bitwise glibc's scalar ``expf``/``logf``. Measured on the host
over 2^20 inputs per function and dtype (half random bit patterns, half uniform over the range
where the result is finite and non-zero; glibc 2.36): at most 2 ULP from the scalar result for
``exp`` and 4 for ``log`` in float32, 3 and 1 in float64; over all 65,536 float16 inputs
``exp`` is bitwise the scalar result and ``log`` 1 ULP from it at 3; ``erf`` (2^18 inputs
each, the same mix) at most 2 ULP in float32 and float64, bitwise in float16; NaN, infinities and zeros
in the same places (tests/test_vector_kernels.py keeps all of it). Equal's tolerance is rtol 1e-4 in float32
and 1e-9 in float64 (``verify/compare.py``): at least 800 ULP in float32. PyTorch's own CPU
kernels use Sleef's vector routines the same way. docs/VERIFY.md "Timing".
"""

from __future__ import annotations

import functools
import os
from typing import Any, Mapping

ENV = "LEIR_VECTOR_MATH"
PIPELINE = "leir_vector_math"
LIBRARY = "libmvec.so.1"

# LEIR function -> libmvec's base name (float32 adds "f"); TVM's op names are "tirx.<fn>"
FUNCTIONS = {"exp": "exp", "log": "log", "erf": "erf"}
# TVM's vectoriser scalarises a call of an op it does not know to be vectorisable, and
# ``tirx.erf`` is not marked so: the timing pipeline renames erf to this op (marked
# vectorisable and pure) before vectorisation; the host finalisation turns a vector of it into
# libmvec's erf and a scalar one back into ``tirx.erf``.
ERF_CARRIER = "tirx.leir_vector_erf"
# register width in bits -> the ISA letter of the x86 vector function ABI and the CPU feature
# a call needs (the "b" variants are dispatched by glibc itself)
ISAS = {128: ("b", "sse2"), 256: ("d", "avx2"), 512: ("e", "avx512f")}


def enabled() -> bool:
    """False when ``LEIR_VECTOR_MATH`` is 0/false/off/no."""
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "false", "off", "no")


@functools.lru_cache(maxsize=None)
def _library_loaded() -> bool:
    """Load libmvec into the process (global symbols, for the JIT); False where it is absent."""
    import ctypes
    try:
        ctypes.CDLL(LIBRARY, mode=ctypes.RTLD_GLOBAL)
    except OSError:
        return False
    return True


@functools.lru_cache(maxsize=None)
def _register_widths(target_json: str) -> tuple[int, ...]:
    """The vector register widths (bits) the target may call libmvec with; () when it lacks
    AVX2 (the exact target: baseline x86-64) or is not x86."""
    import json

    from tvm.target import Target, codegen
    target = Target(json.loads(target_json))
    triple = str(target.attrs.get("mtriple", "") or codegen.llvm_get_system_triple())
    if not triple.startswith("x86_64"):
        return ()

    def has(feature: str) -> bool:
        try:
            return bool(codegen.llvm_cpu_has_features(feature, target))
        except Exception:  # noqa: BLE001 -- an unknown CPU: treat as baseline
            return False
    if not has("avx2"):
        return ()
    return tuple(bits for bits, (_, feature) in sorted(ISAS.items()) if has(feature))


def applies(target: Mapping[str, Any]) -> bool:
    """Whether builds for the CPU target dict ``target`` get libmvec calls."""
    import json
    if target.get("kind") != "llvm" or not enabled():
        return False
    return bool(_register_widths(json.dumps(dict(target), sort_keys=True))) and _library_loaded()


def pipeline_name(default: str, target: Mapping[str, Any]) -> str:
    """The TIR pipeline for a build whose options ask for ``default``: TVM's ``"default"``
    becomes :data:`PIPELINE` where :func:`applies`; any other (``"tirx"``) stays."""
    if default != "default" or not applies(target):
        return default
    _register_pipeline()
    return PIPELINE


def symbol(name: str, dtype) -> str | None:
    """libmvec's symbol for ``name`` on a vector ``dtype`` one register wide, else None."""
    base = FUNCTIONS.get(name)
    bits = dtype.bits * dtype.lanes
    if base is None or dtype.type_code != 2 or dtype.bits not in (32, 64) or bits not in ISAS:
        return None
    return f"_ZGV{ISAS[bits][0]}N{dtype.lanes}v_{base}{'f' if dtype.bits == 32 else ''}"


@functools.lru_cache(maxsize=None)
def rewriter(widths: tuple[int, ...]):
    """A ``structural_map`` callback on calls: vector ``exp``/``log`` -> libmvec calls, each
    at most ``max(widths)`` bits wide; any other call is returned as it is."""
    import tvm
    from tvm import tirx

    def rewrite(call):
        op = getattr(call.op, "name", "")
        dtype = getattr(getattr(call, "ty", None), "dtype", None)
        if op == ERF_CARRIER:
            if dtype is None or dtype.lanes <= 1:
                return tirx.erf(call.args[0])
            op = "tirx.erf"
        if not op.startswith("tirx.") or op[5:] not in FUNCTIONS or dtype is None \
                or dtype.lanes <= 1 or dtype.type_code != 2 or dtype.bits not in (16, 32, 64):
            return call
        (arg,) = call.args
        lanes = dtype.lanes
        if dtype.bits == 16:
            # float16 is computed in float32 and rounded back, as LLVM does for llvm.exp.f16
            wide = simd(op[5:], tirx.Cast(f"float32x{lanes}", arg), 32, lanes)
            return tirx.Cast(str(dtype), wide)
        return simd(op[5:], arg, dtype.bits, lanes)

    def simd(fn: str, arg, bits: int, lanes: int):
        # pad to whole 128-bit registers by repeating the last lane (its result is dropped)
        padded = -(-bits * lanes // 128) * 128 // bits
        if padded != lanes:
            # (a Shuffle has at most as many lanes as its inputs together)
            arg = tirx.Shuffle([arg] * -(-padded // lanes),
                               list(range(lanes)) + [lanes - 1] * (padded - lanes))
        total = bits * padded
        piece = next(w for w in sorted(widths, reverse=True) if w <= total and total % w == 0)
        width = piece // bits
        piece_dtype = f"float{bits}x{width}"
        name = symbol(fn, tvm.DataType(piece_dtype))
        if width == padded:
            result = tirx.call_pure_extern(piece_dtype, name, arg)
        else:
            parts = [tirx.call_pure_extern(piece_dtype, name,
                                           tirx.Shuffle([arg], list(range(s, s + width))))
                     for s in range(0, padded, width)]
            result = tirx.Shuffle(parts, list(range(padded)))
        return result if padded == lanes else tirx.Shuffle([result], list(range(lanes)))

    return rewrite


@functools.lru_cache(maxsize=None)
def _register_pipeline() -> None:
    """Register :data:`PIPELINE` with TVM: its default pipeline, then the host finalisation
    with the libmvec pass before ``LowerIntrin``. The pass reads the bound target's register
    widths."""
    import tvm
    import tvm_ffi
    from tvm import tirx
    from tvm.tirx import compilation_pipeline

    def for_bound_target():
        @tirx.transform.prim_func_pass(opt_level=0, name="LeirVectorMathForTarget")
        def apply(func, mod, ctx):
            target = func.attrs.get("target") if func.attrs else None
            widths = _register_widths(_target_json(target)) if target is not None else ()
            if not widths:
                return func
            return tvm_ffi.structural_map(func, (tvm.ir.Call, rewriter(widths)))
        return apply

    def factory():
        main, _, finalize_device = compilation_pipeline.get_tir_pipeline("default")
        main = tvm.ir.transform.Sequential([erf_before_vectorising(), main])

        def finalize_host():
            return tvm.ir.transform.Sequential([tirx.transform.LowerTVMBuiltin(),
                                                for_bound_target(),
                                                tirx.transform.LowerIntrin()])
        return main, finalize_host, finalize_device

    compilation_pipeline.register_tir_pipeline(PIPELINE, factory)


def _erf_carrier():
    """The vectorisable stand-in for ``tirx.erf`` (registered with TVM once, here)."""
    import tvm
    if ERF_CARRIER not in tvm.ir.Op.list_op_names():
        tvm.ir.register_op_attr(ERF_CARRIER, "TVectorizable", True)
        tvm.ir.register_op_attr(ERF_CARRIER, "TCallEffectKind", tvm.tirx.IntImm("int32", 1))
    return tvm.ir.Op.get(ERF_CARRIER)


def erf_before_vectorising():
    """A pass renaming float32/float64 ``tirx.erf`` calls to :data:`ERF_CARRIER` in functions
    whose target gets libmvec calls (the host finalisation maps every one back)."""
    import tvm
    import tvm_ffi
    from tvm import tirx
    carrier = _erf_carrier()

    def rename(call):
        dtype = getattr(getattr(call, "ty", None), "dtype", None)
        if getattr(call.op, "name", "") != "tirx.erf" or dtype is None \
                or dtype.type_code != 2 or dtype.bits not in (32, 64):
            return call
        return tirx.call_intrin(str(dtype), carrier, *call.args)

    @tirx.transform.prim_func_pass(opt_level=0, name="LeirErfBeforeVectorising")
    def apply(func, mod, ctx):
        target = func.attrs.get("target") if func.attrs else None
        if target is None or not _register_widths(_target_json(target)):
            return func
        return tvm_ffi.structural_map(func, (tvm.ir.Call, rename))
    return apply


def _target_json(target) -> str:
    """A bound TVM Target as the sorted JSON dict ``_register_widths`` caches on."""
    import json
    wanted = {"kind": "llvm"}
    for key in ("mcpu", "mattr", "mtriple"):
        value = target.attrs.get(key)
        if value:
            wanted[key] = list(value) if key == "mattr" else str(value)
    return json.dumps(wanted, sort_keys=True)
