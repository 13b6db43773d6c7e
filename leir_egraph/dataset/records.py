"""The dictionary dataset's record: one row per transition, with a fixed schema.

Every shard is written with this exact schema (never inferred), so shards that happen to hold
only nulls in a column still concatenate, and the same rows always give the same bytes.
Nested values (the signature, the site, the bindings) are JSON text, because their keys differ
from strategy to strategy.
"""

from __future__ import annotations

import io
import json
from typing import Any, Iterable

import polars as pl

# (column, polars type, meaning) -- docs/DATASET.md renders this table.
COLUMNS: tuple[tuple[str, Any, str], ...] = (
    ("id", pl.String, "`<program_id>/<strategy>/<k>`: k-th transition of the strategy on the program"),
    ("program_id", pl.String, "unique id of the program instance (kind, size, dtype, seed)"),
    ("program", pl.String, "program name (zoo kind, file stem or corpus name)"),
    ("source", pl.String, "zoo, composed, py, leir or jsonl"),
    ("seed", pl.Int64, "instancing seed of the program"),
    ("signature", pl.String, "known tensors, JSON (docs/LEIR.md section 2)"),
    ("before_leir", pl.String, "original program, canonical LEIR"),
    ("after_leir", pl.String, "transformed program, canonical LEIR"),
    ("before_tir", pl.String, "TVMScript of the original lowered for the target"),
    ("after_tir", pl.String, "TVMScript of the transformed program (null: see tir_error)"),
    ("tir_error", pl.String, "why the transformed program does not lower"),
    ("before_cuda", pl.String, "CUDA C of the original (null: see before_cuda_error)"),
    ("before_cuda_error", pl.String, "why there is no CUDA source for the original"),
    ("after_cuda", pl.String, "CUDA C of the transformed program (null: see after_cuda_error)"),
    ("after_cuda_error", pl.String, "why there is no CUDA source for the transformed program"),
    ("strategy", pl.String, "strategy id (rule file name)"),
    ("category", pl.String, "graph, operator, memory or math"),
    ("rule", pl.String, "rule of the strategy that fired"),
    ("direction", pl.String, "simplify, expand or empty (rule-file metadata, used in balancing)"),
    ("site", pl.String, "where the rule fired, JSON (path, sort, nest, text, ...)"),
    ("bindings", pl.String, "rule parameters bound at the site, JSON"),
    ("guard_facts", pl.List(pl.String), "the precondition facts that held"),
    ("cot", pl.String, "chain of thought rendered from the rule, site, bindings and facts"),
    ("K", pl.Int64, "preconditions checked"),
    ("P", pl.Int64, "existing components modified"),
    ("S", pl.Int64, "categories of new elements"),
    ("score", pl.Float64, "difficulty score 0.1K + 0.5(P-1) + S"),
    ("difficulty", pl.String, "difficulty class of the score: easy, medium or difficult"),
    ("level", pl.String, "verification level reached: none<diff<build<exec<equal<independent"),
    ("verified", pl.Boolean, "Equal, and Independent unless the original itself is not"),
    ("reason", pl.String, "why the next verification level was not reached"),
    ("before_problem", pl.String, "a defect of the original found during verification"),
    ("max_abs_err", pl.Float64, "largest absolute output difference over the trials"),
    ("max_rel_err", pl.Float64, "largest relative output difference over the trials"),
    ("time_before_ms", pl.Float64, "median run time of the original (with --timing)"),
    ("time_after_ms", pl.Float64, "median run time of the transformed program (with --timing)"),
    ("speedup", pl.Float64, "paired: median per-round ratio before/after, timed back to back (with --timing)"),
    ("threads", pl.Int64, "threads of TVM's runtime pool the times ran on (with --timing; --threads)"),
    ("domain", pl.String, "inputs the strategy's guards assume: float (any IEEE value), finite or bounded (docs/RULES.md section 10)"),
    ("exact", pl.String, "exactness the strategy declares: bitwise, N ulp or N ulp of values"),
    ("bitwise", pl.Boolean, "every output bit equal on every input set verified (normal and special values)"),
    ("max_ulps", pl.Float64, "largest output difference in ULPs of its dtype at the output's scale (0: equal values)"),
)
SCHEMA = pl.Schema({name: dtype for name, dtype, _ in COLUMNS})
NAMES = tuple(name for name, _, _ in COLUMNS)

FAILURE_FIELDS = ("program_id", "program", "id", "strategy", "stage", "reason")
# Pipeline stages a failure can be recorded at, in pipeline order.
STAGES = ("instantiate", "parse", "frontend", "validate", "engine", "lower", "verify", "worker")


def failure(program_id: str, program: str, stage: str, reason: str, *, id: str | None = None,
            strategy: str | None = None) -> dict[str, Any]:
    """One row of the failures file."""
    return {"program_id": program_id, "program": program, "id": id, "strategy": strategy,
            "stage": stage, "reason": reason}


def frame(records: Iterable[dict[str, Any]]) -> pl.DataFrame:
    """Records (dicts with every column) as a DataFrame with the fixed schema."""
    rows = list(records)
    return pl.DataFrame({name: [r[name] for r in rows] for name in NAMES}, schema=SCHEMA)


def parquet_bytes(df: pl.DataFrame) -> bytes:
    buf = io.BytesIO()
    # One row group and explicit settings: the bytes depend on the rows only.
    df.write_parquet(buf, compression="zstd", compression_level=3, statistics=True,
                     row_group_size=max(len(df), 1))
    return buf.getvalue()


def jsonl_bytes(rows: Iterable[dict[str, Any]]) -> bytes:
    """JSON lines with keys in the order given, non-ASCII kept, no trailing spaces."""
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()


def read_jsonl(path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
