"""LEIR -> TVM: lowering to TIR, compiling for llvm or CUDA, running and timing.

    lower(program, target="llvm", *, reverse_parallel=False, poison=False) -> PrimFunc
    build(program, target="llvm", **options) -> Built          (cached; on llvm, programs of
                                                                 more than 16 nests compile
                                                                 in cached segments: link.py)
    run(program, inputs, target="llvm") -> {output name: array}
    time_program(program, inputs) -> median milliseconds
    cuda_source(program) -> CUDA C text                         (CudaInvalid says why not)

TVM is imported inside these functions, never at module import.
"""

from .build import Built, arguments, build, clear_cache, cuda_source, run, time_program
from .cuda import CudaInvalid
from .expr import LoweringError
from .targets import target_dict, target_kind
from .tir import LowerOptions, lower, plan

__all__ = ["lower", "build", "run", "cuda_source", "time_program", "Built", "arguments",
           "clear_cache", "CudaInvalid", "LoweringError", "LowerOptions", "plan", "target_dict",
           "target_kind"]
