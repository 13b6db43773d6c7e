"""``leir from-torch``: KernelBench files, explicit arguments, outputs, one-line errors."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

from leir_egraph.cli import main
from leir_egraph.leir import Program, Signature, check

KERNELBENCH = textwrap.dedent('''
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def __init__(self, in_features, out_features, negative_slope):
            super().__init__()
            self.gemm = nn.Linear(in_features, out_features)
            self.negative_slope = negative_slope

        def forward(self, x):
            x = self.gemm(x)
            return torch.nn.functional.leaky_relu(x * 2.0, self.negative_slope)

    batch_size = 4096
    in_features, out_features = 8192, 8

    def get_inputs():
        return [torch.rand(batch_size, in_features)]

    def get_init_inputs():
        return [in_features, out_features, 0.1]
    ''')

UNSUPPORTED = textwrap.dedent('''
    import torch
    import torch.nn as nn

    class Block(nn.Module):
        def forward(self, x):
            return torch.floor(x)

    class Net(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.block = nn.Sequential(nn.Linear(width, width), Block())

        def forward(self, x):
            return self.block(x)
    ''')


def run(capsys, *argv):
    code = main(["from-torch", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_kernelbench_file_needs_no_arguments(tmp_path, capsys):
    path = tmp_path / "12_Gemm_Multiply_LeakyReLU.py"
    path.write_text(KERNELBENCH)
    sig = tmp_path / "out.sig.json"
    values = tmp_path / "values.npz"
    code, out, err = run(capsys, str(path), "--sig-out", str(sig), "--values-out", str(values))
    assert code == 0, err
    signature = Signature.from_dict(json.loads(sig.read_text()))
    # the file's 4096 x 8192 input costs nothing: inputs are shapes only
    assert signature.inputs[0].shape == (4096, 8192)
    assert [s.shape for s in signature.inputs[1:]] == [(8, 8192), (8,)]
    program = Program.parse(out.strip(), signature)
    check(program)
    stored = np.load(values)
    assert sorted(stored.files) == sorted(s.name for s in signature.inputs[1:])


def test_explicit_class_arguments_shapes_and_dtype(tmp_path, capsys):
    path = tmp_path / "m.py"
    path.write_text(KERNELBENCH)
    code, out, err = run(capsys, f"{path}:Model", "--init-args",
                         '{"in_features": 4, "out_features": 6, "negative_slope": 0.2}',
                         "--input-shapes", "[[3, 4]]", "--dtype", "f64")
    assert code == 0, err
    assert out.startswith("B^{3}_{tx=0}L^{6}_{a=0}L^{4}_{c=0}") and "f64" in out
    assert err.startswith("signature: ")
    assert json.loads(err.removeprefix("signature: "))["outputs"][0]["shape"] == [3, 6]


def test_help_shows_an_example(capsys):
    assert main(["from-torch", "--help"]) == 0
    out = capsys.readouterr().out
    assert "leir from-torch model.py:Net" in out and "KernelBench" in out


@pytest.mark.parametrize("argv,message", [
    (["{path}:Net", "--init-args", "[4]", "--input-shapes", "[[2, 4]]"],
     "unsupported op torch.floor at fx node 'floor', module 'block.1'"),
    (["{path}:Nope"], "defines no class 'Nope'"),
    (["{path}:Net", "--init-args", "[4"], "--init-args: not valid JSON"),
    (["{path}:Net", "--init-args", "[4]"], "has no get_inputs(); pass --input-shapes"),
    (["{path}:Net", "--init-args", "[4]", "--input-shapes", "[[2, 5]]"],
     "on the example inputs failed"),
    (["/no/such/file.py"], "no such file"),
])
def test_errors_are_one_line(tmp_path, capsys, argv, message):
    path = tmp_path / "net.py"
    path.write_text(UNSUPPORTED)
    code, out, err = run(capsys, *[a.format(path=path) for a in argv])
    assert code == 2 and out == ""
    assert message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
