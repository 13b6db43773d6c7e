"""Multi-step trajectories and preference pairs (``python -m leir_egraph.sample
--trajectories``) on one tiny real program: the recorded steps replay (each is a single step of
its strategy from the one before, and verifies against the root), the recorded final speedup
is reproduced when re-timed with the paired method (faster beyond the noise threshold again,
and within the re-timing's spread widened by a quarter), the pairs hold
what they claim, and both files load with ``datasets``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from leir_egraph.dataset import DatasetConfig, Execution
from leir_egraph.dataset.trajectories import build_trajectories
from leir_egraph.leir.canonical import canonical_text
from leir_egraph.leir.program import Program

LOOPS = ("loop_split", "loop_reorder", "loop_parallelization", "loop_vectorization")


def config() -> DatasetConfig:
    return DatasetConfig(programs=("Sum_reduction_over_a_dimension",), strategies=LOOPS,
                         split=(0.8, 0.1, 0.1), seed=0)


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("trajectories") / "out"
    summary = build_trajectories(config(), Execution(out=out, quiet=True), max_samples=6)
    assert summary["trajectories"] == 1 and summary["failures"] == 0
    return out


def rows(out: Path, name: str) -> list[dict]:
    text = (out / "trajectories" / name).read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_trajectories_replay_and_their_speedup_reproduces(out):
    from leir_egraph.egraph import single_steps
    from leir_egraph.search.judge import CONFIRM_ROUNDS, NOISE_THRESHOLD
    from leir_egraph.verify import Verifier

    (line,) = rows(out, "trajectories.jsonl")
    assert line["split"] == "train" and line["machine"]["cores"] >= 1
    assert line["machine"]["llvm_mcpu"] and line["machine"]["tvm_num_threads"]
    assert line["steps"], "the search found no faster program; nothing to replay"
    root = Program.parse(line["root_leir"], line["signature"])
    verifier = Verifier()
    try:
        before = root
        for step in line["steps"]:
            after = Program.parse(step["leir"], line["signature"])
            # a single step of the strategy it names, from the program before it
            assert canonical_text(after) in {canonical_text(t.after)
                                             for t in single_steps(before, step["strategy"])}
            assert step["cot"] and step["level"] in ("equal", "independent")
            result = verifier.verify(root, after, timing=False)
            assert result.equal, result.reason
            before = after
        # Re-timed with the paired method: still faster beyond the noise threshold, and the
        # recorded speedup inside the re-timing's spread of per-round ratios (10th to 90th
        # percentile) widened by a quarter. Two medians of tens-of-nanosecond kernels on a
        # loaded 2-core machine differ by more than 5% (measured: 1.79 recorded, 1.95
        # re-timed at load 14), so the median alone is not compared; and the recording and the
        # re-timing run minutes apart under other load, so the spread itself moves (a CI run:
        # 1.78 recorded, re-timed 1.48-1.60) -- the band says "the same speedup", not "the
        # same timing".
        recorded = line["final_speedup"]
        assert recorded >= NOISE_THRESHOLD
        paired = verifier.time_pair(root, before, rounds=CONFIRM_ROUNDS)
        assert paired.faster(NOISE_THRESHOLD), (paired.speedup, paired.min_speedup)
        ratios = sorted(paired.ratios)
        lo, hi = ratios[len(ratios) // 10], ratios[-1 - len(ratios) // 10]
        assert lo / 1.25 <= recorded <= hi * 1.25, (lo, hi, recorded)
    finally:
        verifier.close()


def test_preference_pairs_are_verified_steps_from_one_state(out):
    from leir_egraph.egraph import single_steps
    from leir_egraph.verify import Verifier

    pairs = rows(out, "preferences.jsonl")
    assert pairs, "no pair of steps from one state differed beyond noise"
    verifier = Verifier()
    try:
        for pair in pairs:
            state = Program.parse(pair["state_leir"], pair["signature"])
            root = Program.parse(rows(out, "trajectories.jsonl")[0]["root_leir"],
                                 pair["signature"])
            assert pair["ratio"] >= pair["threshold"] and pair["min_ratio"] >= pair["threshold"]
            for side in ("chosen", "rejected"):
                p = Program.parse(pair[side]["leir"], pair["signature"])
                assert canonical_text(p) in {canonical_text(t.after) for t in
                                             single_steps(state, pair[side]["strategy"])}
                assert verifier.verify(root, p, timing=False).equal
    finally:
        verifier.close()


def test_trajectory_files_load_with_datasets(out, tmp_path):
    import datasets
    for name in ("trajectories.jsonl", "preferences.jsonl"):
        ds = datasets.load_dataset("json", data_files=str(out / "trajectories" / name),
                                   split="train", cache_dir=str(tmp_path / "hf"))
        assert len(ds) == len(rows(out, name)) and "machine" in ds.column_names


def test_a_killed_run_resumes_to_the_same_files(out, tmp_path):
    """A run killed after a program's search was written (its outcome file in the manifest)
    but before the final files: --resume searches nothing again and writes the very files of
    the uninterrupted run; a damaged outcome file is searched again."""
    import shutil
    final = ("trajectories.jsonl", "preferences.jsonl", "failures.jsonl", "summary.json")
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    for name in final:
        (copy / "trajectories" / name).unlink()
    searched = []
    build_trajectories(config(), Execution(out=copy, quiet=True, resume=True), max_samples=6,
                       on_program=searched.append)
    assert searched == []
    for name in final:
        assert (copy / "trajectories" / name).read_bytes() == \
            (out / "trajectories" / name).read_bytes(), name
    part = copy / "trajectories" / "programs" / "part-00000.json"
    part.write_bytes(part.read_bytes()[:40])   # torn by a kill mid-write
    summary = build_trajectories(config(), Execution(out=copy, quiet=True, resume=True),
                                 max_samples=6, on_program=searched.append)
    assert len(searched) == 1 and summary["trajectories"] == 1
    assert json.loads(part.read_text())["trajectory"]["program_id"] == searched[0]["program_id"]


def test_trajectories_resume_refuses_a_folder_without_a_run_in_one_line(tmp_path):
    import subprocess
    import sys
    got = subprocess.run([sys.executable, "-m", "leir_egraph.sample", "--trajectories",
                          "--resume", "--programs", "ReLU", "--out", str(tmp_path / "o")],
                         capture_output=True, text=True, timeout=300,
                         cwd=Path(__file__).resolve().parents[1])
    assert got.returncode == 2 and len(got.stderr.strip().splitlines()) == 1
    assert "--resume" in got.stderr and "no run of this tool" in got.stderr
