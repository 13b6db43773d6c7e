"""``leir verify``: levels, errors and times; JSON on request; exit status by level."""

from __future__ import annotations

import json
from pathlib import Path

from leir_egraph.cli import main

EXAMPLES = Path(__file__).resolve().parents[1] / "leir_egraph" / "examples"
SOFTMAX, SIG = str(EXAMPLES / "softmax.leir"), str(EXAMPLES / "softmax.sig.json")


def write_after(tmp_path, old: str, new: str) -> str:
    text = Path(SOFTMAX).read_text()
    assert old in text
    path = tmp_path / "after.leir"
    path.write_text(text.replace(old, new))
    return str(path)


def test_verify_prints_levels_and_errors(tmp_path, capsys):
    after = write_after(tmp_path, "/E^{f32,g}_{tx}", "*E^{f32,g}_{tx}")
    assert main(["verify", SOFTMAX, after, "--sig", SIG, "--no-timing"]) == 1
    out = capsys.readouterr().out
    assert "level: exec" in out and "reason: equal: trial 1" in out and "max abs error" in out


def test_verify_json(tmp_path, capsys):
    after = write_after(tmp_path, "B^{16}_{tx=0}L^{256}_{a=0}[E", "B^{16}_{tx=0}P^{256}_{a=0}[E")
    assert main(["verify", SOFTMAX, after, "--sig", SIG, "--json", "--trials", "2"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["level"] == "equal" and result["trials"] == 2
    assert result["time_before_ms"] > 0 and result["speedup"] > 0


def test_unusable_input_is_one_error_line(tmp_path, capsys):
    missing = str(tmp_path / "no.json")
    assert main(["verify", SOFTMAX, str(tmp_path / "missing.leir"), "--sig", missing]) == 2
    assert capsys.readouterr().err == f"{missing}: no such file\n"


def test_help_shows_an_example(capsys):
    assert main(["verify", "--help"]) == 0
    out = capsys.readouterr().out
    assert "leir verify leir_egraph/examples/softmax.leir after.leir --sig" in out
