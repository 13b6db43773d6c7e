"""The workload zoo: coverage, seeded determinism, sizes and dtypes, the composer -- and the
translator verified on every program type: each zoo kind, at small shapes, in float32 and
float64, lowers on llvm and equals PyTorch eager on the same module and inputs."""

from __future__ import annotations

import re
import time

import pytest
import torch

from leir_egraph.frontend import from_torch
from leir_egraph.frontend.oracle import check_kinds
from leir_egraph.leir import parse
from leir_egraph.leir.analysis import subscript_indices
from leir_egraph.workloads import compose, dims, families, instantiate, zoo

REQUIRED_FAMILIES = {"matmul", "activation", "norm", "pooling", "reduction", "scan", "conv",
                     "conv_transpose", "loss", "attention", "composition"}


def test_the_zoo_has_every_family_and_enough_program_types():
    names = zoo()
    assert len(names) >= 189
    assert len(set(names)) == len(names)
    assert REQUIRED_FAMILIES <= set(families())
    assert len(zoo(level=1)) >= 100 and len(zoo(level=2)) >= 100
    for name in ["Gemm_Swish_Divide_Clamp_Tanh_Clamp", "conv_transposed_3D__square_input__"
                 "square_kernel", "GQA_Gemm_GeLU_max", "MinGPTCausalAttention", "masked_cumsum",
                 "Matmul_for_upper_triangular_matrices", "ScaledDotProductAttention"]:
        assert name in names


def test_same_seed_same_program_different_seed_different_shapes():
    m1, x1, meta1 = instantiate("Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd_LogSumExp", 7)
    m2, x2, meta2 = instantiate("Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd_LogSumExp", 7)
    assert meta1 == meta2
    assert all(torch.equal(a, b) for a, b in zip(x1, x2))
    assert all(torch.equal(p, q) for p, q in zip(m1.state_dict().values(),
                                                 m2.state_dict().values()))
    assert from_torch(m1, x1).text == from_torch(m2, x2).text
    drawn = {tuple(sorted(dims("Standard_matrix_multiplication", s).items())) for s in range(8)}
    assert len(drawn) > 1


def test_torch_global_random_state_is_left_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    instantiate("Gemm_BatchNorm_Scaling_Softmax", 3)
    assert torch.equal(torch.rand(3), expected)


def test_half_precision_programs_translate():
    for name in zoo()[::7]:  # a spread sample across the families
        module, inputs, _ = instantiate(name, 0, dtype="f16")
        program = from_torch(module, inputs)
        specs = program.signature.inputs + program.signature.outputs
        assert {s.dtype for s in specs if s.dtype.startswith("float")} == {"float16"}, name
        assert "f16" in program.text and "f64" not in program.text, name


@pytest.mark.parametrize("dtype,torch_dtype", [("f16", torch.float16), ("f32", torch.float32),
                                               ("f64", torch.float64)])
def test_dtypes(dtype, torch_dtype):
    module, inputs, meta = instantiate("Matmul_Swish_Sum_GroupNorm", 1, dtype=dtype)
    assert inputs[0].dtype == torch_dtype and meta["dtype"] == str(torch_dtype)[6:]
    assert all(p.dtype == torch_dtype for p in module.parameters())
    code = {"f16": "f16", "f32": "f32", "f64": "f64"}[dtype]
    assert f"^{{{code},g}}" in from_torch(module, inputs).text


def test_batch_norm_kinds_run_in_train_mode():
    for name in zoo():
        module, _, meta = instantiate(name, 0) if "BatchNorm" in name else (None, None, None)
        if module is not None:
            assert meta["train"] and module.training, name


def test_paper_sizes_follow_the_paper_ranges():
    for name in zoo():
        paper = [v for s in range(3) for v in dims(name, s, "paper").values()
                 if isinstance(v, int)]
        assert max(paper) <= 16384, name
    assert max(dims("ReLU", 0, "paper").values()) == 16384


def _binding_problems(program) -> list[str]:
    """B loops must be tx, at most 1024 wide, on a loop that indexes every target of the nest
    (never a reduction axis), one per nest; a nest without spatial loops may bind B^{1}."""
    problems = []
    for n, nest in enumerate(program.leir.nests):
        bound = [loop for loop in nest.loops if loop.kind == "B"]
        if len(bound) > 1:
            problems.append(f"nest {n} binds {len(bound)} loops")
        for loop in bound:
            if loop.index != "tx" or loop.extent > 1024:
                problems.append(f"nest {n} binds {loop.index} with extent {loop.extent}")
            targets = [eq.target for eq in nest.equations]
            if not all(loop.index in subscript_indices(t) for t in targets) and \
                    not (loop.extent == 1 and len(nest.loops) == 1):
                problems.append(f"nest {n}: {loop.index} is a reduction axis")
    return problems


def test_every_kind_is_small_and_translates_in_the_reference_style():
    for name in zoo():
        module, inputs, _ = instantiate(name, 0)
        assert max(x.numel() for x in inputs) <= 20000, name
        program = from_torch(module, inputs)
        assert not _binding_problems(program), (name, _binding_problems(program))
        assert parse(program.text) == program.leir, name
        n_forward = sum(isinstance(x, torch.Tensor) for x in inputs)
        assert len(program.forward_inputs) == n_forward, name
        assert program.signature.input_names[:n_forward] == program.forward_inputs, name
        names = program.signature.names
        assert all(re.fullmatch(r"[ACDEFGHIJKMNOQRSWXYZ][acdefghijkmnoqrswxyz]*", n)
                   for n in names), (name, names)


def test_composer_builds_named_level2_programs_deterministically():
    seen = set()
    for seed in range(12):
        module, inputs, meta = compose(seed)
        again = compose(seed)[2]
        assert meta == again
        assert 2 <= len(meta["components"]) <= 5
        assert type(module).__name__ == "_".join(meta["components"]) == meta["kind"]
        program = from_torch(module, inputs)
        assert program.signature.outputs[0].shape == tuple(module(*inputs).shape)
        seen.add(meta["kind"])
    assert len(seen) >= 10
    assert len(compose(0, components=5)[2]["components"]) == 5


def test_every_zoo_program_equals_pytorch_in_f32_and_f64():
    """The translator's acceptance test: all kinds x {f32, f64} through TVM (llvm) against
    PyTorch eager, under the project's tolerance policy (rtol 1e-4 f32 / 1e-9 f64, NaN and inf
    positions equal, no all-zero float output), two worker processes."""
    start = time.perf_counter()
    records = check_kinds(zoo(), ("f32", "f64"), workers=2)
    failures = [f"{r.kind} [{r.dtype}] {r.status}: {r.detail[:300]}" for r in records
                if r.status != "equal"]
    assert not failures, "\n".join(failures)
    assert len(records) == 2 * len(zoo())
    print(f"\n{len(records)} programs equal to PyTorch in {time.perf_counter() - start:.0f}s")
