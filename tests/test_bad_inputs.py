"""A catalogue of bad inputs for every command-line entry point (issues 9 and 37).

Each case runs one command on one bad input -- a file, an option value, a folder -- and must
give the documented exit status (README.md, "The leir command": 2 for bad input, 1 for a
`leir verify` that is not equivalent), exactly one line on stderr that names the file (with
line:col where a position applies) or the option, no traceback, and leave no process behind.

Most cases run the command in-process (``leir_egraph.cli.main`` / ``leir_egraph.sample.main``
return the exit status), so the suite needs neither TVM nor a worker; the few ``PROCESS``
cases run a real ``python -m ...`` process, where the entry point itself is the point. No case
here starts a worker process: bad input is refused before any work (``leir from-torch`` runs
the model file's code in its own child process, which it ends before it returns).

``test_catalogue_size`` pins the number of cases (the closing notes of the issues report it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import marked_processes
from leir_egraph import cli, sample

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "leir_egraph" / "examples"
SOFTMAX = (EXAMPLES / "softmax.leir").read_text()
SOFTMAX_SIG = json.loads((EXAMPLES / "softmax.sig.json").read_text())

SIG4 = {"inputs": [{"name": "A", "dtype": "float32", "shape": [4]}],
        "outputs": [{"name": "C", "dtype": "float32", "shape": [4]}]}
COPY4 = "B^{4}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx};];"


def _nested_nests(n: int) -> str:
    names = [f"{a}{b}{c}" for a in "acdfg" for b in "hijkm" for c in "nopqrsuw"]
    names = [w for w in names if w not in ("inf", "min")]
    loops = "".join(f"L^{{1}}_{{{names[i % len(names)]}{'a' * (i // len(names))}=0}}["
                    for i in range(n))
    return f"B^{{4}}_{{tx=0}}[{loops}C^{{f32,g}}_{{tx}}=A^{{f32,g}}_{{tx}};{'];' * n}];"


# A user's rule file, sound and checked (x*2 is x+x); the cases below break one thing in it.
USER_RULE = '''
id = "{id}"
category = "math"
description = "The strategy writes a product by two as a sum."
guards = ["pattern_match"]
P = 1
S = 0
cot = "'{{lhs}}' becomes '{{rhs}}'."

[[rules]]
name = "double-to-sum"
bindings = {{ x = "Expr" }}
egglog = """
(rewrite (Mul x (Num "2")) (Add x x))
"""

[[examples]]
before = "{before}"
signature = "A:f32[4] -> C:f32[4]"
after = "B^{{4}}_{{tx=0}}[C^{{f32,g}}_{{tx}}=A^{{f32,g}}_{{tx}}+A^{{f32,g}}_{{tx}};];"

[[counterexamples]]
before = "B^{{4}}_{{tx=0}}[C^{{f32,g}}_{{tx}}=A^{{f32,g}}_{{tx}}*3;];"
signature = "A:f32[4] -> C:f32[4]"
refused_by = "pattern_match"
'''

# A provider whose facts raise (line 8), for a rule that reads them.
RAISING_PROVIDER = '''from leir_egraph.egraph.vocabulary import Guard, GuardExtension, Relation

CHECKED_NEST = Relation("Checked", ("Nest",), "{0} is checked")


def checked_facts(loaded):
    nests = list(loaded.term_nests())
    yield CHECKED_NEST(nests[len(nests)][0])
    for term, _ in nests:
        yield CHECKED_NEST(term)


CHECKED = Guard("checked", "Every nest is checked.", "the nest is not checked",
                relations=(CHECKED_NEST,), facts=checked_facts)
GUARD_EXTENSIONS = (GuardExtension("checked", new_guard=CHECKED),)
'''

RAISING_RULE = '''id = "raising_fact"
category = "operator"
description = "A rule that reads a fact its provider fails to compute."
guards = ["checked"]
providers = ["raising_fact.py"]
P = 1
S = 0
cot = "'{lhs}' becomes '{rhs}'."

[[rules]]
name = "reverse-nothing"
bindings = { nest = "Nest" }
egglog = """
(rewrite (MkNest loops body) (MkNest loops (BNil)) :when ((= nest (MkNest loops body)) (Checked nest)))
"""

[[examples]]
before = "B^{4}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx};];"
signature = "A:f32[4] -> C:f32[4]"
after = "B^{4}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx};];"
'''

# An egglog rejection in the second variant of a [[rules]] entry ("Unbound function Mull").
VARIANT_RULE = '''id = "variant_rejected"
category = "math"
description = "Commute a sum or a product."
guards = ["pattern_match"]
P = 1
S = 0
cot = "'{lhs}' becomes '{rhs}'."

[[rules]]
bindings = { a = "Expr", b = "Expr" }
egglog = """
(rewrite ({lhs} a b) ({rhs} b a))
"""
variants = [{ name = "swap-add", lhs = "Add", rhs = "Add" },
            { name = "swap-mul", lhs = "Mul", rhs = "Mull" }]

[[examples]]
before = "B^{4}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx}+1;];"
signature = "A:f32[4] -> C:f32[4]"
after = "B^{4}_{tx=0}[C^{f32,g}_{tx}=1+A^{f32,g}_{tx};];"
'''

# (name, contents): the files of the catalogue, written once into a temporary folder.
TEXTS = {
    "good.leir": SOFTMAX,
    "good.sig.json": json.dumps(SOFTMAX_SIG),
    "bom.leir": "\ufeff" + SOFTMAX,
    "empty.leir": "",
    "garbage.leir": "hello world",
    "unclosed.leir": "B^{4}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx};",
    "neg_extent.leir": "B^{-4}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx};];",
    "zero_extent.leir": "B^{0}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx};];",
    "start.leir": "B^{4}_{tx=1}[C^{f32,g}_{tx}=A^{f32,g}_{tx};];",
    "reserved.leir": "B^{4}_{tx=0}[Load^{f32,g}_{tx}=A^{f32,g}_{tx};];",
    "dtype.leir": "B^{4}_{tx=0}[C^{f33,g}_{tx}=A^{f32,g}_{tx};];",
    "nbsp.leir": "B^{4}_{tx=0}[C^{f32,g}_{tx}=\u00a0A^{f32,g}_{tx};];",
    "unbound.leir": "B^{4}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{a};];",
    "undefined.leir": "B^{4}_{tx=0}[C^{f32,g}_{tx}=Q^{f32,g}_{tx};];",
    "oob.leir": "B^{4}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx+1};];",
    "rank.leir": "B^{4}_{tx=0}[C^{f32,g}_{tx,0}=A^{f32,g}_{tx};];",
    "partial.leir": "B^{2}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx};];",
    "copy4.leir": COPY4,
    "sig4.sig.json": json.dumps(SIG4),
    "wide.leir": "B^{2048}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx}*2;];",
    "wide.sig.json": json.dumps({"inputs": [{"name": "A", "dtype": "float32", "shape": [2048]}],
                                 "outputs": [{"name": "C", "dtype": "float32",
                                              "shape": [2048]}]}),
    # issue 9 item 4 at ten times the sizes that crashed: 3,500 terms, 30,000 exp(, 20,000 nests
    "sum3500.leir": "B^{4}_{tx=0}[C^{f32,g}_{tx}=" + "+".join(["A^{f32,g}_{tx}"] * 3500) + ";];",
    "exp30000.leir": "B^{4}_{tx=0}[C^{f32,g}_{tx}=" + "exp(" * 30000 + "A^{f32,g}_{tx}"
                     + ")" * 30000 + ";];",
    "nests20000.leir": _nested_nests(20000),
    "nests10000.leir": "".join(f"B^{{4}}_{{tx=0}}[C^{{f32,g}}_{{tx}}=A^{{f32,g}}_{{tx}}+{i};];"
                               for i in range(10000)),
    # signatures
    "notjson.sig.json": "{inputs: [}",
    "list.sig.json": "[1, 2]",
    "negshape.sig.json": json.dumps({**SIG4, "inputs": [{"name": "A", "dtype": "float32",
                                                         "shape": [4, -2]}]}),
    "zeroshape.sig.json": json.dumps({**SIG4, "inputs": [{"name": "A", "dtype": "float32",
                                                          "shape": [0]}]}),
    "fracshape.sig.json": json.dumps({**SIG4, "inputs": [{"name": "A", "dtype": "float32",
                                                          "shape": [4.5]}]}),
    "bigout.sig.json": json.dumps({**SIG4, "outputs": [{"name": "C", "dtype": "float32",
                                                        "shape": [8]}]}),
    "nokey.sig.json": json.dumps({**SIG4, "inputs": [{"name": "A", "dtype": "float32"}]}),
    "baddtype.sig.json": json.dumps({**SIG4, "inputs": [{"name": "A", "dtype": "float31",
                                                         "shape": [4]}]}),
    "dup.sig.json": json.dumps({"inputs": SIG4["inputs"], "outputs": SIG4["inputs"]}),
    "noout.sig.json": json.dumps({"inputs": SIG4["inputs"], "outputs": []}),
    "badname.sig.json": json.dumps({**SIG4, "inputs": [{"name": "a", "dtype": "float32",
                                                        "shape": [4]}]}),
    # rule files
    "rules_bad/math/unknown_constructor.toml": '''
id = "unknown_constructor"
category = "math"
description = "A rule that names an egglog constructor the schema does not have."
guards = []
P = 1
S = 1
cot = "'{lhs}' becomes '{rhs}'."

[[rules]]
name = "exp-to-nothing"
egglog = """
(rewrite (Exp e) (NoSuchConstructor e))
"""
''',
    "rules_toml/math/broken.toml": 'id = "broken"\ncategory = [\n',
    # rule files `leir rules check` refuses (issue 35 item 4): each a one-line error at the entry
    "rules_oob/math/oob_example.toml": USER_RULE.format(
        id="oob_example", before="B^{4}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx+1}*2;];"),
    "rules_badce/math/bad_counterexample.toml": USER_RULE.format(
        id="bad_counterexample", before=COPY4).replace(
        'before = "B^{4}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx}*3;];"',
        'before = "B^{4}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx}*3;"'),
    "rules_dup/operator/loop_split.toml": USER_RULE.format(id="loop_split", before=COPY4).replace(
        'category = "math"', 'category = "operator"'),
    "rules_twice_a/math/twice.toml": USER_RULE.format(id="twice", before=COPY4),
    "rules_twice_b/math/twice.toml": USER_RULE.format(id="twice", before=COPY4),
    "rules_noex/math/no_examples.toml": USER_RULE.format(id="no_examples", before=COPY4).split(
        "[[examples]]")[0],
    "rules_raises/operator/raising_fact.toml": RAISING_RULE,
    "rules_raises/operator/raising_fact.py": RAISING_PROVIDER,
    "rules_syntax/operator/raising_fact.toml": RAISING_RULE,
    "rules_syntax/operator/raising_fact.py": "from leir_egraph.egraph.vocabulary import Guard\n\n"
                                             "def facts(loaded) -> \n    return []\n",
    "rules_variant/math/variant_rejected.toml": VARIANT_RULE,
    "rules_undeclared/operator/raising_fact.toml": RAISING_RULE,
    "rules_undeclared/operator/raising_fact.py": RAISING_PROVIDER.replace(
        "yield CHECKED_NEST(nests[len(nests)][0])",
        'yield Relation("Chekced", ("Nest",), "{0} is checked")(nests[0][0])'),
    # providers that never finish (issue 35 item 4: bounded by LEIR_PROVIDER_TIMEOUT, the case's env)
    "rules_hang_import/operator/raising_fact.toml": RAISING_RULE,
    "rules_hang_import/operator/raising_fact.py": "while True:\n    pass\n",
    "rules_hang_facts/operator/raising_fact.toml": RAISING_RULE,
    "rules_hang_facts/operator/raising_fact.py": RAISING_PROVIDER.replace(
        "    nests = list(loaded.term_nests())\n", "    while True: pass\n"),
    # PyTorch files
    "script.py": "import sys\nsys.exit(3)\n",
    "notmodule.py": "class Model:\n    pass\n\ndef get_inputs():\n    return []\n",
    "raises.py": "raise RuntimeError('no GPU here')\n",
    "syntax.py": "def (:\n",
    "fft.py": '''
import torch

class Model(torch.nn.Module):
    def forward(self, x):
        return torch.fft.fft(x).real

def get_inputs():
    return [torch.randn(4, 8)]
''',
    "model.txt": "not python",
    # sampler inputs
    "corpus_bad.jsonl": '{"leir": "x", "signature": {}}\n{not json\n',
    "nosig/prog.leir": COPY4,
    "foreign_out/notes.txt": "a user's own file",
    "inside_out/programs/copy4.leir": COPY4,
    "inside_out/programs/copy4.sig.json": json.dumps(SIG4),
    "plain_file": "not a folder",
    # issue 37: answer files of leir eval and of --proposer replay
    "cases2.jsonl": "".join(json.dumps({"leir": COPY4, "signature": SIG4, "name": f"copy{i}"})
                            + "\n" for i in range(2)),
    "answers_list.jsonl": "[1, 2]\n",
    "answers_string.jsonl": '"just a string"\n',
    "answers_null.jsonl": '{"answer": "x"}\nnull\n',
    "answers_deep.jsonl": "[" * 200000 + "]" * 200000 + "\n",
    "answers_three.jsonl": '{"answer": "a"}\n{"answer": "b"}\n{"answer": "c"}\n',
    "answers_case_beyond.jsonl": '{"case": 0, "answer": "a"}\n{"case": 5, "answer": "b"}\n',
    "answers_case_twice.jsonl": '{"case": 1, "answer": "a"}\n{"case": 1, "answer": "b"}\n',
    "answers_case_some.jsonl": '{"case": 1, "answer": "a"}\n{"answer": "b"}\n',
    "answers_case_negative.jsonl": '{"case": -1, "answer": "a"}\n',
    "answers_case_gap.jsonl": '{"case": 1, "answer": "a"}\n',
    "answers_current_number.jsonl": '{"current": 5, "answer": "x"}\n',
    # issue 37: from-torch user code that exits, prints or never ends
    "exit_in_forward.py": """
import sys
import torch

class Model(torch.nn.Module):
    def forward(self, x):
        sys.exit(0)

def get_inputs():
    return [torch.randn(4, 8)]
""",
    "os_exit_in_forward.py": """
import os
import torch

class Model(torch.nn.Module):
    def forward(self, x):
        os._exit(0)

def get_inputs():
    return [torch.randn(4, 8)]
""",
    "loops_at_import.py": "while True:\n    pass\n",
    "prints.py": """
import os
import torch
print("a print at import")

class Model(torch.nn.Module):
    def forward(self, x):
        print("a print in forward")
        os.write(1, b"a write to file descriptor 1\\n")
        return torch.relu(x)

def get_inputs():
    return [torch.randn(4, 8)]
""",
    # issue 37: output folders of an earlier run that cannot be resumed as they are
    "corrupt_run/.leir-manifest.json": json.dumps({"written_by": "python -m leir_egraph.sample",
                                                   "files": ["run.json"]}),
    "corrupt_run/run.json": '{"format": 1, "config": {',
    "tampered_run/.leir-manifest.json": json.dumps({
        "written_by": "python -m leir_egraph.sample", "files": ["run.json"],
        "sha256": {"run.json": "0" * 64}}),
    "tampered_run/run.json": "{}\n",
    "bad_manifest/.leir-manifest.json": "{",
    "bad_manifest/run.json": "{}\n",
}
BINARY = {"nonutf.leir": b"\xff\xfe B^{4}", "nonutf.jsonl": b'{"leir": "\xff"}\n',
          "answers_nonutf.jsonl": b'{"answer": "ok"}\n{"answer": "\xff"}\n',
          "answers_too_long.jsonl": b'{"answer": "' + b"x" * (8 << 20) + b'"}\n'}


@pytest.fixture(scope="module")
def d(tmp_path_factory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("bad-inputs")
    for name, text in TEXTS.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    for name, data in BINARY.items():
        (root / name).write_bytes(data)
    (root / "folder.leir").mkdir()
    # issue 37: a folder another run holds (this process holds its lock for the module)
    from leir_egraph.dataset.shards import FolderLock
    lock = FolderLock(root / "locked_out")
    lock.acquire()
    yield root
    lock.release()


LEIR, SAMPLE, PROCESS = "leir", "sample", "process"
CASES = [
    # (id, entry point, argv ({d} is the folder of the files above), exit status, stderr text)
    # ---- leir fmt: files that cannot be read
    ("fmt-missing", LEIR, "fmt {d}/missing.leir", 2, "{d}/missing.leir: no such file"),
    ("fmt-folder", LEIR, "fmt {d}/folder.leir", 2, "{d}/folder.leir: is a folder"),
    ("fmt-not-utf8", LEIR, "fmt {d}/nonutf.leir", 2, "{d}/nonutf.leir:1:1: not UTF-8 text"),
    ("fmt-bom-is-accepted", LEIR, "fmt {d}/bom.leir --sig {d}/good.sig.json", 0, None),
    # ---- leir fmt: text that does not parse (line:col)
    ("fmt-empty", LEIR, "fmt {d}/empty.leir", 2, "{d}/empty.leir:1:1: unexpected end of input"),
    ("fmt-garbage", LEIR, "fmt {d}/garbage.leir", 2, "{d}/garbage.leir:1:1: unexpected"),
    ("fmt-unclosed", LEIR, "fmt {d}/unclosed.leir", 2,
     "{d}/unclosed.leir:1:44: unexpected end of input"),
    ("fmt-negative-extent", LEIR, "fmt {d}/neg_extent.leir", 2,
     "{d}/neg_extent.leir:1:4: loop extent must be at least 1, got -4"),
    ("fmt-zero-extent", LEIR, "fmt {d}/zero_extent.leir", 2,
     "{d}/zero_extent.leir:1:4: loop extent must be at least 1, got 0"),
    ("fmt-loop-start", LEIR, "fmt {d}/start.leir", 2, "{d}/start.leir:1:11: loop start must be 0"),
    ("fmt-reserved-letter", LEIR, "fmt {d}/reserved.leir", 2,
     "{d}/reserved.leir:1:14: tensor name 'Load' starts with reserved letter 'L'"),
    ("fmt-unknown-dtype", LEIR, "fmt {d}/dtype.leir", 2, "{d}/dtype.leir:1:17: unknown dtype 'f33'"),
    ("fmt-invisible-character", LEIR, "fmt {d}/nbsp.leir", 2,
     "{d}/nbsp.leir:1:29: unexpected character U+00A0 (no-break space)"),
    # ---- leir fmt: programs past the depth limits (docs/LEIR.md, Limits), 10x the crash sizes
    ("fmt-sum-of-3500-terms", LEIR, "fmt {d}/sum3500.leir", 2,
     "{d}/sum3500.leir:1:14: expression nested more than 1000 levels deep"),
    ("fmt-30000-nested-exp", LEIR, "fmt {d}/exp30000.leir", 2,
     "{d}/exp30000.leir:1:14: expression nested more than 1000 levels deep"),
    ("fmt-20000-nested-nests", LEIR, "fmt {d}/nests20000.leir", 2,
     "{d}/nests20000.leir:1:1400: loop nests nested more than 100 deep"),
    # ---- leir fmt --sig: programs that do not validate, signatures that are wrong
    ("fmt-unbound-index", LEIR, "fmt {d}/unbound.leir --sig {d}/sig4.sig.json", 2,
     "{d}/unbound.leir:1:40: index 'a' is not bound"),
    ("fmt-undefined-tensor", LEIR, "fmt {d}/undefined.leir --sig {d}/sig4.sig.json", 2,
     "{d}/undefined.leir:1:29: tensor 'Q' is neither in the signature nor written"),
    ("fmt-static-out-of-bounds", LEIR, "fmt {d}/oob.leir --sig {d}/sig4.sig.json", 2,
     "{d}/oob.leir:1:29: 'A^{{f32,g}}_{{tx+1}}' reads index 1..4"),
    ("fmt-rank-mismatch", LEIR, "fmt {d}/rank.leir --sig {d}/sig4.sig.json", 2,
     "{d}/rank.leir:1:14: 'C^{{f32,g}}_{{tx,0}}' uses 2 subscript(s)"),
    ("fmt-output-partly-written", LEIR, "fmt {d}/partial.leir --sig {d}/sig4.sig.json", 2,
     "{d}/partial.leir:1:14: output 'C' has shape [4] but the program writes only "
     "positions 0..1"),
    ("fmt-output-larger-than-written", LEIR, "fmt {d}/copy4.leir --sig {d}/bigout.sig.json", 2,
     "output 'C' has shape [8] but the program writes only positions 0..3"),
    ("fmt-sig-missing", LEIR, "fmt {d}/copy4.leir --sig {d}/missing.sig.json", 2,
     "{d}/missing.sig.json: no such file"),
    ("fmt-sig-not-json", LEIR, "fmt {d}/copy4.leir --sig {d}/notjson.sig.json", 2,
     "{d}/notjson.sig.json:1:2: not JSON"),
    ("fmt-sig-not-an-object", LEIR, "fmt {d}/copy4.leir --sig {d}/list.sig.json", 2,
     "{d}/list.sig.json: bad signature: a signature is an object"),
    ("fmt-sig-negative-shape", LEIR, "fmt {d}/copy4.leir --sig {d}/negshape.sig.json", 2,
     "{d}/negshape.sig.json: bad signature: tensor 'A': shape [4, -2]: size -2 of dimension 1 "
     "must be at least 1"),
    ("fmt-sig-zero-shape", LEIR, "fmt {d}/copy4.leir --sig {d}/zeroshape.sig.json", 2,
     "tensor 'A': shape [0]: size 0 of dimension 0 must be at least 1"),
    ("fmt-sig-fractional-shape", LEIR, "fmt {d}/copy4.leir --sig {d}/fracshape.sig.json", 2,
     "tensor 'A': shape [4.5]: size 4.5 of dimension 0 is not an integer"),
    ("fmt-sig-missing-key", LEIR, "fmt {d}/copy4.leir --sig {d}/nokey.sig.json", 2,
     "lacks the key 'shape'"),
    ("fmt-sig-unknown-dtype", LEIR, "fmt {d}/copy4.leir --sig {d}/baddtype.sig.json", 2,
     "tensor 'A': unsupported dtype 'float31'"),
    ("fmt-sig-duplicate", LEIR, "fmt {d}/copy4.leir --sig {d}/dup.sig.json", 2,
     "signature lists A more than once"),
    ("fmt-sig-no-outputs", LEIR, "fmt {d}/copy4.leir --sig {d}/noout.sig.json", 2,
     "signature has no outputs"),
    ("fmt-sig-bad-name", LEIR, "fmt {d}/copy4.leir --sig {d}/badname.sig.json", 2,
     "tensor name 'a' is not a LEIR tensor name"),
    # ---- leir (no or unknown command)
    ("leir-no-command", LEIR, "", 2, "leir: error: a command is required"),
    ("leir-unknown-command", LEIR, "frobnicate", 2, "leir: error: argument COMMAND: invalid"),
    # ---- leir lower
    ("lower-no-sig-option", LEIR, "lower {d}/copy4.leir", 2,
     "leir lower: error: the following arguments are required: --sig"),
    ("lower-invalid-cuda-kernel", LEIR, "lower {d}/wide.leir --sig {d}/wide.sig.json "
                                        "--target cuda", 2,
     "{d}/wide.leir: error: CudaInvalid"),
    ("lower-missing", LEIR, "lower {d}/missing.leir --sig {d}/sig4.sig.json", 2,
     "{d}/missing.leir: no such file"),
    ("lower-not-utf8", LEIR, "lower {d}/nonutf.leir --sig {d}/sig4.sig.json", 2,
     "{d}/nonutf.leir:1:1: not UTF-8 text (byte 0xff)"),
    ("lower-bad-target", LEIR, "lower {d}/copy4.leir --sig {d}/sig4.sig.json --target metal", 2,
     "argument --target: invalid choice"),
    # ---- leir verify: bad files and options (refused before any worker starts)
    ("verify-before-missing", LEIR, "verify {d}/missing.leir {d}/copy4.leir --sig "
                                    "{d}/sig4.sig.json", 2, "{d}/missing.leir: no such file"),
    ("verify-after-missing", LEIR, "verify {d}/copy4.leir {d}/missing.leir --sig "
                                   "{d}/sig4.sig.json", 2, "{d}/missing.leir: no such file"),
    ("verify-after-not-utf8", LEIR, "verify {d}/copy4.leir {d}/nonutf.leir --sig "
                                    "{d}/sig4.sig.json", 2, "{d}/nonutf.leir:1:1: not UTF-8"),
    ("verify-bad-signature", LEIR, "verify {d}/copy4.leir {d}/copy4.leir --sig "
                                   "{d}/negshape.sig.json", 2, "{d}/negshape.sig.json: bad "
                                                               "signature"),
    ("verify-timeout-negative", LEIR, "verify {d}/copy4.leir {d}/copy4.leir --sig "
                                      "{d}/sig4.sig.json --timeout -1", 2,
     "argument --timeout: expected a number of seconds > 0, got -1"),
    ("verify-timeout-nan", LEIR, "verify {d}/copy4.leir {d}/copy4.leir --sig {d}/sig4.sig.json "
                                 "--timeout nan", 2,
     "argument --timeout: expected a finite number of seconds > 0, got 'nan'"),
    ("verify-timeout-zero", LEIR, "verify {d}/copy4.leir {d}/copy4.leir --sig "
                                  "{d}/sig4.sig.json --timeout 0", 2,
     "argument --timeout: expected a number of seconds > 0"),
    ("verify-seed-negative", LEIR, "verify {d}/copy4.leir {d}/copy4.leir --sig "
                                   "{d}/sig4.sig.json --seed -1", 2,
     "argument --seed: expected an integer >= 0, got -1"),
    ("verify-trials-zero", LEIR, "verify {d}/copy4.leir {d}/copy4.leir --sig {d}/sig4.sig.json "
                                 "--trials 0", 2, "argument --trials: expected an integer >= 1"),
    # ---- leir steps
    ("steps-rules-unknown-constructor", LEIR,
     "steps {d}/copy4.leir --sig {d}/sig4.sig.json --rules {d}/rules_bad --strategy "
     "unknown_constructor", 2,
     "{d}/rules_bad/math/unknown_constructor.toml:12: egglog rejects the rules of "
     "'unknown_constructor': rule 'exp-to-nothing': Unbound function NoSuchConstructor"),
    ("steps-rules-bad-toml", LEIR, "steps {d}/copy4.leir --sig {d}/sig4.sig.json --rules "
                                   "{d}/rules_toml", 2, "{d}/rules_toml/math/broken.toml:"),
    ("steps-rules-missing-folder", LEIR, "steps {d}/copy4.leir --sig {d}/sig4.sig.json --rules "
                                         "{d}/no_rules", 2, "{d}/no_rules:1: rules directory "
                                                            "does not exist"),
    ("steps-folder", LEIR, "steps {d}/folder.leir --sig {d}/sig4.sig.json", 2,
     "{d}/folder.leir: is a folder, not a file"),
    ("steps-negative-extent", LEIR, "steps {d}/neg_extent.leir --sig {d}/sig4.sig.json", 2,
     "{d}/neg_extent.leir:1:4: loop extent must be at least 1, got -4"),
    ("steps-max-nodes-zero", LEIR, "steps {d}/copy4.leir --sig {d}/sig4.sig.json --max-nodes 0",
     2, "argument --max-nodes: expected an integer >= 1, got 0"),
    ("steps-timeout-zero", LEIR, "steps {d}/copy4.leir --sig {d}/sig4.sig.json --timeout 0", 2,
     "argument --timeout: expected a number of seconds > 0"),
    ("steps-unknown-strategy", LEIR, "steps {d}/copy4.leir --sig {d}/sig4.sig.json --strategy "
                                     "loop_warp", 2, "--strategy: unknown strategy 'loop_warp'"),
    ("steps-limit-zero", LEIR, "steps {d}/copy4.leir --sig {d}/sig4.sig.json --limit 0", 2,
     "argument --limit: expected an integer >= 1, got 0"),
    ("steps-limit-not-a-number", LEIR, "steps {d}/copy4.leir --sig {d}/sig4.sig.json --limit x",
     2, "argument --limit: expected an integer >= 1, got 'x'"),
    ("steps-program-over-budget", LEIR, "steps {d}/nests10000.leir --sig {d}/sig4.sig.json", 2,
     "{d}/nests10000.leir: the program has 90,001 AST nodes; enumerating its rewrites is "
     "limited to 5,000"),
    ("steps-invalid-program", LEIR, "steps {d}/undefined.leir --sig {d}/sig4.sig.json", 2,
     "{d}/undefined.leir:1:29: tensor 'Q'"),
    # ---- leir rules check: what would break later (issue 35 item 4)
    ("rules-check-example-out-of-range", LEIR, "rules check {d}/rules_oob", 2,
     "{d}/rules_oob/math/oob_example.toml:17: [[examples]] entry 0: before or signature: 1:29: "
     "'A^{{f32,g}}_{{tx+1}}' reads index 1..4"),
    ("rules-check-counterexample-unparsable", LEIR, "rules check {d}/rules_badce", 2,
     "{d}/rules_badce/math/bad_counterexample.toml:22: [[counterexamples]] entry 0: before or "
     "signature: 1:"),
    ("rules-check-duplicate-builtin-id", LEIR, "rules check {d}/rules_dup", 2,
     "{d}/rules_dup/operator/loop_split.toml:2: duplicate strategy id 'loop_split' (also "
     "defined in "),
    ("rules-check-duplicate-id-across-folders", LEIR,
     "rules check {d}/rules_twice_a {d}/rules_twice_b", 2,
     "{d}/rules_twice_b/math/twice.toml:2: duplicate strategy id 'twice' (also defined in "
     "{d}/rules_twice_a/math/twice.toml)"),
    ("rules-check-no-examples", LEIR, "rules check {d}/rules_noex", 2,
     "{d}/rules_noex/math/no_examples.toml:2: 'no_examples' has no [[examples]] entry"),
    ("rules-check-provider-raises", LEIR, "rules check {d}/rules_raises", 2,
     "{d}/rules_raises/operator/raising_fact.py:8: the provider raised IndexError while "
     "computing facts: list index out of range (strategy 'raising_fact'"),
    ("rules-check-provider-syntax-error", LEIR, "rules check {d}/rules_syntax", 2,
     "{d}/rules_syntax/operator/raising_fact.py:3: the provider failed to load: SyntaxError"),
    ("rules-check-egglog-rejects-a-variant", LEIR, "rules check {d}/rules_variant", 2,
     "{d}/rules_variant/math/variant_rejected.toml:15: egglog rejects the rules of "
     "'variant_rejected': rule 'swap-mul', a variant of its [[rules]] entry: Unbound function "
     "Mull"),
    ("rules-check-provider-undeclared-relation", LEIR, "rules check {d}/rules_undeclared", 2,
     "{d}/rules_undeclared/operator/raising_fact.py:8: relation 'Chekced' is not declared by "
     "the guard or parameter set whose facts this provider makes"),
    ("steps-provider-raises", LEIR, "steps {d}/copy4.leir --sig {d}/sig4.sig.json --rules "
                                    "{d}/rules_raises --strategy raising_fact", 2,
     "{d}/rules_raises/operator/raising_fact.py:8: the provider raised IndexError while "
     "computing facts"),
    ("rules-check-provider-hangs-at-import", LEIR, "rules check {d}/rules_hang_import", 2,
     "{d}/rules_hang_import/operator/raising_fact.py:1: importing the provider did not "
     "finish within 2 s (LEIR_PROVIDER_TIMEOUT)", {"LEIR_PROVIDER_TIMEOUT": "2"}),
    ("rules-check-provider-hangs-in-facts", LEIR, "rules check {d}/rules_hang_facts", 2,
     "{d}/rules_hang_facts/operator/raising_fact.py:7: computing the provider's facts did not "
     "finish within 2 s (LEIR_PROVIDER_TIMEOUT)", {"LEIR_PROVIDER_TIMEOUT": "2"}),
    ("steps-provider-hangs-in-facts", LEIR, "steps {d}/copy4.leir --sig {d}/sig4.sig.json "
                                            "--rules {d}/rules_hang_facts --strategy raising_fact",
     2, "{d}/rules_hang_facts/operator/raising_fact.py:7: computing the provider's facts did not "
     "finish within 2 s (LEIR_PROVIDER_TIMEOUT)", {"LEIR_PROVIDER_TIMEOUT": "2"}),
    ("explore-unknown-strategy", LEIR, "explore {d}/copy4.leir --sig {d}/sig4.sig.json --depth 1 "
                                       "--strategies loop_warp", 2,
     "--strategies: unknown strategy 'loop_warp' (a strategy of your own: load its directory "
     "first"),
    ("search-unknown-strategy", LEIR, "search {d}/copy4.leir --sig {d}/sig4.sig.json "
                                      "--strategies loop_warp", 2,
     "--strategies: unknown strategy 'loop_warp'"),
    # ---- leir strategies
    ("strategies-bad-toml", LEIR, "strategies --rules {d}/rules_toml", 2,
     "{d}/rules_toml/math/broken.toml:"),
    ("strategies-missing-folder", LEIR, "strategies --rules {d}/no_rules", 2,
     "{d}/no_rules:1: rules directory does not exist"),
    # ---- leir from-torch
    ("from-torch-missing", LEIR, "from-torch {d}/missing.py", 2, "{d}/missing.py: no such file"),
    ("from-torch-not-python", LEIR, "from-torch {d}/model.txt", 2,
     "{d}/model.txt: not a Python file"),
    ("from-torch-sys-exit", LEIR, "from-torch {d}/script.py", 2,
     "{d}/script.py: importing it called sys.exit(3)"),
    ("from-torch-import-raises", LEIR, "from-torch {d}/raises.py", 2,
     "{d}/raises.py: importing it failed: RuntimeError: no GPU here"),
    ("from-torch-syntax-error", LEIR, "from-torch {d}/syntax.py", 2,
     "{d}/syntax.py: importing it failed: SyntaxError"),
    ("from-torch-not-a-module", LEIR, "from-torch {d}/notmodule.py", 2,
     "{d}/notmodule.py: 'Model' is not a torch.nn.Module subclass"),
    ("from-torch-no-class", LEIR, "from-torch {d}/fft.py:Net", 2,
     "{d}/fft.py: defines no class 'Net'"),
    ("from-torch-unsupported-op", LEIR, "from-torch {d}/fft.py", 2,
     "{d}/fft.py: unsupported op torch.fft_fft"),
    ("from-torch-bad-shapes", LEIR, "from-torch {d}/fft.py --input-shapes '[[4, -8]]'", 2,
     "--input-shapes: expected a list of shapes of sizes >= 1"),
    ("from-torch-bad-init-args", LEIR, "from-torch {d}/fft.py --init-args 7", 2,
     "--init-args: expected a JSON list or object"),
    # ---- the sampler
    ("sample-seed-negative", SAMPLE, "--seed -1", 2, "argument --seed: expected an integer >= 0"),
    ("sample-verify-timeout-zero", SAMPLE, "--verify-timeout 0", 2,
     "argument --verify-timeout: expected a number of seconds > 0"),
    ("sample-program-timeout-nan", SAMPLE, "--program-timeout nan", 2,
     "argument --program-timeout: expected a finite number of seconds > 0, got 'nan'"),
    ("sample-medium-cap-negative", SAMPLE, "--medium-cap -1", 2,
     "argument --medium-cap: expected an integer >= 0, got -1"),
    ("sample-workers-zero", SAMPLE, "--workers 0", 2, "argument --workers: expected an integer >= 1"),
    ("sample-count-zero", SAMPLE, "--count 0", 2, "argument --count: expected an integer >= 1"),
    ("sample-multi-answers-one", SAMPLE, "--multi-max-answers 1", 2,
     "argument --multi-max-answers: expected an integer >= 2, got 1"),
    ("sample-unknown-selector", SAMPLE, "--programs NoSuchKind --out {d}/o1", 2,
     "'NoSuchKind' matches no zoo kind"),
    ("sample-missing-file", SAMPLE, "--programs {d}/missing.leir --out {d}/o2", 2,
     "{d}/missing.leir: no such file"),
    ("sample-leir-without-signature", SAMPLE, "--programs {d}/nosig/prog.leir --out {d}/o3", 2,
     "{d}/nosig/prog.leir: the signature file prog.sig.json is missing next to it"),
    ("sample-corpus-bad-line", SAMPLE, "--programs {d}/corpus_bad.jsonl --out {d}/o4", 2,
     "{d}/corpus_bad.jsonl:2: not JSON"),
    ("sample-corpus-not-utf8", SAMPLE, "--programs {d}/nonutf.jsonl --out {d}/o8", 2,
     "{d}/nonutf.jsonl:1:11: not UTF-8 text (byte 0xff)"),
    ("sample-unknown-strategy", SAMPLE, "--programs ReLU --strategies loop_warp --out {d}/o5", 2,
     "unknown strategy or category 'loop_warp'"),
    ("sample-bad-rules", SAMPLE, "--programs ReLU --rules {d}/rules_toml --out {d}/o6", 2,
     "{d}/rules_toml/math/broken.toml:"),
    ("sample-foreign-out-folder", SAMPLE, "--programs ReLU --out {d}/foreign_out", 2,
     "--out {d}/foreign_out: the folder is not empty and was not written by this tool"),
    ("sample-input-inside-out", SAMPLE,
     "--programs {d}/inside_out/programs --out {d}/inside_out --overwrite", 2,
     "input {d}/inside_out/programs/copy4.leir lies in --out {d}/inside_out where this run "
     "writes or removes files"),
    ("sample-resume-without-run", SAMPLE, "--programs ReLU --out {d}/o7 --resume", 2,
     "--resume: {d}/o7 holds no run of this tool"),
    ("sample-out-is-a-file", SAMPLE, "--programs ReLU --out {d}/plain_file", 2,
     "--out {d}/plain_file: exists and is not a folder"),
    # ---- issue 37: answer files (leir eval), one bounded path with file:line errors
    ("eval-answers-line-is-a-list", LEIR, "eval {d}/cases2.jsonl --answers "
     "{d}/answers_list.jsonl", 2, "{d}/answers_list.jsonl:1: expected a JSON object, got a list"),
    ("eval-answers-line-is-a-string", LEIR, "eval {d}/cases2.jsonl --answers "
     "{d}/answers_string.jsonl", 2, "{d}/answers_string.jsonl:1: expected a JSON object, got a "
     "string"),
    ("eval-answers-line-is-null", LEIR, "eval {d}/cases2.jsonl --answers {d}/answers_null.jsonl",
     2, "{d}/answers_null.jsonl:2: expected a JSON object, got null"),
    ("eval-answers-not-utf8", LEIR, "eval {d}/cases2.jsonl --answers {d}/answers_nonutf.jsonl",
     2, "{d}/answers_nonutf.jsonl:2:13: not UTF-8 text (byte 0xff)"),
    ("eval-answers-200000-deep-json", LEIR, "eval {d}/cases2.jsonl --answers "
     "{d}/answers_deep.jsonl", 2, "{d}/answers_deep.jsonl:1: JSON nested more than"),
    ("eval-answers-line-too-long", LEIR, "eval {d}/cases2.jsonl --answers "
     "{d}/answers_too_long.jsonl", 2, "{d}/answers_too_long.jsonl:1: line longer than"),
    ("eval-answers-missing", LEIR, "eval {d}/cases2.jsonl --answers {d}/missing.jsonl", 2,
     "{d}/missing.jsonl: no such file"),
    ("eval-answers-folder", LEIR, "eval {d}/cases2.jsonl --answers {d}/folder.leir", 2,
     "{d}/folder.leir: is a folder, not a file"),
    ("eval-answers-extra-lines", LEIR, "eval {d}/cases2.jsonl --answers "
     "{d}/answers_three.jsonl", 2, "{d}/answers_three.jsonl: 3 answer lines for 2 cases; line 3"),
    ("eval-answers-case-beyond", LEIR, "eval {d}/cases2.jsonl --answers "
     "{d}/answers_case_beyond.jsonl", 2, "{d}/answers_case_beyond.jsonl:2: case 5 does not exist"),
    ("eval-answers-case-twice", LEIR, "eval {d}/cases2.jsonl --answers "
     "{d}/answers_case_twice.jsonl", 2, "{d}/answers_case_twice.jsonl:2: a second answer line "
     "for case 1"),
    ("eval-answers-case-on-some-lines", LEIR, "eval {d}/cases2.jsonl --answers "
     "{d}/answers_case_some.jsonl", 2, "{d}/answers_case_some.jsonl:2: no 'case' number"),
    ("eval-answers-case-negative", LEIR, "eval {d}/cases2.jsonl --answers "
     "{d}/answers_case_negative.jsonl", 2, "{d}/answers_case_negative.jsonl:1: 'case' must be a "
     "case number >= 0, got -1"),
    ("eval-answers-case-without-line", LEIR, "eval {d}/cases2.jsonl --answers "
     "{d}/answers_case_gap.jsonl", 2, "{d}/answers_case_gap.jsonl: no answer line for case 0"),
    ("eval-cases-not-utf8", LEIR, "eval {d}/nonutf.jsonl --answers {d}/answers_three.jsonl", 2,
     "{d}/nonutf.jsonl:1:11: not UTF-8 text (byte 0xff)"),
    ("eval-cases-line-is-a-list", LEIR, "eval {d}/answers_list.jsonl --answers "
     "{d}/answers_three.jsonl", 2, "{d}/answers_list.jsonl:1: expected a JSON object, got a "
     "list"),
    ("eval-llm-deadline-zero", LEIR, "eval {d}/cases2.jsonl --base-url http://127.0.0.1:9/v1 "
     "--model m --llm-deadline 0", 2, "argument --llm-deadline: expected a number of seconds > 0"),
    ("eval-llm-max-bytes-zero", LEIR, "eval {d}/cases2.jsonl --base-url http://127.0.0.1:9/v1 "
     "--model m --llm-max-bytes 0", 2, "argument --llm-max-bytes: expected an integer >= 1"),
    # ---- issue 37: leir search (answers, recordings, request bounds)
    ("search-llm-deadline-negative", LEIR, "search {d}/copy4.leir --sig {d}/sig4.sig.json "
     "--proposer llm --base-url http://127.0.0.1:9/v1 --model m --llm-deadline -1", 2,
     "argument --llm-deadline: expected a number of seconds > 0"),
    ("search-llm-max-bytes-not-a-number", LEIR, "search {d}/copy4.leir --sig {d}/sig4.sig.json "
     "--proposer llm --base-url http://127.0.0.1:9/v1 --model m --llm-max-bytes lots", 2,
     "argument --llm-max-bytes: expected an integer >= 1"),
    ("search-record-is-a-folder", LEIR, "search {d}/copy4.leir --sig {d}/sig4.sig.json "
     "--proposer llm --base-url http://127.0.0.1:9/v1 --model m --record {d}/folder.leir", 2,
     "leir search: {d}/folder.leir: is a folder, not a file"),
    ("search-record-in-missing-folder", LEIR, "search {d}/copy4.leir --sig {d}/sig4.sig.json "
     "--proposer llm --base-url http://127.0.0.1:9/v1 --model m --record {d}/nodir/rec.jsonl", 2,
     "leir search: {d}/nodir/rec.jsonl: No such file or directory"),
    ("search-replay-line-is-a-list", LEIR, "search {d}/copy4.leir --sig {d}/sig4.sig.json "
     "--proposer replay --answers {d}/answers_list.jsonl", 2,
     "{d}/answers_list.jsonl:1: expected a JSON object, got a list"),
    ("search-replay-not-utf8", LEIR, "search {d}/copy4.leir --sig {d}/sig4.sig.json "
     "--proposer replay --answers {d}/answers_nonutf.jsonl", 2,
     "{d}/answers_nonutf.jsonl:2:13: not UTF-8 text"),
    ("search-replay-200000-deep-json", LEIR, "search {d}/copy4.leir --sig {d}/sig4.sig.json "
     "--proposer replay --answers {d}/answers_deep.jsonl", 2,
     "{d}/answers_deep.jsonl:1: JSON nested more than"),
    ("search-replay-current-not-a-string", LEIR, "search {d}/copy4.leir --sig "
     "{d}/sig4.sig.json --proposer replay --answers {d}/answers_current_number.jsonl", 2,
     "{d}/answers_current_number.jsonl:1: 'current' must be a string"),
    # ---- issue 37: from-torch runs the model file's code isolated and bounded
    ("from-torch-sys-exit-in-forward", LEIR, "from-torch {d}/exit_in_forward.py", 2,
     "{d}/exit_in_forward.py: tracing Model called sys.exit(0)"),
    ("from-torch-os-exit-in-forward", LEIR, "from-torch {d}/os_exit_in_forward.py", 2,
     "{d}/os_exit_in_forward.py: the model's code ended the process (exit status 0)"),
    ("from-torch-loops-at-import", LEIR, "from-torch {d}/loops_at_import.py --timeout 3", 2,
     "{d}/loops_at_import.py: the model's code did not finish within 3 s (--timeout)"),
    ("from-torch-timeout-zero", LEIR, "from-torch {d}/prints.py --timeout 0", 2,
     "argument --timeout: expected a number of seconds > 0"),
    ("from-torch-prints-stay-off-stdout", LEIR, "from-torch {d}/prints.py --sig-out "
     "{d}/prints.sig.json", 0, None),
    # ---- issue 37: the output folder: one writer, damaged files of a run refused or redone
    ("sample-out-held-by-another-run", SAMPLE, "--programs ReLU --out {d}/locked_out", 2,
     f"--out {{d}}/locked_out: another run is writing there (pid {os.getpid()}, started "),
    ("sample-resume-corrupt-run-json", SAMPLE, "--programs ReLU --out {d}/corrupt_run --resume",
     2, "--resume: {d}/corrupt_run/run.json is damaged"),
    ("sample-resume-run-json-checksum", SAMPLE, "--programs ReLU --out {d}/tampered_run "
     "--resume", 2, "--resume: {d}/tampered_run/run.json is damaged"),
    ("sample-unreadable-manifest", SAMPLE, "--programs ReLU --out {d}/bad_manifest", 2,
     "{d}/bad_manifest/.leir-manifest.json: unreadable manifest"),
    # ---- real processes: the entry points themselves
    ("process-leir-cli", PROCESS, "-m leir_egraph.cli fmt {d}/neg_extent.leir", 2,
     "{d}/neg_extent.leir:1:4: loop extent must be at least 1, got -4"),
    ("process-leir-package", PROCESS, "-m leir_egraph steps {d}/missing.leir --sig "
                                      "{d}/sig4.sig.json", 2, "{d}/missing.leir: no such file"),
    ("process-sample", PROCESS, "-m leir_egraph.sample --programs ReLU --out {d}/foreign_out", 2,
     "the folder is not empty and was not written by this tool"),
]


def _argv(template: str, d: Path) -> list[str]:
    import shlex
    return shlex.split(template.format(d=d))


def _children() -> set[int]:
    """Processes whose parent is this test process."""
    me, found = os.getpid(), set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == me and fields[0] != "Z":
                found.add(int(entry))
    return found


def run_case(kind: str, argv: list[str], capsys) -> tuple[int, str, str]:
    if kind == PROCESS:
        marker = f"LEIR_BAD_INPUT_CASE={uuid.uuid4()}"
        env = {**os.environ, "PYTHONPATH": str(ROOT), marker.split("=")[0]: marker.split("=")[1]}
        done = subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=300)
        assert not marked_processes(marker), "a process of the command outlived it"
        return done.returncode, done.stdout, done.stderr
    before = _children()
    code = (cli.main if kind == LEIR else sample.main)(argv)
    out, err = capsys.readouterr()
    assert _children() <= before, "the command left a child process"
    return code, out, err


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input(case, d, capsys, monkeypatch):
    _, kind, template, status, expected = case[:5]
    for name, value in (case[5] if len(case) > 5 else {}).items():   # the case's environment
        monkeypatch.setenv(name, value)
    code, out, err = run_case(kind, _argv(template, d), capsys)
    assert "Traceback" not in err and "Traceback" not in out
    assert code == status, (code, err)
    if expected is None:
        assert err == "" and out
        return
    lines = err.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got:\n{err}"
    assert expected.format(d=d) in lines[0], lines[0]


def test_catalogue_size():
    """The number of bad-input cases: 94 of issue 9, 15 of issue 35 (rule files), 35 of issue 37."""
    assert len(CASES) == 144
    assert len({c[0] for c in CASES}) == len(CASES)
