"""Token counts of a program's three representations: LEIR, TVM TIR (TVMScript) and CUDA C.

The Step-TP paper's Figure 4 argues that LEIR is the compact way to show an LLM a tensor
program. These counts measure it with real BPE tokenizers: OpenAI's ``o200k_base`` (GPT-4o)
and ``cl100k_base`` (GPT-4) encodings, from the ``bpe-openai`` package, whose wheels bundle the
rank files (``tiktoken`` itself downloads them at first use, which this machine cannot do).
Its bundled files are byte-identical to OpenAI's: their SHA-256 is the one ``tiktoken`` checks
(docs/DATASET.md, "Token counts"). The paper's Qwen3 tokenizer is not available offline.

    >>> count("C^{f32,g}_{tx,a}=max(A^{f32,g}_{tx,a},0);", "o200k_base")    # doctest: +SKIP
    21

* ``program_texts(program)`` asks lowering for the TIR text (the TVMScript of what ``lower``
  returns, a PrimFunc or an IRModule alike) and the CUDA source; a representation that cannot
  be produced comes back as a one-line reason instead of text.
* ``count_program(program_id, texts, reasons)`` -> ``ProgramTokens`` (representation ->
  encoding -> tokens, and the reasons of the missing ones).
* ``statistics(rows)`` -> mean, median, p95 and max per representation and encoding, and the
  LEIR/TIR and LEIR/CUDA ratios over the programs that have both.
* ``dictionary_tokens(paths)`` -> the counts of a dataset's dictionary shards (the report's
  token section).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping

REPRESENTATIONS = ("leir", "tir", "cuda")
ENCODINGS = ("o200k_base", "cl100k_base")
PACKAGE = "bpe-openai"      # pinned in pyproject.toml
RATIOS = (("leir", "tir"), ("leir", "cuda"))
# The text before the first kernel declaration of TVM's CUDA source is a fixed header
# (integer typedefs, NVRTC shims): counted as part of the source, reported on its own too.
KERNEL_START = 'extern "C"'


class TokenizerUnavailable(RuntimeError):
    """The tokenizer package is not installed (or cannot load an encoding)."""


@lru_cache(maxsize=None)
def encoding(name: str):
    """The bpe-openai encoding ``name`` (loaded once per process, about 0.3 s)."""
    try:
        import bpe_openai
    except ImportError:
        raise TokenizerUnavailable(f"the tokenizer package {PACKAGE} is not installed "
                                   "(pip install the version pyproject.toml pins)") from None
    try:
        return bpe_openai.get_encoding(name)
    except Exception as err:  # noqa: BLE001 -- an unknown name, damaged package data
        raise TokenizerUnavailable(f"{PACKAGE} cannot load the encoding {name}: {err}") from None


def tokenizer_version() -> str:
    """``bpe-openai X.Y.Z`` as installed; TokenizerUnavailable when it is not."""
    encoding(ENCODINGS[0])
    from importlib.metadata import version
    return f"{PACKAGE} {version(PACKAGE)}"


def count(text: str, encoding_name: str) -> int:
    """Tokens of ``text``; special-token spellings count as ordinary text (tiktoken's
    ``encode_ordinary``)."""
    return len(encoding(encoding_name).encode_ordinary(text))


# ---------------------------------------------------------------- texts of one program

def tir_text(program, target: str = "llvm") -> str:
    """The TVMScript of the program lowered for ``target``."""
    from ..lower import lower
    return lower(program, target).script()


def program_texts(program, tir_target: str = "llvm") -> tuple[dict[str, str], dict[str, str]]:
    """``(texts, reasons)``: the LEIR, TIR and CUDA text of ``program``; a representation that
    cannot be produced (invalid program, over the CUDA launch limits) has a reason instead."""
    from ..lower import cuda_source
    texts, reasons = {"leir": program.text}, {}
    for rep, make in (("tir", lambda: tir_text(program, tir_target)),
                      ("cuda", lambda: cuda_source(program))):
        try:
            texts[rep] = make()
        except Exception as err:  # noqa: BLE001 -- LeirValidationError, LoweringError, CudaInvalid
            reasons[rep] = one_line(err)
    return texts, reasons


def one_line(err: BaseException) -> str:
    lines = [l.strip() for l in str(err).splitlines() if l.strip()]
    return f"{type(err).__name__}: {lines[0][:300]}" if lines else type(err).__name__


def cuda_header(source: str) -> str:
    """The part of TVM's CUDA source before its first kernel (empty if it has none)."""
    at = source.find(KERNEL_START)
    return source[:at] if at >= 0 else ""


# ---------------------------------------------------------------- counts

@dataclass(frozen=True)
class ProgramTokens:
    """Token counts of one program: ``tokens[representation][encoding]``; ``missing`` says why
    a representation has no count; ``cuda_header`` is the header's tokens per encoding."""
    program_id: str
    tokens: Mapping[str, Mapping[str, int]]
    missing: Mapping[str, str] = field(default_factory=dict)
    cuda_header: Mapping[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"program_id": self.program_id,
                "tokens": {r: dict(v) for r, v in self.tokens.items()},
                "missing": dict(self.missing), "cuda_header": dict(self.cuda_header)}


def count_program(program_id: str, texts: Mapping[str, str | None],
                  reasons: Mapping[str, str | None] | None = None,
                  encodings: Iterable[str] = ENCODINGS) -> ProgramTokens:
    """Counts of every representation that has a text; the others are missing with their
    reason (``reasons[rep]``, or "no text")."""
    reasons = reasons or {}
    encodings = tuple(encodings)
    tokens, missing = {}, {}
    for rep in REPRESENTATIONS:
        text = texts.get(rep)
        if text is None:
            missing[rep] = reasons.get(rep) or "no text"
        else:
            tokens[rep] = {e: count(text, e) for e in encodings}
    header = cuda_header(texts.get("cuda") or "")
    return ProgramTokens(program_id, tokens, missing,
                         {e: count(header, e) for e in encodings} if header else {})


# ---------------------------------------------------------------- statistics

def distribution(values: list[float]) -> dict[str, float | int | None]:
    """n, mean, median, p95 (linear interpolation between ranks, numpy's default) and max."""
    import numpy as np
    if not values:
        return {"n": 0, "mean": None, "median": None, "p95": None, "max": None}
    a = np.asarray(values, dtype=float)
    return {"n": len(values), "mean": float(a.mean()), "median": float(np.median(a)),
            "p95": float(np.percentile(a, 95)), "max": float(a.max())}


def statistics(rows: list[ProgramTokens], encodings: Iterable[str] = ENCODINGS
               ) -> dict[str, Any]:
    """Per encoding: the distribution of each representation over the programs that have it,
    and each ratio (LEIR/TIR, LEIR/CUDA) over the programs that have both: the ratio of the
    two means and the median of the per-program ratios; ``cuda_header``: the distribution of
    the CUDA header's tokens (included in the CUDA counts). ``missing``: representation ->
    reason -> programs."""
    out: dict[str, Any] = {"programs": len(rows), "encodings": {}, "missing": {}}
    for e in encodings:
        reps = {r: distribution([p.tokens[r][e] for p in rows if r in p.tokens])
                for r in REPRESENTATIONS}
        headers = [p.cuda_header[e] for p in rows if e in p.cuda_header]
        ratios = {}
        for a, b in RATIOS:
            pairs = [(p.tokens[a][e], p.tokens[b][e]) for p in rows
                     if a in p.tokens and b in p.tokens and p.tokens[b][e]]
            ratios[f"{a}/{b}"] = {
                "n": len(pairs),
                "of_means": (sum(x for x, _ in pairs) / sum(y for _, y in pairs)) if pairs
                else None,
                "median": distribution([x / y for x, y in pairs])["median"]}
        out["encodings"][e] = {"representations": reps, "ratios": ratios,
                               "cuda_header": distribution(headers)}
    for rep in REPRESENTATIONS:
        reasons = Counter(p.missing[rep] for p in rows if rep in p.missing)
        if reasons:
            out["missing"][rep] = dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))
    return out


# ---------------------------------------------------------------- a dataset's dictionary

# dictionary column -> representation, for the originals and the rewrites of each transition
_ORIGINAL = {"leir": "before_leir", "tir": "before_tir", "cuda": "before_cuda"}
_REWRITE = {"leir": "after_leir", "tir": "after_tir", "cuda": "after_cuda"}
_REASONS = {"before": {"cuda": "before_cuda_error"},
            "after": {"tir": "tir_error", "cuda": "after_cuda_error"}}


def dictionary_tokens(paths: list[Path]) -> dict[str, list[ProgramTokens]]:
    """``{"originals": one row per program, "rewrites": one row per transition}`` from the
    dictionary's Parquet shards, read one shard at a time (only the text columns).
    TokenizerUnavailable when the tokenizer is not installed."""
    import polars as pl
    encoding(ENCODINGS[0])  # fail before reading anything
    originals: list[ProgramTokens] = []
    rewrites: list[ProgramTokens] = []
    seen: set[str] = set()
    for path in paths:
        frame = pl.read_parquet(path, columns=["id", "program_id", *_ORIGINAL.values(),
                                               *_REWRITE.values(), "tir_error",
                                               "before_cuda_error", "after_cuda_error"])
        for row in frame.iter_rows(named=True):
            if row["program_id"] not in seen:
                seen.add(row["program_id"])
                originals.append(_row_tokens(row["program_id"], row, _ORIGINAL, "before"))
            rewrites.append(_row_tokens(row["id"], row, _REWRITE, "after"))
    return {"originals": originals, "rewrites": rewrites}


def _row_tokens(pid: str, row: dict[str, Any], columns: dict[str, str], side: str
                ) -> ProgramTokens:
    texts = {rep: row[col] for rep, col in columns.items()}
    reasons = {rep: row[col] for rep, col in _REASONS[side].items()}
    return count_program(pid, texts, reasons)


def dataset_tokens(paths: list[Path]) -> tuple[dict[str, Any], dict[str, list[ProgramTokens]]]:
    """``(summary["tokens"], rows)`` for a dataset's report: the tokenizer, the encodings and
    the statistics of each population; ``{"skipped": reason}`` and no rows when the tokenizer
    is not installed (the report says so instead of failing)."""
    try:
        rows = dictionary_tokens(paths)
        return ({"tokenizer": tokenizer_version(), "encodings": list(ENCODINGS),
                 "populations": {name: statistics(r) for name, r in rows.items()}}, rows)
    except TokenizerUnavailable as err:
        return {"skipped": str(err)}, {}
