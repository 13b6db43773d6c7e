"""Shared fixtures: the corpora of ../shared/data (LEIR emitted by the paper authors' translator)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

DATA = Path(os.environ.get("LEIR_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
REFERENCE_CORPUS = DATA / "reference_corpus.jsonl"
GOLDEN_DIR = DATA / "golden"
GOLDEN_CORPUS = GOLDEN_DIR / "golden_corpus.jsonl"


def _rows(path: Path) -> list[dict]:
    if not path.exists():
        pytest.fail(f"test data missing: {path} (set LEIR_DATA to the shared data folder)")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="session")
def reference_rows() -> list[dict]:
    return _rows(REFERENCE_CORPUS)


@pytest.fixture(scope="session")
def golden_rows() -> list[dict]:
    return _rows(GOLDEN_CORPUS)
