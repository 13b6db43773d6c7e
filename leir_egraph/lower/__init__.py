"""LEIR -> TVM: lowering to TIR, compiling for llvm or CUDA, running and timing.

    lower(program, target="llvm", *, reverse_parallel=False, poison=False) -> PrimFunc
    build(program, target="llvm", **options) -> Built          (cached; on llvm, programs of
                                                                 more than 16 nests compile
                                                                 in cached segments: link.py)
    build_many(programs, target="llvm", **options) -> int      (one module for many programs,
                                                                 each cached as its own build)
    run(program, inputs, target="llvm") -> {output name: array}
    time_program(program, inputs) -> median milliseconds
    prepared_calls(programs, inputs) -> zero-argument calls on one set of tensors (for timing)
    cuda_source(program) -> CUDA C text                         (CudaInvalid says why not)

TVM is imported inside these functions, never at module import.
"""

from __future__ import annotations

from ..lazy import lazy_exports

__getattr__, __all__ = lazy_exports(__name__, {
    "Built": "build", "arguments": "build", "build": "build", "build_many": "build",
    "clear_cache": "build",
    "cuda_source": "build", "prepared_calls": "build", "run": "build", "time_program": "build",
    "CudaInvalid": "cuda",
    "LoweringError": "expr",
    "target_dict": "targets", "target_kind": "targets",
    "LowerOptions": "tir", "lower": "tir", "plan": "tir",
})
