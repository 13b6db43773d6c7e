"""The kind registry: every program type of the zoo, its shape ranges and how to build it.

A ``Kind`` holds two range tables -- ``small`` (CPU verification well under a second) and
``paper`` (the Step-TP paper's ranges, dims up to 16,384) -- and a ``make(dims, dtype)`` that
returns the module and an input plan. ``instantiate`` draws the dims and the inputs from one
seed, so the same (kind, seed, size, dtype) always gives the same program and data.

Range entries: ``(lo, hi)`` integers inclusive, ``(lo, hi)`` floats uniform, a list of
choices, or a fixed value.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch

DTYPES = {"f16": torch.float16, "f32": torch.float32, "f64": torch.float64,
          "float16": torch.float16, "float32": torch.float32, "float64": torch.float64}


@dataclass(frozen=True)
class Input:
    """How to draw one forward input: ``randn`` (standard normal), ``positive`` (uniform in
    [0.1, 2), for log/sqrt), ``probs`` (softmax of normals over the last dim), ``labels``
    (integers below ``high``), ``mask`` (random booleans), ``padding`` (a key padding mask:
    True on the last up to half of each row), ``sign`` (+1/-1), ``symmetric`` and ``upper``
    (symmetric / upper-triangular normal matrices)."""
    shape: tuple[int, ...]
    kind: str = "randn"
    high: int = 0


@dataclass(frozen=True)
class Kind:
    name: str
    family: str
    level: int
    make: Callable[[dict, torch.dtype], tuple[torch.nn.Module, list[Input]]] = field(repr=False)
    small: dict = field(repr=False, default_factory=dict)
    paper: dict = field(repr=False, default_factory=dict)
    train: bool = False  # BatchNorm kinds run with batch statistics, as the reference does
    doc: str = ""


KINDS: dict[str, Kind] = {}


def register(kind: Kind) -> Kind:
    if kind.name in KINDS:
        raise ValueError(f"workload kind {kind.name} defined twice")
    KINDS[kind.name] = kind
    return kind


def kind(name: str, family: str, level: int, small: dict, paper: dict, train: bool = False):
    """Decorator form: ``@kind("ReLU", "activation", 1, small={...}, paper={...})`` on a
    ``make(dims, dtype)`` function."""
    def wrap(make):
        register(Kind(name, family, level, make, small, paper, train, (make.__doc__ or "").strip()))
        return make
    return wrap


def seed_for(*parts: Any) -> np.random.Generator:
    """A NumPy generator seeded by the seed and the kind name (stable across runs/platforms)."""
    key = [zlib.crc32(str(p).encode()) if not isinstance(p, int) else p for p in parts]
    return np.random.default_rng(key)


def draw(ranges: dict, rng: np.random.Generator) -> dict:
    """One value per range entry, in the table's order."""
    out = {}
    for key, spec in ranges.items():
        if isinstance(spec, tuple) and len(spec) == 2 and all(isinstance(v, int) for v in spec):
            out[key] = int(rng.integers(spec[0], spec[1] + 1))
        elif isinstance(spec, tuple) and len(spec) == 2:
            out[key] = round(float(rng.uniform(spec[0], spec[1])), 4)
        elif isinstance(spec, list):
            out[key] = spec[int(rng.integers(len(spec)))]
        else:
            out[key] = spec
    return out


def make_inputs(plan: list[Input], dtype: torch.dtype, seed: int) -> list[torch.Tensor]:
    """Draw the forward inputs from a torch generator seeded with ``seed``."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for spec in plan:
        shape = spec.shape
        if spec.kind == "randn":
            x = torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)
        elif spec.kind == "positive":
            x = (torch.rand(shape, generator=g, dtype=torch.float64) * 1.9 + 0.1).to(dtype)
        elif spec.kind == "probs":
            x = torch.randn(shape, generator=g, dtype=torch.float64).softmax(-1).to(dtype)
        elif spec.kind == "labels":
            x = torch.randint(0, spec.high, shape, generator=g, dtype=torch.int64)
        elif spec.kind == "mask":
            x = torch.randint(0, 2, shape, generator=g).bool()
        elif spec.kind == "padding":
            # a key padding mask (batch, seq): True on the last 0..seq/2 positions of each row
            keep = shape[-1] - torch.randint(0, shape[-1] // 2 + 1, shape[:-1], generator=g)
            x = torch.arange(shape[-1]) >= keep.unsqueeze(-1)
        elif spec.kind == "symmetric":
            x = torch.randn(shape, generator=g, dtype=torch.float64)
            x = ((x + x.transpose(-1, -2)) / 2).to(dtype)
        elif spec.kind == "upper":
            x = torch.randn(shape, generator=g, dtype=torch.float64).triu().to(dtype)
        elif spec.kind == "sign":
            x = (torch.randint(0, 2, shape, generator=g) * 2 - 1).to(dtype)
        else:
            raise ValueError(f"unknown input kind {spec.kind}")
        out.append(x)
    return out


def build(k: Kind, dims: dict, dtype: torch.dtype, seed: int):
    """The module (parameters initialised from ``seed``, in train/eval mode as the kind says)
    and its input plan, without touching torch's global random state."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module, plan = k.make(dims, dtype)
    module = module.to(dtype)
    module.train(k.train)
    return module, plan
