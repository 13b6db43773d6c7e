"""benchmarks/peers.py's machinery on one tiny workload (#81, Sigmoid 64x505): every contender
of the module docstring runs or says why not, the thread counts and the load are recorded, the
report prints the figures. No timing is asserted (times are measurements)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow   # a search, torch.compile and MetaSchedule's set-up: minutes on 2 cores
def test_peers_measures_every_contender_side_by_side_on_one_workload(tmp_path):
    out = tmp_path / "peers"
    environ = dict(os.environ, PYTHONPATH=str(ROOT), LEIR_BENCH_RESULTS="0")
    command = [sys.executable, str(ROOT / "benchmarks" / "peers.py"), "--workloads", "81,",
               "--threads", "1", "--rounds", "3", "--max-samples", "2", "--ms-samples", "2",
               "--algorithms", "beam", "greedy", "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, env=environ, timeout=1200,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 1 and "error" not in rows[0], rows
    row = rows[0]
    assert row["index"] == 81 and row["dtype"] == "float32"
    assert row["threads"] == {"tvm": 1, "torch": 1, "wanted": 1}
    assert len(row["load_before"]) == len(row["load_after"]) == 3
    assert row["root_max_abs_err"] is not None and row["root_max_abs_err"] < 1e-5
    for algorithm in ("beam", "greedy"):
        search = row["search"][algorithm]
        assert 1 <= search["samples"] <= 2 and search["speedup"] >= 1
        assert search["threads"] in (1, None)   # None: no candidate was valid, nothing timed
    assert row["best_any_algorithm"] in ("beam", "greedy")
    timed = set(row["rounds"])
    assert {"eager", "root", "best", "best_any"} <= timed
    for contender in ("compile", "metaschedule"):   # timed, or the reason it was not
        assert (contender in timed) != (contender in row["errors"]), row["errors"]
    assert all(len(times) == 3 and min(times) > 0 for times in row["rounds"].values())
    if "metaschedule" in timed:
        functions = row["metaschedule"]["functions"]
        assert functions and all(f["samples"] == 2 for f in functions)
    # the report: the figures of the issue at the thread count measured
    assert "## 1 thread(s): 1 workloads measured" in done.stdout
    for figure in ("best / torch.compile", "best / eager", "confirmed speedup over root"):
        assert f"| {figure}" in done.stdout
    # a second run with the same settings measures nothing again (resumable)
    again = subprocess.run(command, capture_output=True, text=True, env=environ, timeout=600,
                           cwd=ROOT)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "0 workloads to measure" in again.stderr
    assert len((out / "results.jsonl").read_text().splitlines()) == 1
