"""Benchmarks write their latest figures to benchmarks/results/<name>.md (results_file.py):
a finished run writes what it printed under a header saying how it was measured; a failed run
and a scratch run (LEIR_BENCH_RESULTS=0) write nothing."""

import os
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

SCRIPT = """
import sys
sys.path.insert(0, {benchmarks!r})
from results_file import recorded

def main():
    print("throughput: 12.5 programs/min")
    return int(sys.argv[1])

sys.exit(recorded(main))
"""


def _run(tmp_path, status, **env):
    script = tmp_path / "tiny_bench.py"
    script.write_text(SCRIPT.format(benchmarks=str(BENCHMARKS)))
    out = tmp_path / "results"
    done = subprocess.run([sys.executable, str(script), str(status)], capture_output=True,
                          text=True, timeout=120,
                          env={**os.environ, "LEIR_BENCH_RESULTS_DIR": str(out), **env})
    return done, out / "tiny_bench.md"


def test_a_finished_run_writes_its_figures_with_command_commit_and_load(tmp_path):
    done, path = _run(tmp_path, 0)
    assert done.returncode == 0, done.stderr
    assert "throughput: 12.5 programs/min" in done.stdout      # still printed
    text = path.read_text()
    assert text.startswith("# tiny_bench\n")
    assert "- command: `python benchmarks/tiny_bench.py 0`" in text
    for field in ("- commit: ", "- date: ", "- machine: ", "- load (1-minute average): ",
                  "- wall time: "):
        assert field in text, field
    assert "```\nthroughput: 12.5 programs/min\n```" in text


def test_a_failed_or_scratch_run_writes_nothing(tmp_path):
    done, path = _run(tmp_path, 3)
    assert done.returncode == 3 and not path.exists()
    done, path = _run(tmp_path, 0, LEIR_BENCH_RESULTS="0")
    assert done.returncode == 0 and not path.exists()
