"""benchmarks/kernel_ranking.py and benchmarks/cost_fit.py on one small workload (#70, a GEMM
with ReLU and division): the programs are timed in interleaved rounds and saved; re-costing the
saved file reproduces the run's figures without timing, a run measured against itself agrees
exactly, and the fit reports the saved workload. No timing is asserted (times are
measurements)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(script: str, *args: str) -> str:
    environ = dict(os.environ, PYTHONPATH=str(ROOT), LEIR_BENCH_RESULTS="0")
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args],
                          capture_output=True, text=True, env=environ, timeout=900,
                          cwd=ROOT / "benchmarks")
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _figures(out: str) -> list[tuple[str, str]]:
    return re.findall(r"spearman +(\S+) +noise ceiling +(\S+)", out)


@pytest.mark.slow   # builds and times four programs, a fit: a minute on 2 loaded cores
def test_timings_are_saved_reloaded_and_compared(tmp_path):
    saved = tmp_path / "timings.json"
    timed = _run("kernel_ranking.py", "--workloads", "70", "--programs", "4", "--rounds", "4",
                 "--min-ms", "0.5", "--save", str(saved))
    data = json.loads(saved.read_text())
    assert data["threads"] == 1 and data["rounds"] == 4
    (workload,) = data["workloads"]
    assert workload["index"] == 70 and len(workload["programs"]) == 4
    assert workload["programs"][0]["label"] == "root"
    assert all(len(p["rounds"]) == 4 and min(p["rounds"]) > 0 for p in workload["programs"])
    assert len({p["text"] for p in workload["programs"]}) == 4
    # the same figures from the saved timings, and a run agrees with itself exactly
    loaded = _run("kernel_ranking.py", "--load", str(saved), "--against", str(saved))
    assert _figures(loaded) == _figures(timed) and len(_figures(timed)) == 1
    assert re.search(r"across runs +1\.000", loaded), loaded
    # the fit on the file, reported on a held-out copy
    held_out = tmp_path / "held_out.json"
    shutil.copy(saved, held_out)
    fitted = _run("cost_fit.py", "--train", str(saved), "--test", str(held_out), "--passes", "1")
    assert "constants: Machine(" in fitted and "#70" in fitted.split("test:")[1]
