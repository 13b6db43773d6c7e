"""CUDA-specific rules: when a LEIR program can be a valid set of CUDA kernels.

Each top-level nest is one kernel. TVM 0.27 compiles invalid kernels without complaint (2048
threads per block, 64 KB of shared memory), so validity is checked twice:

1. statically on the LEIR (``check_launch``, with the limits and rules of
   ``leir/hardware.py``): at most 1024 threads per block, threadIdx.x/y <= 1024, threadIdx.z
   <= 64, blockIdx.y/z <= 65535, one B loop per hardware axis per nest, shared/local
   intermediates confined to one kernel, no B loop two of whose iterations may write one
   element (``race_problems``: the iterations are the GPU's threads, which would race; the LLVM
   build runs B loops serially, so only this check sees it), and no equation outside every B
   loop of a nest that has one (``host_problems``: TVM would leave it on the host);
2. on the lowered device kernels (``verify_device_kernels``) with TVM's
   ``s_tir.analysis.verify_gpu_code`` (shared memory per block among others), after TVM's
   default pipeline with the target bound.

Both raise :class:`CudaInvalid` with a sentence saying what is wrong.
"""

from __future__ import annotations

import math

from ..leir.analysis import equation_sites, nest_loops, tensor_names, write_conflicts
from ..leir.printer import to_text
from ..leir.hardware import AXIS_LIMITS, MAX_SHARED_BYTES, MAX_THREADS_PER_BLOCK, launch_problems
from ..leir.program import Program
from .expr import LoweringError

# TVM's verify_gpu_code constraints, from the limits in leir/hardware.py
GPU_CONSTRAINTS = {
    "max_threads_per_block": MAX_THREADS_PER_BLOCK,
    "max_shared_memory_per_block": MAX_SHARED_BYTES,
    "max_local_memory_per_block": 2**31 - 1,
    "max_thread_x": AXIS_LIMITS["tx"],
    "max_thread_y": AXIS_LIMITS["ty"],
    "max_thread_z": AXIS_LIMITS["tz"],
    "max_vthread": 8,
    "max_vector_bytes": 16,
}
__all__ = ["CudaInvalid", "check_launch", "launch_problems", "race_problems", "host_problems",
           "kernel_scoped_intermediates",
           "verify_device_kernels", "device_modules", "device_source", "MAX_SHARED_BYTES"]


class CudaInvalid(LoweringError):
    """The program cannot be a valid CUDA kernel; ``reason`` says why."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(f"not a valid CUDA kernel: {reason}")


def check_launch(program: Program) -> None:
    """Raise :class:`CudaInvalid` if the launch configuration of any nest is impossible, a
    B loop's threads would race (``race_problems``) or an equation would run on the host
    (``host_problems``)."""
    problems = launch_problems(program) + race_problems(program) + host_problems(program)
    if problems:
        raise CudaInvalid("; ".join(problems))


def race_problems(program: Program) -> list[str]:
    """One sentence per B loop and tensor that two of its iterations -- two GPU threads or
    blocks -- may write at one element (``leir.analysis.write_conflicts`` on the B loops),
    followed by what it means on the GPU. A local (``l``) tensor is each thread's own, a shared
    (``s``) one each block's own: only a thread axis' iterations share it. The reference translator's reductions into a scalar
    are the case seen (a lost update per thread on an H200)::

        B^{64}_{tx=0}[H^{f32,g}=H^{f32,g}+F^{f32,g}_{tx};]
        -> every iteration of B^{64}_{tx=0} writes the scalar H^{f32,g}: the GPU's threads
           would race

    Not part of ``launch_problems``, which the strategies read as a precondition: a rewrite
    is enumerated whatever its claim of independence (the verifier judges it)."""
    def one_copy(loop, target) -> bool:
        return target.scope == "g" or (target.scope == "s" and loop.index[0] == "t")
    return [f"{sentence}: the GPU's threads would race"
            for sentence in write_conflicts(program.leir, "B", one_copy)]


def host_problems(program: Program) -> list[str]:
    """One sentence per equation that sits outside every B loop of a top-level nest that has
    one. TVM makes the nest's B loops one kernel and keeps the loops and equations around them
    in the host function, so such an equation is not in the CUDA source at all and, on a GPU,
    would have to write device memory from the host::

        L^{2}_{a=0}[C^{f32,g}_{a}=A^{f32,g}_{a};B^{4}_{tx=0}[D^{f32,g}_{tx}=A^{f32,g}_{tx};];];
        -> nest 1: C^{f32,g}_{a}=A^{f32,g}_{a} is outside every B loop of its nest: TVM would
           run it on the host, not in a kernel

    A nest with no B loop at all is one single-thread kernel (its loops run in the kernel)."""
    bound = {n for n, nest in enumerate(program.leir.nests)
             if any(loop.kind == "B" for loop in nest_loops(nest))}
    return [f"nest {site.nest + 1}: {to_text(site.equation).rstrip(';')} is outside every B "
            "loop of its nest: TVM would run it on the host, not in a kernel"
            for site in equation_sites(program.leir)
            if site.nest in bound and not any(loop.kind == "B" for loop in site.loops)]


def kernel_scoped_intermediates(program: Program, scopes: dict[str, str]) -> dict[int, list[str]]:
    """Shared (``s``) and local (``l``) intermediates by the top-level nest (kernel) using them.

    Such memory does not outlive a kernel, so an intermediate of scope s or l used by two
    top-level nests cannot be placed: CudaInvalid."""
    out: dict[int, list[str]] = {}
    for name, scope in scopes.items():
        if scope == "g":
            continue
        users = [n for n, nest in enumerate(program.leir.nests) if name in tensor_names(nest)]
        if len(users) > 1:
            kind = "shared" if scope == "s" else "local"
            raise CudaInvalid(f"intermediate '{name}' has scope {scope} ({kind} memory) but is used "
                              f"by nests {', '.join(str(u + 1) for u in users)}; {kind} memory "
                              "does not outlive a kernel (use scope g)")
        out.setdefault(users[0], []).append(name)
    for n, names in out.items():
        names.sort(key=lambda name: next(i for i, s in enumerate(equation_sites(program.leir))
                                         if s.equation.target.name == name))
    return out


def device_modules(func, target):
    """TVM's default pipeline with ``target`` bound, split into (host module, device modules)."""
    import importlib

    import tvm
    build_module = importlib.import_module("tvm.tirx.build")
    target = tvm.target.Target(target)
    host = tvm.target.Target("llvm")
    mod = tvm.IRModule.from_expr(func)
    mod = tvm.tirx.transform.BindTarget(target.with_host(host))(mod)
    pipeline, _, _ = tvm.tirx.get_default_tir_pipeline(target)
    return build_module.split_host_device_mods(pipeline(mod))


def verify_device_kernels(func, target, device=None) -> None:
    """Run ``verify_gpu_code`` on every lowered device kernel; raise CudaInvalid naming the
    failing kernel and, where it can be told, the broken limit. ``device``: the device modules
    of ``func`` when the caller has them already (``device_modules``)."""
    from tvm import s_tir
    if device is None:
        _, device = device_modules(func, target)
    kernels = [(gv.name_hint, fn) for mod in device.values() for gv, fn in mod.functions.items()]
    if not kernels:
        raise CudaInvalid("TVM produced no device kernel (host-only code)")
    for name, fn in kernels:
        if not s_tir.analysis.verify_gpu_code(fn, GPU_CONSTRAINTS):
            shared = _shared_bytes(fn.body)
            detail = (f"shared memory {shared} B > {MAX_SHARED_BYTES} B" if shared > MAX_SHARED_BYTES
                      else "a launch or memory limit is exceeded")
            raise CudaInvalid(f"kernel {name} fails TVM's verify_gpu_code ({detail})")


def device_source(func, target) -> str:
    """The CUDA C of ``func``'s device kernels, checked by ``verify_device_kernels``.

    The steps of ``tvm.compile`` for the device side only: the default pipeline once, TVM's
    device finalisation passes and its CUDA code generator. The host side (an LLVM compilation
    of the launch code, most of ``tvm.compile``'s time) is not built: the source is the same
    text ``tvm.compile(...).mod.imports[0].inspect_source()`` gives (tests/test_lower_cuda.py)."""
    import importlib

    import tvm
    build_module = importlib.import_module("tvm.tirx.build")
    _, device = device_modules(func, target)
    verify_device_kernels(func, target, device)
    _, _, finalize = tvm.tirx.get_default_tir_pipeline(tvm.target.Target(target))
    sources = [build_module.codegen_build(finalize()(mod), t).inspect_source()
               for t, mod in device.items() if len(mod.functions)]
    return "\n".join(sources)


def _shared_bytes(stmt) -> int:
    """Bytes of shared-memory allocations under a lowered statement."""
    import tvm
    total = 0
    stack = [stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, tvm.tirx.AllocBuffer):
            buf = node.buffer
            if buf.scope().startswith("shared"):
                elements = math.prod(int(d) for d in buf.shape)
                total += elements * tvm.runtime.DataType(buf.dtype).bits // 8
        for attr in ("seq", "body", "then_case", "else_case"):
            child = getattr(node, attr, None)
            if child is None:
                continue
            if isinstance(child, (list, tuple)) or type(child).__name__ == "Array":
                stack.extend(child)
            else:
                stack.append(child)
    return total
