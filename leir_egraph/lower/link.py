"""Compiling a program in segments and linking them under a driver (CPU).

``link(program, target, options)`` cuts the program into segments (``segments.py``), compiles
the segments no earlier build of this process compiled -- all of them in one ``tvm.compile``
call, one exported function each -- and a small ``main`` driver (at opt-level 0: it only
allocates and calls) that reaches the segments through ``call_packed``; the segments' modules
are imported into the driver's module, where TVM's runtime finds the symbols.

    program with nests n1 n2 n3, n2 already compiled by an earlier build
    -> compile {leir_segment_<key(n1)>, leir_segment_<key(n3)>} ; driver main(...) calls all 3

Compiled segments are cached by (segment key, target, lowering options), so the repeated
blocks of a network compile once, and verifying a rewrite recompiles only the nests it changed.
The cache holds the runtime modules and the segments' PrimFuncs (for ``Built.source()``).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from ..leir.program import Program
from ..leir.validate import check
from .placement import plan
from .segments import partition
from .targets import TargetLike, target_dict, target_key
from .tir import LowerOptions, lower_driver, lower_segment

SEGMENT_CACHE_SIZE = 4096
# Programs of at most this many nests are built whole: below it one function compiles faster
# than segments and a driver (docs/ARCHITECTURE.md, "Lowering at network scale").
WHOLE_UP_TO = 16


@dataclass(frozen=True)
class _Compiled:
    """One compiled segment: the module holding its symbol and its PrimFunc."""
    module: Any
    func: Any


_cache: "OrderedDict[str, _Compiled]" = OrderedDict()


@dataclass(frozen=True)
class Linked:
    """A linked build: the driver's executable (segments imported), the IRModule of the driver
    and every segment function (for display), and how many segments were compiled anew."""
    executable: Any
    mod: Any
    segments: int
    compiled: int


def symbol(key: str) -> str:
    return f"leir_segment_{key[:24]}"


def link(program: Program, target: TargetLike, options: LowerOptions) -> Linked | None:
    """Compile ``program`` for the CPU ``target`` in segments (see the module doc); ``None``
    for a program to build whole: one of at most ``WHOLE_UP_TO`` nests, or one with bfloat16
    tensors (TVM legalises bfloat16 storage to uint16 inside each function, so a driver's
    bfloat16 buffer would not match a segment's parameter type)."""
    import tvm
    check(program)
    if len(program.leir.nests) <= WHOLE_UP_TO:
        return None
    whole = plan(program)
    if any(d == "bfloat16" for d in whole.dtypes.values()):
        return None
    part = partition(program, whole)
    pipeline = options.pipeline_for(target_dict(target))
    suffix = target_key(target) + repr(options.key()) + pipeline
    keys = [hashlib.sha256((seg.key + suffix).encode()).hexdigest() for seg in part.segments]
    fresh: dict[str, Any] = {}
    for key, seg in zip(keys, part.segments):
        if key in _cache:
            _cache.move_to_end(key)
        elif key not in fresh:
            fresh[key] = lower_segment(seg, symbol(key), options)
    if fresh:
        with tvm.transform.PassContext(config={"tirx.disable_assert": True}):
            module = tvm.compile(tvm.IRModule({symbol(k): f for k, f in fresh.items()}),
                                 target=target_dict(target), tir_pipeline=pipeline).mod
        for key, func in fresh.items():
            _cache[key] = _Compiled(module, func)
    used = {key: _cache[key] for key in keys}
    while len(_cache) > SEGMENT_CACHE_SIZE:
        _cache.popitem(last=False)
    driver = lower_driver(program, part, [symbol(k) for k in keys], directed=options.directed)
    with tvm.transform.PassContext(config={"tirx.disable_assert": True}):
        executable = tvm.compile(driver, target={**target_dict(target), "opt-level": 0},
                                 tir_pipeline=options.pipeline)
    imported: set[int] = set()
    for compiled in used.values():
        if id(compiled.module) not in imported:
            imported.add(id(compiled.module))
            executable.mod.import_module(compiled.module)
    functions = {"main": driver, **{symbol(k): c.func for k, c in used.items()}}
    return Linked(executable, tvm.IRModule(functions), len(keys), len(fresh))


def clear() -> None:
    _cache.clear()
