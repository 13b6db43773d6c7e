"""What a dataset run is made of: the settings that decide its content, and how it executes.

:class:`DatasetConfig` holds everything that can change a single byte of the output; it is
stored in ``run.json`` and a ``--resume`` must present the same one. :class:`Execution` holds
what may change between an interrupted run and its resumption without changing the output
(worker count, executor, Ray address, output folder, progress display).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

DEMO_PROGRAMS = ("ReLU", "softmax", "Gemm_Add_ReLU")


@dataclass(frozen=True)
class DatasetConfig:
    """Content settings; defaults are the CLI's defaults."""
    programs: tuple[str, ...] = DEMO_PROGRAMS
    count: int = 1                       # zoo instances per selected kind (seeds seed..seed+count-1)
    size: str = "small"                  # zoo instancing ranges: small or paper
    dtype: str = "f32"
    strategies: tuple[str, ...] = ()     # ids or categories; empty = every loaded strategy
    rules: tuple[str, ...] = ()          # extra rule directories
    seed: int = 0
    target: str = "llvm"                 # verification/lowering target: llvm or cuda
    per_strategy_cap: int | None = None  # transitions kept per program and strategy (seeded)
    undo_steps: bool = False             # each kept step of a strategy also read backwards as its inverse's
    trials: int = 3                      # random input sets per verification
    verify_timeout: float = 60.0         # seconds of TVM work per verification
    timing: bool = False                 # measure run times (speedup); measurements vary by run
    cuda_source: bool = True             # emit CUDA C for every before/after
    shard_size: int = 8                  # programs per shard
    # balancing (docs/STRATEGIES.md, "Dataset balancing")
    easy_simplify_keep: float = 0.20
    easy_expand_keep: float = 0.04
    medium_cap: int = 2000               # per medium strategy, label occurrences in multi-answer
    multi_max_answers: int = 8           # answers in one multi-answer entry (at least 2)
    multi_max_entries: int = 3           # multi-answer entries drawn per original program
    # test cases across dtypes: every zoo program once per dtype (empty: ``dtype`` alone)
    dtypes: tuple[str, ...] = ()
    # held-out splits (dataset/splits.py): train/validation/test fractions, None = no split
    split: tuple[float, float, float] | None = None
    hold_steptp: bool = True             # with a split: the paper's multi-step kinds held out
    merge_equal_kinds: bool = False      # with a split: kinds of one shape-free form are one unit
    # variants (dataset/variants.py): one described by these three, or a named set
    representation: str = "leir"
    cot: bool = True
    filter: bool = True
    variants: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "programs", tuple(self.programs))
        object.__setattr__(self, "strategies", tuple(self.strategies))
        object.__setattr__(self, "rules", tuple(str(r) for r in self.rules))
        object.__setattr__(self, "dtypes", tuple(self.dtypes))
        if self.split is not None:
            object.__setattr__(self, "split", tuple(float(f) for f in self.split))
            if len(self.split) != 3 or min(self.split) < 0 or abs(sum(self.split) - 1) > 1e-9:
                raise ValueError("split must be three non-negative fractions summing to 1")
        for d in self.dtypes:
            if d not in ("f16", "f32", "f64"):
                raise ValueError(f"dtypes: {d!r} is not one of f16, f32, f64")
        from .variants import variants_of
        variants_of(self.variants, self.representation, self.cot, self.filter)  # checks them
        if self.size not in ("small", "paper"):
            raise ValueError(f"size must be small or paper, not {self.size!r}")
        if self.target not in ("llvm", "cuda"):
            raise ValueError(f"target must be llvm or cuda, not {self.target!r}")
        if self.count < 1 or self.shard_size < 1 or self.trials < 1:
            raise ValueError("count, shard_size and trials must be at least 1")
        if self.per_strategy_cap is not None and self.per_strategy_cap < 1:
            raise ValueError("per_strategy_cap must be at least 1 (or None for no cap)")
        if self.multi_max_answers < 2 or self.multi_max_entries < 1:
            raise ValueError("multi_max_answers must be >= 2 and multi_max_entries >= 1")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("programs", "strategies", "rules", "dtypes"):
            d[k] = list(d[k])
        if d["split"] is not None:
            d["split"] = list(d["split"])
        return d

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "DatasetConfig":
        names = {f.name for f in fields(DatasetConfig)}
        return DatasetConfig(**{k: v for k, v in d.items() if k in names})

    @property
    def all_dtypes(self) -> tuple[str, ...]:
        """The dtypes zoo programs are instanced in."""
        return self.dtypes or (self.dtype,)

    def variant_list(self):
        """The chat-set variants this run writes (``variants.Variant``)."""
        from .variants import variants_of
        return variants_of(self.variants, self.representation, self.cot, self.filter)

    def key(self) -> str:
        """A stable digest of the settings (worker processes cache their context by it)."""
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Execution:
    """How to run; none of it reaches the output files."""
    out: Path = Path("leir-out")
    workers: int = 2
    executor: str = "local"              # local (process pool) or ray
    ray_address: str | None = None
    resume: bool = False
    overwrite: bool = False              # write into a non-empty folder this tool did not create
    quiet: bool = False
    program_timeout: float = 3600.0      # a program still running after this is a failure

    def __post_init__(self):
        object.__setattr__(self, "out", Path(self.out))
        if self.executor not in ("local", "ray"):
            raise ValueError(f"executor must be local or ray, not {self.executor!r}")
        if self.workers < 1:
            raise ValueError("workers must be at least 1")
