"""Token counts of LEIR, TIR and CUDA C (dataset/tokens.py) and the dataset report's section."""

from __future__ import annotations

import gzip
import hashlib
import importlib.resources
import sys
from collections import Counter

import pytest

from leir_egraph.dataset import SCHEMA, DatasetConfig
from leir_egraph.dataset.report import plots, summarize, write_report
from leir_egraph.dataset.tokens import (ENCODINGS, count, count_program, dataset_tokens,
                                        encoding, program_texts, statistics)
from leir_egraph.leir import Program

# The SHA-256 that tiktoken (tiktoken_ext/openai_public.py) checks for OpenAI's rank files.
OPENAI_RANKS = {"o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
                "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"}


def program(text: str, n: int, name: str) -> Program:
    sig = {"inputs": [{"name": "A", "dtype": "float32", "shape": [4, n]}],
           "outputs": [{"name": "C", "dtype": "float32", "shape": [4, n]}]}
    return Program.parse(text, sig, name)


RELU = "B^{4}_{tx=0}L^{30}_{a=0}[C^{f32,g}_{tx,a}=max(A^{f32,g}_{tx,a},0);];"
# 4 x 2048 threads: lowers for the CPU, but is no valid CUDA kernel (> 1024 threads per block)
WIDE = "L^{4}_{a=0}B^{2048}_{tx=0}[C^{f32,g}_{a,tx}=exp(A^{f32,g}_{a,tx});];"


def test_the_tokenizer_is_openais_bpe():
    for name, digest in OPENAI_RANKS.items():
        data = importlib.resources.files("bpe_openai.data").joinpath(f"{name}.tiktoken.gz")
        assert hashlib.sha256(gzip.decompress(data.read_bytes())).hexdigest() == digest
    # o200k merges ' world' into one token, 'Hello' into another
    assert count("Hello world", "o200k_base") == 2
    assert count("<|endoftext|>", "o200k_base") > 1  # special-token text counts as text


def test_counts_of_three_representations_and_their_statistics():
    relu, wide = program(RELU, 30, "relu"), program(WIDE, 2048, "wide")
    rows = []
    for p in (relu, wide):
        texts, reasons = program_texts(p)
        rows.append(count_program(p.name, texts, reasons))
    r, w = rows
    for e in ENCODINGS:
        assert r.tokens["leir"][e] == len(encoding(e).encode_ordinary(RELU))
        assert r.tokens["leir"][e] < r.tokens["tir"][e] < r.tokens["cuda"][e]
        assert 0 < r.cuda_header[e] < r.tokens["cuda"][e]
    assert set(w.tokens) == {"leir", "tir"} and "CudaInvalid" in w.missing["cuda"]
    assert "1024" in w.missing["cuda"]

    stats = statistics(rows)
    assert stats["programs"] == 2
    assert list(stats["missing"]) == ["cuda"] and sum(stats["missing"]["cuda"].values()) == 1
    o200k = stats["encodings"]["o200k_base"]
    leir = o200k["representations"]["leir"]
    assert set(leir) == {"n", "mean", "median", "p95", "max"} and leir["n"] == 2
    assert leir["max"] == max(x.tokens["leir"]["o200k_base"] for x in rows)
    assert o200k["representations"]["cuda"]["n"] == 1
    ratio = o200k["ratios"]["leir/cuda"]  # over the one program that has both
    assert ratio["n"] == 1 and ratio["of_means"] == pytest.approx(
        r.tokens["leir"]["o200k_base"] / r.tokens["cuda"]["o200k_base"])
    assert 0 < o200k["ratios"]["leir/tir"]["of_means"] < 1


def test_dataset_report_token_section(tmp_path, monkeypatch):
    """The report's section from a dictionary shard of real texts (the sampler's end-to-end run
    is checked in test_sample_pipeline.py::test_report_and_plots), and the skipped case."""
    import polars as pl

    before = program(RELU, 30, "relu")
    after = program("L^{30}_{a=0}B^{4}_{tx=0}[C^{f32,g}_{tx,a}=max(A^{f32,g}_{tx,a},0);];", 30,
                    "relu")
    (b_texts, _), (a_texts, _) = program_texts(before), program_texts(after)
    record = {c: None for c in SCHEMA}
    record.update(id="relu/loop_reorder/0", program_id="relu", before_leir=before.text,
                  before_tir=b_texts["tir"], before_cuda=b_texts["cuda"],
                  after_leir=after.text, after_tir=a_texts["tir"],
                  after_cuda_error="CudaInvalid: a reason")
    shard = tmp_path / "part-00000.parquet"
    pl.DataFrame([record], schema=SCHEMA).write_parquet(shard)
    config = DatasetConfig(programs=("relu.leir",)).to_dict()
    summary = summarize([], [], Counter(), [], 0, 0)

    summary["tokens"], rows = dataset_tokens([shard])
    assert summary["tokens"]["tokenizer"].startswith("bpe-openai ")
    originals = summary["tokens"]["populations"]["originals"]["encodings"]["o200k_base"]
    assert originals["representations"]["cuda"]["max"] == count(b_texts["cuda"], "o200k_base")
    rewrites = summary["tokens"]["populations"]["rewrites"]
    assert rewrites["missing"] == {"cuda": {"CudaInvalid: a reason": 1}}
    report = write_report(config, summary, [], {})
    assert "## Token counts (LEIR vs TIR vs CUDA)" in report
    assert f"| originals | o200k_base | LEIR | 1 | {count(before.text, 'o200k_base')}.00 |" \
        in report
    assert "| rewrites | CUDA C | 1 | CudaInvalid: a reason |" in report
    assert plots([], rows)["token_counts.png"][:4] == b"\x89PNG"

    # Without the tokenizer package the report says so instead of failing.
    monkeypatch.setitem(sys.modules, "bpe_openai", None)
    encoding.cache_clear()
    try:
        summary["tokens"], rows = dataset_tokens([shard])
    finally:
        encoding.cache_clear()
    assert rows == {} and "is not installed" in summary["tokens"]["skipped"]
    assert "Token counts were skipped: the tokenizer package bpe-openai is not installed" in \
        write_report(config, summary, [], {})
    assert "token_counts.png" not in plots([], rows)
