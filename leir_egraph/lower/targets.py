"""The two targets LEIR lowers to, in the dict form TVM 0.27 requires.

``"llvm"`` is the host CPU with every core and its own instruction set (``mcpu`` = LLVM's name
for the host, e.g. ``emeraldrapids``); ``"cuda"`` is an sm_80 GPU (source generation and
validity checks only where no GPU is present). A dict with a ``kind`` key is passed through.

Why ``mcpu``: without it LLVM emits baseline x86-64 (SSE2), where every float16 operation goes
through a software conversion call: a float16 matmul runs hundreds of times slower than on
the host CPU, and the software conversions hide every loop transformation's effect. ``LEIR_LLVM_MCPU`` overrides the choice: ``generic`` leaves ``mcpu``
out (portable code), any other value is passed to LLVM as the CPU name.

The host CPU has FMA, and TVM lets LLVM contract ``a*b+c`` into one fused operation (one
rounding instead of two), even at opt-level 0. That is fine for timing, but the builds that
judge equality (``exact_target``) keep every operation rounded on its own: baseline x86-64
plus only the hardware float16 conversions (``+f16c``, where the CPU has them), which give the
same bits as the software ones (tests/test_lower_constructs.py), faster.
"""

from __future__ import annotations

import functools
import json
import os
from typing import Any, Mapping, Union

TargetLike = Union[str, Mapping[str, Any]]

CUDA_TARGET = {"kind": "cuda", "arch": "sm_80"}


@functools.lru_cache(maxsize=None)
def host_cpu() -> str | None:
    """LLVM's name for this machine's CPU (``LEIR_LLVM_MCPU`` overrides; ``generic``: none)."""
    chosen = os.environ.get("LEIR_LLVM_MCPU", "").strip()
    if chosen:
        return None if chosen == "generic" else chosen
    from tvm.target import codegen
    name = codegen.llvm_get_system_cpu()
    if not name or name == "generic":
        return None
    return name if codegen.llvm_is_valid_cpu(name, codegen.llvm_get_system_triple()) else None


def cpu_target(**extra: Any) -> dict[str, Any]:
    """The host CPU target: every core, the host's instruction set, plus ``extra`` keys."""
    target: dict[str, Any] = {"kind": "llvm", "num-cores": os.cpu_count() or 1}
    if host_cpu():
        target["mcpu"] = host_cpu()
    target.update(extra)
    return target


@functools.lru_cache(maxsize=None)
def _has_f16c() -> bool:
    from tvm.target import Target, codegen
    cpu = codegen.llvm_get_system_cpu()
    try:
        return bool(codegen.llvm_cpu_has_features("f16c", Target({"kind": "llvm", "mcpu": cpu})))
    except Exception:  # noqa: BLE001 -- an unknown CPU name: stay with software conversions
        return False


def exact_target(**extra: Any) -> dict[str, Any]:
    """A CPU target where each floating-point operation rounds on its own (no FMA
    contraction): baseline x86-64 with hardware float16 conversions where available."""
    target: dict[str, Any] = {"kind": "llvm", "num-cores": os.cpu_count() or 1}
    if _has_f16c():
        target["mattr"] = ["+f16c"]
    target.update(extra)
    return target


def target_kind(target: TargetLike) -> str:
    """``"llvm"`` or ``"cuda"``; anything else is a ValueError naming the accepted forms."""
    kind = target.get("kind") if isinstance(target, Mapping) else target
    if kind not in ("llvm", "cuda"):
        raise ValueError(f"unknown target {target!r}: use 'llvm', 'cuda' or a TVM target dict "
                         "with kind llvm/cuda")
    return kind


def target_dict(target: TargetLike) -> dict[str, Any]:
    """The TVM target dict for ``target``."""
    if isinstance(target, Mapping):
        target_kind(target)
        return dict(target)
    return cpu_target() if target_kind(target) == "llvm" else dict(CUDA_TARGET)


def target_key(target: TargetLike) -> str:
    """A stable string naming the target (cache keys, worker messages)."""
    return json.dumps(target_dict(target), sort_keys=True)
