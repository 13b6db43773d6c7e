"""The workload zoo: PyTorch program types with parametric shapes and dtypes.

    >>> from leir_egraph.workloads import zoo, instantiate
    >>> "Gemm_Swish_Divide_Clamp_Tanh_Clamp" in zoo()
    True
    >>> module, inputs, meta = instantiate("ReLU", seed=0)
    >>> meta["family"], [tuple(x.shape) for x in inputs]
    ('activation', [(4, 30)])

``zoo()`` lists the kinds (level 1: single operators; level 2: GEMM/convolution chains, paired
programs, attention); ``instantiate(kind, seed, size="small"|"paper", dtype="f32")`` draws one
program; ``compose(seed)`` samples 2-5 components into a new level-2 style program. The same
arguments always give the same module parameters, inputs and metadata.
"""

from __future__ import annotations

from typing import Any

import torch

from . import attention, level1, level2, networks  # noqa: F401  (register the kinds)
from . import components as C
from .registry import DTYPES, KINDS, Input, Kind, build, draw, make_inputs, seed_for

__all__ = ["zoo", "instantiate", "dims", "compose", "families", "Kind", "KINDS", "Input"]


def zoo(level: int | None = None, family: str | None = None) -> list[str]:
    """Kind names, level 1 first, in definition order (optionally one level or family)."""
    kinds = [k for k in KINDS.values() if (level is None or k.level == level)
             and (family is None or k.family == family)]
    return [k.name for k in sorted(kinds, key=lambda k: k.level)]


def families() -> dict[str, list[str]]:
    """Family -> kind names."""
    out: dict[str, list[str]] = {}
    for name in zoo():
        out.setdefault(KINDS[name].family, []).append(name)
    return out


def _dtype(dtype) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r}: use f16, f32 or f64")
    return DTYPES[dtype]


def dims(kind: str, seed: int = 0, size: str = "small") -> dict:
    """The dimensions ``instantiate`` draws for (kind, seed, size), without building anything
    (paper-size modules can hold gigabytes of parameters)."""
    if kind not in KINDS:
        raise KeyError(f"unknown workload kind {kind!r}; see zoo()")
    k = KINDS[kind]
    return draw(k.small if size == "small" else k.paper, seed_for(seed, kind, size))


def instantiate(kind: str, seed: int = 0, size: str = "small", dtype: Any = "f32"):
    """``(module, example_inputs, metadata)`` for one draw of ``kind``.

    ``size="small"`` keeps every tensor tiny (CPU verification well under a second);
    ``"paper"`` draws from the Step-TP paper's ranges. The module is in train mode for
    BatchNorm kinds (batch statistics, as the reference verifies them) and eval mode otherwise.
    """
    if kind not in KINDS:
        raise KeyError(f"unknown workload kind {kind!r}; see zoo()")
    if size not in ("small", "paper"):
        raise ValueError(f"size {size!r}: use 'small' or 'paper'")
    k = KINDS[kind]
    torch_dtype = _dtype(dtype)
    rng = seed_for(seed, kind, size)
    dims = draw(k.small if size == "small" else k.paper, rng)
    param_seed = int(rng.integers(2**31))
    module, plan = build(k, dims, torch_dtype, param_seed)
    inputs = make_inputs(plan, torch_dtype, int(rng.integers(2**31)))
    meta = {"kind": kind, "family": k.family, "level": k.level, "seed": seed, "size": size,
            "dtype": str(torch_dtype).removeprefix("torch."), "dims": dims, "train": k.train,
            "input_shapes": [list(p.shape) for p in plan]}
    return module, inputs, meta


# ---------------------------------------------------------------- the composer

_HEADS = ["gemm", "matmulT", "conv2d", "conv3d", "convT2d"]
_TAIL_POOL = C.ACTIVATIONS + C.ARITHMETIC + C.NORMS + C.POOLS + C.REDUCTIONS


def compose(seed: int, size: str = "small", dtype: Any = "f32", components: int | None = None):
    """A new level-2 style program: a head (GEMM, matmul, 2-D/3-D or transposed convolution)
    and 1-4 further components drawn so that each applies to the shape before it (2-5 in all);
    named by its components, e.g. ``Conv2d_GroupNorm_Swish_MaxPool``.

    Returns ``(module, example_inputs, metadata)`` like ``instantiate``.
    """
    rng = seed_for(seed, "compose", size)
    torch_dtype = _dtype(dtype)
    n = components or int(rng.integers(2, 6))
    if not 2 <= n <= 5:
        raise ValueError("a composed program has 2 to 5 components")
    head = _HEADS[int(rng.integers(len(_HEADS)))]
    small, paper = level2.HEADS[head]
    dims = draw(small if size == "small" else paper, rng)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(rng.integers(2**31)))
        d = dict(dims)
        while True:
            shape = level2.head_input(head, d)
            h = level2.make_head(head, d, shape)
            if head in ("gemm", "matmulT") or min(h.out_shape[2:]) >= 4:
                break
            d["size"] += 1
        names, current = [], h.out_shape
        used_reduction = False
        for _ in range(n - 1):
            pool = [s for s in _TAIL_POOL if C.accepts(s, current)
                    and not (used_reduction and s in C.REDUCTIONS)]
            name = pool[int(rng.integers(len(pool)))]
            step = (C.ResidualAdd(current, h.out_shape) if name == "ResidualAdd"
                    else C.STEPS[name](current, torch_dtype, rng))
            names.append((name, step))
            current = step.out_shape
            used_reduction |= name in C.REDUCTIONS and name not in ("Softmax", "LogSoftmax")
        module = C.Chain(h, [s for _, s in names])
    head_name = {"gemm": "Gemm", "matmulT": "Matmul", "conv2d": "Conv2d", "conv3d": "Conv3d",
                 "convT2d": "ConvTranspose2d"}[head]
    title = "_".join([head_name] + [nm for nm, _ in names])
    module.__class__ = type(title, (C.Chain,), {})
    module = module.to(torch_dtype)
    train = any(nm == "BatchNorm" for nm, _ in names)
    module.train(train)
    inputs = make_inputs([Input(shape)], torch_dtype, int(rng.integers(2**31)))
    meta = {"kind": title, "family": "composed", "level": 2, "seed": seed, "size": size,
            "dtype": str(torch_dtype).removeprefix("torch."), "dims": d, "train": train,
            "input_shapes": [list(shape)], "components": [head_name] + [nm for nm, _ in names]}
    return module, inputs, meta
