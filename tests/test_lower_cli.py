"""``leir lower``: TIR or CUDA source on stdout, one error line on stderr."""

from __future__ import annotations

from pathlib import Path


from leir_egraph.cli import main

EXAMPLES = Path(__file__).resolve().parents[1] / "leir_egraph" / "examples"
SOFTMAX, SIG = str(EXAMPLES / "softmax.leir"), str(EXAMPLES / "softmax.sig.json")


def test_lower_prints_tir(capsys):
    assert main(["lower", SOFTMAX, "--sig", SIG]) == 0
    out = capsys.readouterr().out
    assert "def main(A: T.Buffer((16, 256), \"float32\"), C: T.Buffer((16, 256), \"float32\"))" in out
    assert "T.exp" in out


def test_lower_prints_cuda(capsys):
    assert main(["lower", SOFTMAX, "--sig", SIG, "--target", "cuda"]) == 0
    assert "__global__" in capsys.readouterr().out


def test_invalid_kernel_is_one_error_line(tmp_path, capsys):
    leir = tmp_path / "wide.leir"
    leir.write_text("B^{2048}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx}*2;];")
    sig = tmp_path / "wide.sig.json"
    sig.write_text('{"inputs": [{"name": "A", "dtype": "float32", "shape": [2048]}],'
                   ' "outputs": [{"name": "C", "dtype": "float32", "shape": [2048]}]}')
    assert main(["lower", str(leir), "--sig", str(sig), "--target", "cuda"]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "CudaInvalid" in lines[0] and "2048 > 1024" in lines[0]
    assert "Traceback" not in captured.err


def test_help_shows_an_example(capsys):
    assert main(["lower", "--help"]) == 0
    assert "examples/softmax.leir --sig" in capsys.readouterr().out
