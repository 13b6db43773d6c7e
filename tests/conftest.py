"""Shared fixtures: the corpora of tests/data (LEIR emitted by the paper authors' translator, see
tests/data/README.md) and one verification worker per module."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent / "data"
REFERENCE_CORPUS = DATA / "reference_corpus.jsonl"
GOLDEN_DIR = DATA / "golden"
GOLDEN_CORPUS = GOLDEN_DIR / "golden_corpus.jsonl"


# ---------------------------------------------------------------- the fast loop

# ``pytest -m "not slow"`` leaves these out. Slow are the modules that run whole pipelines,
# explorations, searches, zoo-wide or corpus-wide checks and wheel builds, every test that
# verifies on TVM through a verifier or draws its programs from the golden corpus, and the
# tests named in SLOW_TESTS (each parametrization of them runs for seconds).
SLOW_MODULES = frozenset({
    "test_explore.py", "test_frontend_networks.py", "test_lower_build.py",
    "test_lower_golden.py", "test_lower_segments.py", "test_packaging.py",
    "test_recall_checks.py", "test_sample_pipeline.py", "test_search.py",
    "test_soundness_core.py", "test_workloads.py", "test_dataset_splits.py",
    "test_dataset_trajectories.py", "test_search_node_steps.py",
})
SLOW_FIXTURES = frozenset({"verifier", "golden_rows"})
SLOW_TESTS = frozenset({
    "test_rule_file_examples_and_counterexamples",   # every rule file's examples (43 strategies)
    "test_examples_verify_equal",                    # every math example verified on TVM
    "test_finite_spans_contain_every_real_value",    # the longest hypothesis runs
    "test_random_asts_survive_print_then_parse",
    "test_timeout_is_a_result_and_the_worker_recovers",  # waits out verification timeouts
    "test_a_user_strategy_with_a_new_fact_is_verified_on_tvm_from_the_command_line",
    "test_recognition_on_the_reference_corpus",      # every reference corpus program
    "test_sampler_records_an_unsound_user_rule_as_failures",   # a whole sampler run
    "test_sigkill_of_the_sampler_leaves_no_worker_behind",
    "test_llm_search_over_http_with_failures_recorded",
    "test_programs_at_the_depth_limits_go_through_every_stage",
    "test_the_environment_sets_the_count",           # a TVM process per thread count
})


def pytest_collection_modifyitems(config, items):
    for item in items:
        if (item.path.name in SLOW_MODULES or getattr(item, "originalname", None) in SLOW_TESTS
                or SLOW_FIXTURES & set(getattr(item, "fixturenames", ()))):
            item.add_marker(pytest.mark.slow)


# ---------------------------------------------------------------- the corpora

def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="session")
def reference_rows() -> list[dict]:
    return _rows(REFERENCE_CORPUS)


@pytest.fixture(scope="session")
def golden_rows() -> list[dict]:
    return _rows(GOLDEN_CORPUS)


# ---------------------------------------------------------------- verifying rule transitions

def golden_program(row: dict):
    """A golden row with its stored constants and parameters (forward inputs stay random)."""
    import numpy as np

    from leir_egraph.leir import Program

    data = np.load(GOLDEN_DIR / "data" / row["data_file"])
    values = {name: data[name] for name in row["parameters"] + row["constants"]}
    return Program.parse(row["leir"], row["signature"], row["name"], values)


def golden_sample(rows: list[dict], sid: str, *, seed, usable, programs: int,
                  per_program: int) -> list[tuple]:
    """Seeded: up to ``programs`` golden rows passing ``usable`` (alternating float32/float64)
    where strategy ``sid`` applies, each as (program, up to ``per_program`` of its
    transitions)."""
    import random

    from leir_egraph.egraph import single_steps

    rng = random.Random(f"{seed}-{sid}")
    kept = [r for r in rows if usable(r)]
    by_dtype = {d: [r for r in kept if r["dtype"] == d] for d in ("float32", "float64")}
    for group in by_dtype.values():
        rng.shuffle(group)
    picked: list[tuple] = []
    order = [r for pair in zip(by_dtype["float32"], by_dtype["float64"]) for r in pair]
    for row in order:
        if len(picked) == programs:
            break
        before = golden_program(row)
        found = single_steps(before, sid)
        if found:
            picked.append((before, rng.sample(found, min(per_program, len(found)))))
    return picked


@pytest.fixture(scope="session")
def verifier():
    """One verification worker process per test process (per xdist worker)."""
    from leir_egraph.verify import Verifier

    with Verifier() as v:
        yield v


def assert_verified(verifier, before, after, what: str) -> None:
    """``after`` is Equal to ``before``, and Independent unless ``before`` itself is not."""
    r = verifier.verify(before, after, timing=False)
    assert r.equal, f"{what}: {before.text} -> {after.text}: {r.level}: {r.reason}"
    if r.before_independent is not False:
        assert r.independent, f"{what}: P/V/B claim broken: {after.text}: {r.reason}"


# ---------------------------------------------------------------- processes left behind

def marked_processes(marker: str) -> list[int]:
    """Live processes (zombies excluded) whose environment carries ``marker``: a subprocess
    started with it in its environment, and every process that subprocess started. Used to
    check that a command leaves no process behind, even one re-parented after its parent
    died."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if marker.encode() not in f.read():
                    continue
            with open(f"/proc/{entry}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                    found.append(int(entry))
        except OSError:
            continue
    return found
