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
