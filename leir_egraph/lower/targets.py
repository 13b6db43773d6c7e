"""The two targets LEIR lowers to, in the dict form TVM 0.27 requires.

``"llvm"`` is the host CPU with every core; ``"cuda"`` is an sm_80 GPU (source generation and
validity checks only where no GPU is present). A dict with a ``kind`` key is passed through.
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping, Union

TargetLike = Union[str, Mapping[str, Any]]

CPU_TARGET = {"kind": "llvm", "num-cores": os.cpu_count() or 1}
CUDA_TARGET = {"kind": "cuda", "arch": "sm_80"}


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
    return dict(CPU_TARGET if target_kind(target) == "llvm" else CUDA_TARGET)


def target_key(target: TargetLike) -> str:
    """A stable string naming the target (cache keys, worker messages)."""
    return json.dumps(target_dict(target), sort_keys=True)
