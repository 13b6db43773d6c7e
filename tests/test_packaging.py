"""The built wheel is the product: it carries every built-in strategy (rule files, preludes,
providers of rules/), every module of the source tree and the package data, and finds its
strategies and the paper's workload list without a source tree."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "leir_egraph"
RULES = ROOT / "rules"
DATA_SUFFIXES = {".py", ".lark", ".egg", ".toml", ".jsonl", ".json", ".leir"}


def _source_files(root: Path, prefix: str) -> set[str]:
    return {f"{prefix}/{p.relative_to(root).as_posix()}" for p in root.rglob("*")
            if p.is_file() and p.suffix in DATA_SUFFIXES and "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel built from a copy of the source files (setuptools builds in the source folder,
    where a stale build/ would add files the tree no longer has)."""
    src, out = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("wheel")
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for part in ("leir_egraph", "rules"):
        shutil.copytree(ROOT / part, src / part, ignore=skip)
    for part in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / part, src / part)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--quiet", "--wheel-dir", str(out), str(src)],
                   check=True, cwd=out, capture_output=True, timeout=300)
    (built,) = out.glob("leir_egraph-*.whl")
    return built


def test_wheel_carries_every_strategy_and_module(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    rule_files = _source_files(RULES, "leir_egraph/rules")
    assert sum(n.endswith(".toml") for n in rule_files) == 46
    assert not rule_files - names, f"rule files missing from the wheel: {rule_files - names}"
    modules = _source_files(PACKAGE, "leir_egraph")
    assert "leir_egraph/workloads/steptp_test_workloads.jsonl" in modules
    assert not modules - names, f"package files missing from the wheel: {modules - names}"


def test_unpacked_wheel_finds_its_strategies_without_a_source_tree(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    probe = ("import json\n"
             "from leir_egraph.egraph import load_strategies\n"
             "from leir_egraph.egraph.strategy import DEFAULT_RULES_DIR\n"
             "from leir_egraph.workloads import steptp\n"
             "print(json.dumps({'rules': str(DEFAULT_RULES_DIR), 'n': len(load_strategies()),\n"
             "                  'workloads': len(steptp.load()),\n"
             "                  'list': str(steptp.default_path())}))\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(site)}
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(found["rules"]) == site / "leir_egraph" / "rules"
    assert found["n"] == 46
    assert found["workloads"] == 100 and Path(found["list"]).is_relative_to(site)
