"""benchmarks/cuda_device_check.py, the half that runs here: a bundle exported from three small
golden programs and one single-step rewrite maps every kernel argument to a buffer of the
program, launches each nest's kernel with the extents of its B loops, and passes the run
half's dry mode (everything but the CuPy calls); a fourth, whose B loop's threads would race,
is listed as not exported with the reason. The GPU half itself needs a CUDA device and
never runs in the suite (its figures: benchmarks/results/cuda_device_check.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import GOLDEN_DIR

from leir_egraph.leir import Program
from leir_egraph.leir.analysis import nest_loops
from leir_egraph.leir.hardware import thread_tag

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import cuda_device_check as check  # noqa: E402

AXES = {"threadIdx.x": ("block", 0), "threadIdx.y": ("block", 1), "threadIdx.z": ("block", 2),
        "blockIdx.x": ("grid", 0), "blockIdx.y": ("grid", 1), "blockIdx.z": ("grid", 2)}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    out = tmp_path_factory.mktemp("bundle")
    # softmax (two global intermediates), Hingeloss (every thread adds into one scalar: refused
    # by cuda_source), Matmul3D, gold-0029 (a 0-d input); one step of the shortest of them
    assert check.main(["export", "--out", str(out), "--dir", str(GOLDEN_DIR),
                       "--ids", "gold-0000,gold-0002,gold-0003,gold-0029", "--steps", "1",
                       "--step-roots", "1", "--seed", "0"]) == 0
    with open(out / "programs.jsonl") as f:
        return out, [json.loads(line) for line in f]


def _launch_dims(nest) -> tuple[list[int], list[int]]:
    dims = {"grid": [1, 1, 1], "block": [1, 1, 1]}
    for loop in nest_loops(nest):
        if loop.kind == "B":
            which, axis = AXES[thread_tag(loop.index)]
            dims[which][axis] = loop.extent
    return dims["grid"], dims["block"]


def _is_subsequence(wanted: list, seen: list) -> bool:
    it = iter(seen)
    return all(any(w == s for s in it) for w in wanted)


@pytest.mark.slow   # TVM lowering, LLVM builds for the CPU verdicts, one rule match
def test_every_argument_is_a_buffer_and_launches_follow_the_b_loops(bundle):
    out, records = bundle
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["skipped"] == [{"id": "gold-0003", "reason": (
        "CudaInvalid: not a valid CUDA kernel: every iteration of B^{128}_{tx=0} writes the "
        "scalar H^{f32,g}: the GPU's threads would race")}]
    assert manifest["golden"] == 3 and manifest["steps"] == 1
    step = next(r for r in records if r["kind"] == "step")
    assert step["root"] in ("gold-0000", "gold-0002", "gold-0003", "gold-0029") and step["strategy"] in check.GPU_STRATEGIES
    for record in records:
        program = Program.parse(record["leir"], record["signature"])
        buffers = record["buffers"]
        sig = program.signature
        assert {n for n, b in buffers.items() if b["role"] != "intermediate"} == \
            set(sig.input_names) | set(sig.output_names)
        declared = check.source_declarations(record["source"])
        assert set(declared) == set(record["kernels"])
        for launch in record["launches"]:
            kernel = record["kernels"][launch["kernel"]]
            assert len(launch["args"]) == len(kernel["params"])
            for arg, param in zip(launch["args"], kernel["params"]):
                assert arg["buffer"] in buffers     # these programs pass no scalars
                assert buffers[arg["buffer"]]["dtype"] == param["dtype"]
        seen = [(launch["grid"], launch["block"]) for launch in record["launches"]]
        # each nest's kernel, in program order; the implicit initialisations' fill kernels
        # come between them
        assert _is_subsequence([_launch_dims(nest) for nest in program.leir.nests], seen)
        assert record["cpu"]["status"] == "equal"
    tiny = next(r for r in records if r["id"] == "gold-0029")
    assert any(b["shape"] == [] for b in tiny["buffers"].values())
    softmax = next(r for r in records if r["id"] == "gold-0002")
    assert {n for n, b in softmax["buffers"].items() if b["role"] == "intermediate"} == {"D", "E"}


@pytest.mark.slow
def test_the_dry_run_prepares_every_program(bundle, tmp_path):
    out, records = bundle
    result = tmp_path / "dry.jsonl"
    assert check.main(["run", "--bundle", str(out), "--out", str(result), "--dry"]) == 0
    lines = [json.loads(line) for line in result.read_text().splitlines()]
    assert [line["id"] for line in lines] == [r["id"] for r in records]
    assert all(line["status"] == "dry" for line in lines)
    softmax = next(r for r in records if r["id"] == "gold-0002")
    arrays, expected, launches = check.prepare(softmax, out)
    assert np.isnan(arrays["D"]).all() and np.isnan(arrays["C"]).all() and set(expected) == {"C"}
    assert [k for k, *_ in launches] == [f"main_kernel{s}" for s in ("", "_1", "_2", "_3", "_4")]
    arrays, _, _ = check.prepare(next(r for r in records if r["id"] == "gold-0029"), out)
    assert arrays["H"].shape == ()       # a 0-d input stays 0-d

