"""Held-out splits, the leakage check and the paper's four ablation variants, on one real run
of the sampler (three tiny zoo kinds, two dtypes, two shape draws each, a few strategies).

Each kind lands in another split with seed 0 (Sum_reduction_over_a_dimension: train,
Argmin_over_a_dimension: test, ReLU: held out as one of the paper's multi-step workloads);
a LEIR file that is a renamed, reshaped and retyped copy of a test program under another name
(which hashes into train) must make the run refuse to write its chat sets.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leir_egraph.dataset import DatasetConfig, Execution, build_dataset
from leir_egraph.dataset.splits import (SplitLeakError, assign, check_leaks, equal_kinds,
                                        kind_splits, shape_free_form, split_of)
from leir_egraph.dataset.variants import PAPER
from leir_egraph.leir.canonical import canonical_text
from leir_egraph.leir.program import Program

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("Sum_reduction_over_a_dimension", "Argmin_over_a_dimension", "ReLU")
STRATEGIES = ("loop_split", "loop_reorder", "expand_cancellation", "additive_split")


def config(**changes) -> DatasetConfig:
    base = dict(programs=KINDS, count=2, dtypes=("f32", "f64"), strategies=STRATEGIES,
                per_strategy_cap=1, cuda_source=False, split=(0.8, 0.1, 0.1), variants="paper",
                seed=0)
    return DatasetConfig(**{**base, **changes})


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("splits") / "out"
    # one pool worker: beside the two test workers of a CI run (about 7 GB each by then) a
    # second pool worker took the 24 GB machine past its memory (the kernel killed a test worker)
    build_dataset(config(), Execution(out=out, workers=1, quiet=True))
    return out


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# ---------------------------------------------------------------- assignment

@settings(max_examples=30, deadline=None)
@given(st.lists(st.text("abcdefgXYZ_", min_size=1, max_size=12), min_size=1, max_size=20,
                unique=True),
       st.lists(st.text("abcdefgXYZ_", min_size=1, max_size=12), max_size=20),
       st.integers(0, 10**6))
def test_a_kinds_split_does_not_move_when_the_zoo_grows(names, more, seed):
    fractions = (0.6, 0.2, 0.2)
    before = assign(names, seed, fractions, hold_steptp=False)
    after = assign(names + more, seed, fractions, hold_steptp=False)
    assert all(after[n] == before[n] for n in names)
    assert set(before.values()) <= {"train", "validation", "test"}


def test_fractions_are_followed_over_the_zoo_and_steptp_kinds_are_held_out():
    from leir_egraph.workloads import zoo
    from leir_egraph.workloads.steptp import load, mapping
    held = {m.kind for m in map(mapping, load()) if hasattr(m, "kind")}
    kinds = zoo()
    split = assign(kinds, 7, (0.5, 0.25, 0.25))
    assert {k for k, s in split.items() if s == "steptp"} == held & set(kinds)
    drawn = [s for k, s in split.items() if k not in held]
    for name, share in (("train", 0.5), ("validation", 0.25), ("test", 0.25)):
        assert abs(drawn.count(name) / len(drawn) - share) < 0.1, (name, drawn.count(name))
    free = assign(kinds, 7, (0.5, 0.25, 0.25), hold_steptp=False)
    assert "steptp" not in free.values()
    assert split_of("ReLU", 0, (1.0, 0.0, 0.0), hold_steptp=False) == "train"


# ---------------------------------------------------------------- the leakage check

SIG = {"inputs": [{"name": "A", "dtype": "float32", "shape": [4, 8]}],
       "outputs": [{"name": "E", "dtype": "float32", "shape": [4]}]}
ORIGINAL = ("B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx}=D^{f32,g}_{tx}+exp(A^{f32,g}_{tx,a}*0.5);];"
            "B^{4}_{tx=0}[E^{f32,g}_{tx}=log(D^{f32,g}_{tx});];")


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 64), st.integers(1, 64), st.sampled_from(["f16", "f32", "f64"]),
       st.sampled_from(["Q", "R", "Z"]), st.sampled_from(["c", "q", "w"]))
def test_renamed_reshaped_retyped_copies_have_one_shape_free_form(m, n, dtype, tmp, index):
    copy = (f"B^{{{m}}}_{{tx=0}}L^{{{n}}}_{{{index}=0}}[{tmp}^{{{dtype},g}}_{{tx}}="
            f"{tmp}^{{{dtype},g}}_{{tx}}+exp(X^{{{dtype},g}}_{{tx,{index}}}*2.0);];"
            f"B^{{{m}}}_{{tx=0}}[Y^{{{dtype},g}}_{{tx}}=log({tmp}^{{{dtype},g}}_{{tx}});];")
    assert shape_free_form(copy) == shape_free_form(ORIGINAL)


def test_different_programs_keep_different_forms():
    other = ORIGINAL.replace("log(", "sqrt(")
    reordered = ORIGINAL.replace("L^{8}_{a=0}", "L^{8}_{a=0}B^{1}_{ty=0}")
    forms = {shape_free_form(p) for p in (ORIGINAL, other, reordered)}
    assert len(forms) == 3


def test_check_leaks_refuses_a_form_in_two_splits():
    programs = [{"program_id": "a-1", "program": "KindA", "leir": ORIGINAL},
                {"program_id": "b-1", "program": "KindB",
                 "leir": ORIGINAL.replace("{4}", "{9}").replace("D^", "W^")}]
    assert check_leaks(programs, {"KindA": "test", "KindB": "test"}) == {"test": 1}
    with pytest.raises(SplitLeakError, match=r"b-1 \(train\) is a-1 \(test\)"):
        check_leaks(programs, {"KindA": "test", "KindB": "train"})


def test_merging_equal_kinds_keeps_them_in_one_split_and_held_out_with_a_workload():
    reshaped = ORIGINAL.replace("{4}", "{9}").replace("D^", "W^")
    other = ORIGINAL.replace("log(", "sqrt(")
    programs = [{"program_id": "b", "program": "KindB", "leir": reshaped},
                {"program_id": "a", "program": "KindA", "leir": ORIGINAL},
                {"program_id": "c", "program": "KindC", "leir": other},
                {"program_id": "c2", "program": "KindC", "leir": reshaped}]   # links C to A, B
    assert equal_kinds(programs) == [["KindA", "KindB", "KindC"]]
    fractions = (0.4, 0.3, 0.3)
    seed = next(s for s in range(100)   # a seed where the three kinds differ by name
                if len(set(assign(["KindA", "KindB", "KindC"], s, fractions).values())) > 1)
    with pytest.raises(SplitLeakError):
        check_leaks(programs, kind_splits(programs, seed, fractions))
    merged = kind_splits(programs, seed, fractions, merge=True)
    assert set(merged.values()) == {split_of("KindA", seed, fractions)}
    assert check_leaks(programs, merged)
    # a group holding a multi-step workload's kind is held out as a whole
    relu = [dict(p, program="ReLU" if p["program"] == "KindC" else p["program"])
            for p in programs]
    assert set(kind_splits(relu, seed, fractions, merge=True).values()) == {"steptp"}


# ---------------------------------------------------------------- one real run

def test_splits_are_disjoint_by_kind_and_by_form_and_cover_dtypes_and_shapes(out):
    splits = json.loads((out / "splits.json").read_text())
    assert splits["kinds"] == {"Argmin_over_a_dimension": "test", "ReLU": "steptp",
                               "Sum_reduction_over_a_dimension": "train"}
    cases = {s: jsonl(out / "cases" / f"{s}.jsonl") for s in ("train", "test", "steptp")}
    assert not (out / "cases" / "validation.jsonl").exists()
    forms, keys = {}, {}
    for split, rows in cases.items():
        assert {r["name"] for r in rows} == {k for k, s in splits["kinds"].items() if s == split}
        assert len(rows) == 4   # 2 dtypes x 2 shape draws
        assert sorted(r["dtypes"] for r in rows) == ["float32", "float32", "float64", "float64"]
        assert len({json.dumps(r["signature"]["inputs"][0]["shape"]) for r in rows}) >= 2 or \
            split == "steptp"
        forms[split] = {shape_free_form(r["leir"]) for r in rows}
        keys[split] = {canonical_text(Program.parse(r["leir"], r["signature"])) for r in rows}
    assert [r["integer_tensors"] for r in cases["test"]] == ["int64"] * 4   # argmin's indices
    for a in cases:
        for b in cases:
            if a < b:
                assert not forms[a] & forms[b] and not keys[a] & keys[b]
    # the training chat set holds only training programs
    meta = jsonl(out / "chat" / "full" / "train" / "single.meta.jsonl")
    assert meta and {m["program_id"].split("-small")[0] for m in meta} == \
        {"Sum_reduction_over_a_dimension"}
    assert {m["split"] for m in meta} == {"train"} and {m["variant"] for m in meta} == {"full"}
    summary = json.loads((out / "summary.json").read_text())
    assert {(r["split"], r["dtypes"]) for r in summary["splits"]} == \
        {(s, d) for s in cases for d in ("float32", "float64")}


def test_a_leaked_copy_is_refused(out, tmp_path):
    argmin = jsonl(out / "cases" / "test.jsonl")[0]
    text = argmin["leir"]
    sig = argmin["signature"]
    # rename the intermediate and the loop index, change every extent: a different "kind"
    for old, new in (("D^", "Q^"), ("_{a=0}", "_{w=0}"), (",a,", ",w,"), ("{a,", "{w,")):
        text = text.replace(old, new)
    text = re.sub(r"\^\{(\d+)\}", lambda m: "^{" + str(int(m.group(1)) + 1) + "}", text)
    for t in sig["inputs"] + sig["outputs"]:
        t["shape"] = [d + 1 for d in t["shape"]]
    (tmp_path / "LeakedCopy.leir").write_text(text)
    (tmp_path / "LeakedCopy.sig.json").write_text(json.dumps(sig))
    assert split_of("LeakedCopy", 0) == "train"
    cfg = config(programs=("Argmin_over_a_dimension", str(tmp_path / "LeakedCopy.leir")),
                 count=1, dtypes=("f32",), variants=None, strategies=("loop_reorder",))
    with pytest.raises(SplitLeakError, match="LeakedCopy.*Argmin_over_a_dimension"):
        build_dataset(cfg, Execution(out=tmp_path / "o1", workers=1, quiet=True))
    # refused before any work: the output folder was never touched
    assert not (tmp_path / "o1").exists()
    # the command line: one line, exit status 2
    got = subprocess.run([sys.executable, "-m", "leir_egraph.sample", "--programs",
                          "Argmin_over_a_dimension", str(tmp_path / "LeakedCopy.leir"),
                          "--strategies", "loop_reorder", "--per-strategy-cap", "1",
                          "--no-cuda-source", "--split", "--quiet", "--workers", "1",
                          "--out", str(tmp_path / "o2")],
                         capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert got.returncode == 2, got.stderr
    assert len(got.stderr.strip().splitlines()) == 1 and "split leak" in got.stderr
    # merged, the copy is one unit with the kind it copies: held out with it
    merged = DatasetConfig(**{**cfg.to_dict(), "merge_equal_kinds": True})
    build_dataset(merged, Execution(out=tmp_path / "o3", workers=1, quiet=True))
    splits = json.loads((tmp_path / "o3" / "splits.json").read_text())
    assert splits["kinds"] == {"Argmin_over_a_dimension": "test", "LeakedCopy": "test"}
    assert splits["merged"] == [["Argmin_over_a_dimension", "LeakedCopy"]]


# ---------------------------------------------------------------- the four variants

def test_paper_variants_hold_the_same_transitions_and_differ_only_as_named(out, tmp_path):
    import datasets
    import polars as pl

    records = {r["id"]: r for r in
               pl.read_parquet(out / "dictionary" / "*.parquet").filter(pl.col("verified"))
               .to_dicts()}
    assert any(r["difficulty"] == "easy" for r in records.values())
    sets = {}
    for variant in PAPER:
        for split in ("train", "test", "steptp"):
            for kind in ("single", "multi"):
                path = out / "chat" / variant.name / split / f"{kind}.jsonl"
                ds = datasets.load_dataset("json", data_files=str(path), split="train",
                                           cache_dir=str(tmp_path / "hf"))
                meta = jsonl(path.with_suffix(".meta.jsonl"))
                assert ds.column_names == ["messages"] and len(ds) == len(meta)
                sets[variant.name, split, kind] = (list(ds), meta)
    for split in ("train", "test", "steptp"):
        ids = {v.name: [m["ids"] for m in sets[v.name, split, "single"][1]] for v in PAPER}
        # filtered variants: the very same transitions, single- and multi-answer
        assert ids["tir-nocot"] == ids["leir-nocot"] == ids["full"]
        multi = {v.name: [m["ids"] for m in sets[v.name, split, "multi"][1]] for v in PAPER}
        assert multi["tir-nocot"] == multi["leir-nocot"] == multi["full"]
        # without filtering: every verified transition of the split
        in_split = sorted(i for i, r in records.items() if _split(out, r) == split)
        assert sorted(i for (i,) in ids["leir-nofilter"]) == in_split
        for n, row in enumerate(sets["full", split, "single"][0]):
            record = records[sets["full", split, "single"][1][n]["ids"][0]]
            tir = sets["tir-nocot", split, "single"][0][n]["messages"]
            leir = sets["leir-nocot", split, "single"][0][n]["messages"]
            full = row["messages"]
            # CoT: the only difference between leir-nocot and full
            assert leir[0] == full[0]
            assert full[1]["content"] == f"<think>{record['cot']}</think>" + leir[1]["content"]
            # representation: the only difference between tir-nocot and leir-nocot
            assert tir[0]["content"] == leir[0]["content"].replace(record["before_leir"],
                                                                   record["before_tir"])
            answer = json.loads(re.fullmatch(r"<answer>(.*)</answer>", tir[1]["content"],
                                             re.S).group(1))
            assert answer == {"transformed_IR": record["after_tir"],
                              "applied_strategy": record["strategy"]}
    for split in ("train", "test", "steptp"):   # the test cases load too
        cases = datasets.load_dataset("json", data_files=str(out / "cases" / f"{split}.jsonl"),
                                      split="train", cache_dir=str(tmp_path / "hf"))
        assert len(cases) == 4 and set(cases["split"]) == {split}
    # filtering: easy strategies are dropped from the filtered multi-answer sets only
    classes = [c for _, m in [sets["full", s, "multi"] for s in ("train", "test", "steptp")]
               for e in m for c in e["classes"]]
    assert "easy" not in classes


def _split(out: Path, record: dict) -> str:
    kinds = json.loads((out / "splits.json").read_text())["kinds"]
    return kinds[record["program"]]


# ---------------------------------------------------------------- evaluation per split

def test_eval_reports_per_split_and_variant_with_pass_at_k_on_test(out, tmp_path):
    import polars as pl

    from leir_egraph.evaluate.scoring import evaluate, load_cases

    records = pl.read_parquet(out / "dictionary" / "*.parquet").filter(pl.col("verified"))
    test = load_cases(out / "cases" / "test.jsonl")
    # two training chat lines, with their provenance beside them
    chat = out / "chat" / "full" / "train"
    for suffix in (".jsonl", ".meta.jsonl"):
        lines = (chat / f"single{suffix}").read_text().splitlines()[:2]
        (tmp_path / f"single{suffix}").write_text("\n".join(lines) + "\n")
    train = load_cases(tmp_path / "single.jsonl", start=len(test))
    answers = []
    for case in test:   # one Equal answer (a verified step of the case) and one that is not
        row = records.filter(pl.col("before_leir") == case.program.text).row(0, named=True)
        good = json.dumps({"transformed_IR": row["after_leir"],
                           "applied_strategy": row["strategy"]})
        answers.append([f"<answer>{good}</answer>", "<answer>not json</answer>"])
    for case in train:
        answers.append(["<answer>not json</answer>", "<answer>not json</answer>"])
    report = evaluate(test + train, answers, attribution=False)
    assert set(report.groups) == {"split=test", "split=train variant=full"}
    on_test = report.groups["split=test"]
    assert on_test.cases == 4 and on_test.pass_at == {1: 0.5, 2: 1.0}
    assert report.groups["split=train variant=full"].pass_at == {1: 0.0, 2: 0.0}
    assert "split=test" in report.table() and report.to_dict()["groups"]["split=test"]["cases"] == 4


def test_eval_scores_tir_answers_against_the_leir_original(out, tmp_path, capsys):
    """The TIR variant's test set is scored for real: a TIR answer is parsed by TVM, compiled
    and compared with the LEIR original of the record its meta line names. The dataset's own
    answer is Equal; the same TIR with min turned into max is not; text that is not TVMScript
    is refused in one line. Reported per split and variant, beside the LEIR variant."""
    from leir_egraph import cli
    chats = [out / "chat" / v / "test" / "single.jsonl" for v in ("tir-nocot", "leir-nocot")]
    rows = {path: jsonl(path) for path in chats}
    lines = []
    for path in chats:
        for row in rows[path]:
            right = row["messages"][1]["content"]
            if "tir" in str(path):
                assert "@T.prim_func" in right
                wrong = right.replace("T.min(", "T.max(")
                assert wrong != right
                garbage = right.replace("@T.prim_func", "@T.prim_func\\ndef broken(:")
                lines.append({"answers": [right, wrong, garbage]})
            else:
                lines.append({"answers": [right, right, right]})
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps(x) + "\n" for x in lines))
    code = cli.main(["eval", *map(str, chats), "--answers", str(answers), "--json",
                     "--trials", "2"])
    got, err = capsys.readouterr()
    assert code == 0, err
    report = json.loads(got)
    n_tir = len(rows[chats[0]])
    tir = report["scored"][:3 * n_tir]
    assert [s["level"] for s in tir[0::3]] == ["equal"] * n_tir
    assert all(s["level"] in ("build", "execute") and "equal: trial" in s["reason"]
               for s in tir[1::3])
    assert all(s["level"] == "none" and "not TVMScript TIR" in s["reason"]
               and "\n" not in s["reason"] for s in tir[2::3])
    groups = report["groups"]
    assert set(groups) == {"split=test variant=tir-nocot", "split=test variant=leir-nocot"}
    assert groups["split=test variant=tir-nocot"]["rates"]["equal"] == pytest.approx(1 / 3)
    assert groups["split=test variant=tir-nocot"]["pass_at"]["3"] == 1.0
    assert groups["split=test variant=leir-nocot"]["rates"]["equal"] == 1.0
    assert report["attribution"]["tir"] == n_tir
