"""End-to-end runs of the dataset pipeline (python -m leir_egraph.sample) on tiny programs.

One set of inputs, built in a temporary folder, is run three ways -- locally with one worker;
killed mid-way, then resumed with two workers; on a local Ray instance with two CPUs -- and
every output file must be byte-identical between them. The inputs include programs that fail
at each stage (a LEIR file that does not validate, a PyTorch file with an unsupported op, one
that kills its worker, and a deliberately unsound rule from an extra rule folder), so the
failure records are checked on real failures.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from leir_egraph.dataset import (SCHEMA, DatasetConfig, Execution, ResumeError, build_dataset,
                                 select_strategies)

ROOT = Path(__file__).resolve().parents[1]

SIG = {"inputs": [{"name": "A", "dtype": "float32", "shape": [4, 6]}],
       "outputs": [{"name": "C", "dtype": "float32", "shape": [4, 6]}]}
CORPUS = [
    {"id": "expsum", "name": "ExpSum",
     "leir": "B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx}=D^{f32,g}_{tx}+exp(A^{f32,g}_{tx,a});];"
             "B^{4}_{tx=0}[E^{f32,g}_{tx}=log(D^{f32,g}_{tx});];",
     "signature": {"inputs": [{"name": "A", "dtype": "float32", "shape": [4, 8]}],
                   "outputs": [{"name": "E", "dtype": "float32", "shape": [4]}]}},
    {"id": "logexp", "name": "LogExp",
     "leir": "B^{4}_{tx=0}L^{6}_{a=0}[C^{f32,g}_{tx,a}=log(exp(A^{f32,g}_{tx,a})*exp(A^{f32,g}_{tx,a}));];",
     "signature": SIG},
]
UNSOUND_RULE = '''
id = "unsound_exp_to_log"
category = "math"
description = "A deliberately unsound rewrite for tests: exp(x) becomes log(x)."
guards = []
P = 1
S = 2
cot = "The expression '{lhs}' is replaced by '{rhs}'."

[[rules]]
name = "exp-to-log"
egglog = """
(rewrite (Exp e) (Log e))
"""
'''
UNSUPPORTED = '''
import torch

class Model(torch.nn.Module):
    def forward(self, x):
        return torch.fft.fft(x).real

def get_inputs():
    return [torch.randn(4, 8)]

def get_init_inputs():
    return []
'''
CRASHING = '''
import os, signal, torch

class Model(torch.nn.Module):
    def forward(self, x):
        return x + 1

def get_inputs():
    os.kill(os.getpid(), signal.SIGKILL)  # a worker lost mid-program (segfault, OOM killer)

def get_init_inputs():
    return []
'''
STRATEGIES = ("loop_reorder", "loop_split", "set_storage_scope", "logsimp", "expand_log",
              "unsound_exp_to_log")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict:
    d = tmp_path_factory.mktemp("inputs")
    (d / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in CORPUS))
    (d / "bad.leir").write_text("B^{4}_{tx=0}L^{6}_{a=0}[C^{f32,g}_{tx,a}=Z^{f32,g}_{tx,a};];")
    (d / "bad.sig.json").write_text(json.dumps(SIG))
    (d / "unsupported.py").write_text(UNSUPPORTED)
    (d / "crashing.py").write_text(CRASHING)
    (d / "rules" / "math").mkdir(parents=True)
    (d / "rules" / "math" / "unsound_exp_to_log.toml").write_text(UNSOUND_RULE)
    programs = [str(d / "corpus.jsonl"), "ReLU", str(d / "bad.leir"), str(d / "unsupported.py"),
                str(d / "crashing.py")]
    config = DatasetConfig(programs=tuple(programs), strategies=STRATEGIES,
                           rules=(str(d / "rules"),), per_strategy_cap=1, shard_size=2, seed=3)
    return {"dir": d, "config": config, "programs": programs}


def run(config: DatasetConfig, out: Path, **execution):
    return build_dataset(config, Execution(out=out, quiet=True, **execution))


def files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file()}


def assert_same_files(a: Path, b: Path) -> None:
    fa, fb = files(a), files(b)
    assert sorted(fa) == sorted(fb)
    different = [name for name in fa if fa[name] != fb[name]]
    assert not different, f"files differ between {a} and {b}: {different}"


@pytest.fixture(scope="module")
def reference(inputs, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("one-worker") / "out"
    run(inputs["config"], out, workers=1)
    return out


# ---------------------------------------------------------------- formats and failures

def test_dictionary_parquet_and_jsonl(reference):
    summary = json.loads((reference / "summary.json").read_text())
    df = pl.read_parquet(reference / "dictionary" / "*.parquet")
    assert df.schema == SCHEMA
    assert len(df) == summary["transitions"] > 0
    lines = [json.loads(l) for p in sorted((reference / "dictionary").glob("*.jsonl"))
             for l in p.read_text().splitlines()]
    assert [r["id"] for r in lines] == df["id"].to_list()
    assert lines[0] == df.row(0, named=True)
    assert df["id"].n_unique() == len(df)
    by_id = {s.id: s for s in select_strategies(STRATEGIES, inputs_rules(reference))}
    for r in df.iter_rows(named=True):
        s = by_id[r["strategy"]]
        assert (r["direction"], r["K"], r["P"], r["S"], r["difficulty"]) == \
            (s.direction, s.K, s.P, s.S, s.difficulty)
        assert r["before_tir"].startswith("# from tvm.script")
        assert r["after_tir"] or r["tir_error"]
        assert (r["after_cuda"] is None) != (r["after_cuda_error"] is None)
        assert json.loads(r["signature"])["inputs"]
        assert r["cot"] and isinstance(json.loads(r["site"]), dict)
    sound = df.filter(pl.col("strategy") != "unsound_exp_to_log")
    assert sound["verified"].all() and set(sound["level"]) == {"independent"}
    unsound = df.filter(pl.col("strategy") == "unsound_exp_to_log")
    assert len(unsound) == 2 and not unsound["verified"].any()


def inputs_rules(out: Path) -> tuple[str, ...]:
    return tuple(json.loads((out / "run.json").read_text())["config"]["rules"])


def test_failures_recorded_with_stage_and_reason(reference):
    failures = [json.loads(l) for l in (reference / "failures.jsonl").read_text().splitlines()]
    by_program = {}
    for f in failures:
        by_program.setdefault(f["program_id"], []).append(f)
    assert by_program["bad"][0]["stage"] == "validate" and "Z" in by_program["bad"][0]["reason"]
    assert by_program["unsupported"][0]["stage"] == "frontend"
    assert "UnsupportedOp" in by_program["unsupported"][0]["reason"]
    assert by_program["crashing"][0]["stage"] == "worker"
    verify = [f for f in failures if f["stage"] == "verify"]
    assert {f["strategy"] for f in verify} == {"unsound_exp_to_log"}
    assert all(f["id"] and f["reason"] for f in verify)
    programs = [json.loads(l) for p in sorted((reference / "programs").glob("*.jsonl"))
                for l in p.read_text().splitlines()]
    assert [p["status"] for p in programs] == ["ok", "ok", "ok", "failed", "failed", "failed"]
    # The programs after the crash were still processed and nothing before it was lost.
    assert programs[2]["program"] == "ReLU" and programs[2]["verified"] > 0


def test_chat_sets_load_with_datasets(reference, tmp_path):
    import datasets

    dictionary = pl.read_parquet(reference / "dictionary" / "*.parquet")
    verified = set(dictionary.filter(pl.col("verified"))["id"])
    for name in ("single", "multi"):
        ds = datasets.load_dataset("json", data_files=str(reference / "chat" / f"{name}.jsonl"),
                                   split="train", cache_dir=str(tmp_path / "hf"))
        meta = [json.loads(l) for l in
                (reference / "chat" / f"{name}.meta.jsonl").read_text().splitlines()]
        assert ds.column_names == ["messages"] and len(ds) == len(meta) > 0
        for row, m in zip(ds, meta):
            user, assistant = row["messages"]
            assert (user["role"], assistant["role"]) == ("user", "assistant")
            assert "applied_strategy'" in user["content"]
            assert "applied_strategies" not in user["content"]
            got = re.fullmatch(r"<think>(.*)</think><answer>(.*)</answer>",
                               assistant["content"], re.S)
            assert got, assistant["content"][:200]
            answer = json.loads(got.group(2))
            assert set(m["ids"]) <= verified
            if name == "single":
                assert set(answer) == {"transformed_IR", "applied_strategy"}
                assert answer["applied_strategy"] == m["strategies"][0]
            else:
                assert [a["idx"] for a in answer] == list(range(len(answer))) and len(answer) >= 2
                assert [a["applied_strategy"] for a in answer] == m["strategies"]
                assert got.group(1).startswith(f"These {len(answer)} transformed IRs")
                assert all(f"\n{i}. " in "\n" + got.group(1).split(": ", 1)[1]
                           for i in range(len(answer)))
                assert f"at least {len(answer)} different" in user["content"]
                assert "easy" not in m["classes"]


def test_report_and_plots(reference):
    report = (reference / "report.md").read_text()
    for heading in ("Balancing by difficulty class", "Balancing by category",
                    "Balancing by strategy", "Failures by stage",
                    "Token counts (LEIR vs TIR vs CUDA)"):
        assert f"## {heading}" in report
    for png in ("strategy_distribution.png", "difficulty_mix.png", "token_counts.png"):
        assert (reference / "plots" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------- determinism, resume, Ray

def test_killed_run_resumed_with_two_workers_matches_one_worker_run(inputs, reference, tmp_path):
    """Resume after a kill, and determinism across worker counts: the run is killed once its
    first shard exists, refused a resume with other settings, then resumed with two workers;
    every file must equal the uninterrupted one-worker run's."""
    out = tmp_path / "out"
    cfg = inputs["config"]
    cmd = [sys.executable, "-m", "leir_egraph.sample", "--programs", *cfg.programs,
           "--strategies", ",".join(cfg.strategies), "--rules", *cfg.rules,
           "--per-strategy-cap", "1", "--shard-size", "2", "--seed", "3", "--workers", "1",
           "--out", str(out), "--quiet"]
    proc = subprocess.Popen(cmd, cwd=ROOT, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    marker = out / "programs" / "part-00000.jsonl"
    deadline = time.monotonic() + 480  # a loaded shared machine is slow to start workers
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # the whole run: CLI, its workers, their TVM workers
    proc.wait()
    assert marker.exists(), "the run never completed its first shard"
    assert not (out / "programs" / "part-00002.jsonl").exists(), "killed too late to test resume"
    with pytest.raises(ResumeError):
        run(DatasetConfig.from_dict({**cfg.to_dict(), "seed": 4}), out, resume=True)
    run(cfg, out, workers=2, resume=True)
    assert_same_files(reference, out)


def test_ray_executor_with_two_workers_matches_local_run(inputs, reference, tmp_path, monkeypatch):
    pytest.importorskip("ray")
    # Ray's memory monitor kills tasks when the whole machine passes 95% memory use; on a
    # machine shared with other jobs that is not ours to judge (the kernel's OOM killer still is).
    monkeypatch.setenv("RAY_memory_usage_threshold", "0.995")
    run(inputs["config"], tmp_path / "out", workers=2, executor="ray")
    assert_same_files(reference, tmp_path / "out")


def test_help_shows_examples():
    out = subprocess.run([sys.executable, "-m", "leir_egraph.sample", "--help"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    assert "examples:" in out and "--per-strategy-cap" in out and "--executor" in out


def test_undo_steps_keep_each_step_read_backwards_as_its_inverses(tmp_path):
    """--undo-steps: each kept powsimp step p -> q is also kept as expand_powsimp's q -> p (the
    paper's data for its inverse strategies), verified like any other record; without the
    option the records are the strategies' own draws only."""
    (tmp_path / "silu.leir").write_text(
        "B^{4}_{tx=0}L^{6}_{a=0}[C^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}*(1/(1+exp(-A^{f32,g}_{tx,a})));];")
    (tmp_path / "silu.sig.json").write_text(json.dumps(SIG))
    frames = {}
    for undo in (False, True):
        config = DatasetConfig(programs=(str(tmp_path / "silu.leir"),),
                               strategies=("powsimp", "expand_powsimp"), per_strategy_cap=1,
                               undo_steps=undo, cuda_source=False)
        out = tmp_path / f"out-{undo}"
        run(config, out, workers=1)
        frames[undo] = pl.read_parquet(out / "dictionary" / "*.parquet")
    plain, undone = frames[False], frames[True]
    assert not plain["rule"].str.starts_with("undo ").any()
    forward = plain.filter(pl.col("strategy") == "powsimp").row(0, named=True)
    back = undone.filter(pl.col("rule").str.starts_with("undo powsimp:")).row(0, named=True)
    assert back["strategy"] == "expand_powsimp" and back["direction"] == "expand"
    assert (back["before_leir"], back["after_leir"]) == (forward["after_leir"],
                                                         forward["before_leir"])
    assert back["before_tir"] == forward["after_tir"] and back["verified"]
    assert back["id"] == f"{forward['id']}~powsimp".replace("/powsimp/", "/expand_powsimp/")
    from leir_egraph.sample import config_from, parser
    assert config_from(parser().parse_args(["--undo-steps"])).undo_steps
    assert not config_from(parser().parse_args([])).undo_steps
    # both are chosen and each is the other's inverse: every kept step is kept both ways
    assert len(undone) == 2 * len(plain) and undone["verified"].all()
