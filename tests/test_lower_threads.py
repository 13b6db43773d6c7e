"""TVM's runtime thread pool is set from the machine or LEIR_NUM_THREADS, and every timing
records the count it ran on (lower/threads.py). Each case runs in a fresh process: TVM sizes
its pool once per process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import json, os
cores = len(os.sched_getaffinity(0))
import leir_egraph as le
from leir_egraph.lower import threads
from leir_egraph.lower.build import time_pair
from leir_egraph.verify import Verifier
text = "P^{64}_{a=0}L^{32}_{c=0}[C^{f32,g}_{a}=C^{f32,g}_{a}+A^{f32,g}_{a,c};];"
sig = le.Signature.from_dict({"inputs": [{"name": "A", "dtype": "float32", "shape": [64, 32]}],
                              "outputs": [{"name": "C", "dtype": "float32", "shape": [64]}]})
before = le.Program(le.parse(text), sig)
after = le.Program(le.parse(text.replace("P^{64}", "L^{64}")), sig)
import numpy as np
paired = time_pair(before, after, {"A": np.ones((64, 32), np.float32)}, rounds=3)
with Verifier() as v:
    result = v.verify(before, after, timeout=120)
    worker_pair = v.time_pair(before, after, rounds=3)
print(json.dumps({"cores": cores, "in_use": threads.in_use(), "paired": paired.threads,
                  "verified": result.threads, "equal": result.equal,
                  "worker_pair": worker_pair.threads, "affinity": len(os.sched_getaffinity(0))}))
"""


def _probe(**env) -> dict:
    environ = {k: v for k, v in os.environ.items()
               if k not in ("LEIR_NUM_THREADS", "TVM_NUM_THREADS")}
    environ.update(env, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          env=environ, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_pool_has_the_machines_cores_and_every_timing_records_it():
    got = _probe()
    assert got["in_use"] == got["cores"] >= 1
    assert got["paired"] == got["verified"] == got["worker_pair"] == got["cores"]
    assert got["equal"] and got["affinity"] == got["cores"]  # TVM did not pin us to one core


@pytest.mark.parametrize("env,count", [({"LEIR_NUM_THREADS": "3"}, 3),
                                       ({"TVM_NUM_THREADS": "2"}, 2),
                                       ({"LEIR_NUM_THREADS": "1", "TVM_NUM_THREADS": "4"}, 1)])
def test_the_environment_sets_the_count(env, count):
    got = _probe(**env)
    assert got["in_use"] == got["paired"] == got["verified"] == got["worker_pair"] == count


def test_a_bad_count_is_a_one_line_error(monkeypatch):
    from leir_egraph.lower import threads
    monkeypatch.setenv("LEIR_NUM_THREADS", "two")
    with pytest.raises(ValueError, match=r"^LEIR_NUM_THREADS='two': expected a whole number"):
        threads.wanted()
    monkeypatch.setenv("LEIR_NUM_THREADS", "0")
    with pytest.raises(ValueError, match="threads >= 1"):
        threads.wanted()


# ---------------------------------------------------------------- --threads on every timing command

BEFORE = "P^{64}_{a=0}L^{32}_{c=0}[C^{f32,g}_{a}=C^{f32,g}_{a}+A^{f32,g}_{a,c};];"
SIGNATURE = {"inputs": [{"name": "A", "dtype": "float32", "shape": [64, 32]}],
             "outputs": [{"name": "C", "dtype": "float32", "shape": [64]}]}


def _recorded_threads(command: str, out: Path) -> list:
    """The thread counts a command's output records (one per timing it reports)."""
    if command == "search":
        result = json.loads((out / "stdout").read_text())
        return [result["threads"]]
    if command == "verify":
        return [json.loads((out / "stdout").read_text())["threads"]]
    if command == "explore":
        result = json.loads((out / "stdout").read_text())
        return [result["threads"]] + [m["threads"] for m in result["top"] if m["time_ms"]]
    if command == "sample":
        import polars as pl
        rows = pl.read_parquet(out / "data" / "dictionary" / "*.parquet")
        return rows.filter(pl.col("speedup").is_not_null())["threads"].to_list()
    lines = [json.loads(line) for line in
             (out / "data" / "trajectories" / "trajectories.jsonl").read_text().splitlines()]
    return [line["threads"] for line in lines] + [line["machine"]["tvm_num_threads"]
                                                  for line in lines]


COMMANDS = {
    "search": ["-m", "leir_egraph", "search", "--kind", "ReLU", "--max-samples", "1",
               "--no-confirm", "--json"],
    "verify": ["-m", "leir_egraph", "verify", "{dir}/before.leir", "{dir}/after.leir",
               "--sig", "{dir}/sig.json", "--json"],
    "explore": ["-m", "leir_egraph", "explore", "--kind", "ReLU", "--depth", "1", "--top", "1",
                "--json"],
    "sample": ["-m", "leir_egraph.sample", "--programs", "ReLU", "--strategies", "loop_reorder",
               "--timing", "--workers", "1", "--quiet", "--out", "{dir}/data"],
    "trajectories": ["-m", "leir_egraph.sample", "--programs", "ReLU", "--trajectories",
                     "--max-samples", "1", "--quiet", "--out", "{dir}/data"],
}


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_timing_command_records_the_thread_count_its_option_sets(command, tmp_path):
    """--threads 3 (neither the machine's count nor TVM's default on this 2-core machine, and
    the environment says 1): every timing the command records ran on 3 threads."""
    (tmp_path / "before.leir").write_text(BEFORE)
    (tmp_path / "after.leir").write_text(BEFORE.replace("P^{64}", "L^{64}"))
    (tmp_path / "sig.json").write_text(json.dumps(SIGNATURE))
    argv = [arg.format(dir=tmp_path) for arg in COMMANDS[command]] + ["--threads", "3"]
    environ = dict(os.environ, PYTHONPATH=str(ROOT), LEIR_NUM_THREADS="1")
    done = subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=environ,
                          timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    (tmp_path / "stdout").write_text(done.stdout)
    recorded = _recorded_threads(command, tmp_path)
    assert recorded and all(count == 3 for count in recorded), recorded


def test_a_bad_threads_option_is_refused_before_any_work():
    from leir_egraph.cli import main
    from leir_egraph.lower import threads
    for bad in ("0", "two", "-1"):
        assert main(["search", "--kind", "ReLU", "--threads", bad]) == 2
    with pytest.raises(ValueError, match="threads >= 1"):
        threads.use(0)
