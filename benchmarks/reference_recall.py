"""Recall of the reference's direct transitions: which of the Step-TP reference's one-step
outputs our engine also produces, per strategy, and whether the ones we miss are sound.

    PYTHONHASHSEED=0 python benchmarks/reference_recall.py --reference-dir /tmp/steptp \
        [--programs golden|corpus] [--dtype float32] [--strategies a,b] [--sample 20] \
        [--seed 0] [--json report.json]

For every program (golden: the 201 tiny float32 programs with data; corpus: the reference
corpus' float32 programs, larger shapes) and every strategy both implementations have
(``reference_steptp.SHARED_STRATEGIES``), the reference's strategy is run once
(seeded, ``reference_steptp.ReferenceStrategies``). Its direct transitions are its own training
pairs ``(original, output)``: the original is the given program for most strategies, a 1- or
2-step compute_inline result of it for the sympy family, and the forward strategy's output for
the swapped ones (expand_powsimp, apart, loop_fusion, ...). Ours are every one-site application
(``single_steps``) from the same original and, for a pair from another original of a strategy
with an inverse, our undo steps that end at its output (``undo_steps``: a step of the inverse
strategy from the output, read backwards -- how the reference makes its swapped pairs). Both sides are put in the package's exact canonical
form (``leir_egraph.leir.canonical.exact_canonical_text``: the same program up to the names of
intermediates and loop indices and up to expressions equal bit for bit on every input), so a
reference transition counts as *shared* when some transition of ours from the same original
gives the same exact canonical text. A reference pair whose output equals its original in that
sense (a re-print: ``1-(A*C)`` -> ``-A*C+1``, ``1e-05`` -> ``1.0e-5``) is an *identity*, not a
transition we owe. A reference output we cannot parse is *unparseable* (it is not LEIR by
docs/LEIR.md: never a transition we owe).

Per strategy the report gives: reference outputs (distinct canonical programs), ours
(distinct transitions), shared, reference-only, recall
(shared / reference outputs), and, for a seeded sample of ``--sample`` reference-only outputs
per strategy, our verifier's verdict on each (TVM llvm, ``verify``):

* ``equal``       the outputs agree (and, where the original's P/V/B claims hold, the result's
                  hold too): a sound move we miss;
* ``not_equal``   it builds and runs but computes something else (or breaks P/V/B claims):
                  the reference's move is unsound there and we must not make it;
* ``invalid``     not valid LEIR, or it does not build or run;
* ``undecidable`` outputs agree but were zero/non-finite in every trial, timeouts, or the
                  original itself fails.

An output our verifier finds equal is then checked three more ways, beside its original:

* ``cuda_invalid``: lowered for CUDA by TVM (launch limits; shared and local memory do not
  outlive a kernel, docs/LEIR.md). If the original lowers and the output does not, it is counted
  ``invalid``: a CPU run finds a local tensor shared by two kernels equal only because scopes
  are plain allocations there.
* ``overflow``: run on inputs 100 times larger (``STRESS_SCALE``; the float inputs without a
  stored value, two seeded sets). An infinity or a NaN where the original's output is finite
  counts ``not_equal``: the reference's algebra is exact in real numbers but not in floating
  point there (``exp(A)/(exp(A)+1)`` for a sigmoid is inf/inf = NaN at A = 100, where
  ``1/(1+exp(-A))`` is 1).
* ``masked``: the same on inputs with a seeded quarter, then half, of their elements -inf (an
  attention mask): the reference's online softmax ``S*exp(M-max(M,x))+exp(x-max(M,x))`` is
  ``exp(-inf+inf)`` = NaN at a row whose first element is -inf, where the softmax is not. It
  decides where the overflow check does (our FLOAT-domain strategies, whose guards are stated
  for infinite inputs too).
* ``zeros``: the same on inputs with a seeded quarter of their elements exactly 0
  (``ZERO_SHARE``), then on inputs that are 0 everywhere: ``x/D*D`` is NaN where ``D`` is 0
  and ``x`` is not. A standard-normal draw is never exactly 0, and a sum of products of such
  draws (a matmul's output) is 0 only when its inputs are, so the verifier alone finds such a
  split equal.

The overflow check decides only for strategies whose soundness is stated on every float
input. The value splits (additive, multiplicative and exponential split: their rules read
``finite_operand`` facts) are stated on the FINITE domain of ``leir/ranges.py`` -- exact real
arithmetic on finite inputs -- and ``exp(a-m)*exp(m)`` overflows at inputs x100 as surely as
the reference's forms do; there an overflow is counted (``overflow_outside_domain``) and the
verdict stays. A division by a value that may be 0 is wrong in real arithmetic too, so the
zeros check decides everywhere.

``--sample-ours N`` judges a seeded sample of N of *our* transitions per strategy (from the
programs themselves) in exactly the same way: anything but equal or undecidable there is a
soundness defect of ours, listed in the report (``ours_defects``).

An output still equal after these checks is then offered to our strategy with one guard
removed at a time (``rulecheck.without_guard``): if one of our rules makes exactly that output
once guard G is gone, the move is one our guard G refuses (``refused_by`` in the sample,
``refused`` in the table) -- a decision stated in the rule file for every input the guard's
domain allows (e.g. defined_values refuses a new exponential of a tensor value, which overflows
for softmax logits above 89), where the verifier's checks try a few input sets.

The estimated *sound recall* is shared / (shared + reference-only x equal share of the sample),
with shared outputs counted sound (ours are verified by the rule-file tests and
``strategy_coverage.py``); the *owed recall* leaves out the estimated share our guards refuse
(``owed`` in the table; ``owed_recall`` in the JSON). With ``--sample 0`` nothing is verified and only plain recall is
given. The report is deterministic for a given seed, reference checkout and PYTHONHASHSEED
(the script re-executes itself with PYTHONHASHSEED=0, or ``--hash-seed N``, see
reference_steptp.py: the reference orders some outputs -- expression_splitting's new loops and
dimensions -- by Python's string hashing, so another hash seed is another set of its moves).

Enumeration is the slow part (the reference's outputs are parsed one top-level nest at a time,
cached); ``--sample 0 --show-missed 100000 --json R`` then ``--reverify R --sample N --json R2``
verifies the misses of an earlier report without enumerating again.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from reference_steptp import (SHARED_STRATEGIES, ReferenceStrategies,  # noqa: E402
                              require_fixed_hash_seed)

from leir_egraph.egraph import single_steps, undo_steps  # noqa: E402
from leir_egraph.egraph.steps import default_strategies  # noqa: E402
from leir_egraph.leir import Program, Signature  # noqa: E402
from leir_egraph.leir.ast import Leir  # noqa: E402
from leir_egraph.leir.parser import parse  # noqa: E402
from leir_egraph.leir.canonical import exact_canonical_text  # noqa: E402
from results_file import recorded  # noqa: E402

DATA = ROOT / "tests" / "data"
SOURCES = {"golden": DATA / "golden" / "golden_corpus.jsonl",
           "corpus": DATA / "reference_corpus.jsonl"}


def load_rows(which: str, dtype: str, limit: int | None) -> list[dict]:
    rows = [json.loads(l) for l in SOURCES[which].read_text().splitlines() if l.strip()]
    rows = [r for r in rows if r["dtype"] == dtype]
    return rows[:limit] if limit else rows


def known_names(row: dict) -> list[str]:
    sig = row["signature"]
    return [t["name"] for t in sig["inputs"]] + [t["name"] for t in sig["outputs"]]


_NESTS: dict[str, tuple] = {}


def top_level_pieces(text: str) -> list[str]:
    """``text`` cut after every ``];`` that closes a top-level bracket (one nest each)."""
    pieces, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth == 0 and text.startswith("];", i):
                pieces.append(text[start:i + 2])
                start = i + 2
    if start != len(text):
        pieces.append(text[start:])
    return pieces


def parse_leir(text: str) -> Leir:
    """``parse(text)``, one top-level nest at a time with a cache: the reference's outputs of
    one program share most of their nests, and parsing is what the benchmark spends its time
    on. A piece that does not parse alone makes the whole text parse at once (so the error is
    the parser's own)."""
    nests: list = []
    for piece in top_level_pieces(text):
        if piece not in _NESTS:
            try:
                _NESTS[piece] = parse(piece).nests
            except Exception:  # noqa: BLE001 -- fall back to the whole text below
                return parse(text)
        nests.extend(_NESTS[piece])
    return Leir(tuple(nests))


def program_or_none(text: str, row: dict) -> Program | None:
    try:
        return Program(parse_leir(text), Signature.from_dict(row["signature"]), row["name"])
    except Exception:  # noqa: BLE001 -- an output that is not LEIR is counted, not fatal
        return None


def canonical_or_none(text: str, row: dict) -> str | None:
    return _canonical(program_or_none(text, row))


def _canonical(program: Program | None) -> str | None:
    try:
        return exact_canonical_text(program) if program is not None else None
    except Exception:  # noqa: BLE001
        return None


@lru_cache(maxsize=None)
def our_strategy(strategy_id: str):
    """Our default strategy of that id, or None."""
    return {s.id: s for s in default_strategies()}.get(strategy_id)


def classify(result) -> str:
    if result.equal and (result.independent or result.before_independent is False):
        return "equal"
    if result.cause in ("parse", "invalid", "signature", "build", "exec", "crash"):
        return "invalid"
    if result.cause in ("mismatch", "independence"):
        return "not_equal"
    return "undecidable"


_TOKEN = re.compile(r"\d+\.?\d*(?:[eE][-+]?\d+)?|[A-Za-z_]+|\S")


def loose(text: str) -> tuple[str, ...]:
    """The sorted tokens of ``text`` without names, signs, ``+``, parentheses, ``*``, ``/`` and
    ones, literals by value: equal for programs with the same exact canonical text (renaming,
    operand order, signs, products with and quotients by one and a literal's spelling are all
    it forgets), so only our transitions whose loose key some reference output shares need the
    (slow) exact canonical form."""
    out = []
    for tok in _TOKEN.findall(text):
        if tok in "+-()*/":
            continue
        if tok[0].isalpha() or tok[0] == "_":
            out.append("_")
        elif tok[0].isdigit():
            value = float(tok)
            if value != 1.0:
                out.append(repr(value))
        else:
            out.append(tok)
    return tuple(sorted(out))


def strategy_row(strategy, ours_strategy, rows, programs, reference, seed):
    """Reference transitions and ours of one strategy, per program.

    Programs are compared by ``exact_canonical_text``: up to renaming and up to expressions
    that agree bit for bit on every input (a sympy re-print such as ``1-(A*C)`` ->
    ``-A*C+1``). A pair whose output is its original in that sense is no transition: it is
    counted as ``identity`` and not owed.

    The reference's transitions are its training pairs ``(original, output)``
    (``ReferenceResult.pairs``): for the sympy family the original is often a 1- or 2-step
    compute_inline result of the program, and for the swapped strategies (expand_powsimp,
    loop_fusion, ...) it is the forward strategy's output. Ours are our single steps from the
    same original. Returns ``ref_all`` (program id -> {(canonical original, canonical
    output): (original text, output text)}), ``ours_all`` (program id -> the canonical pairs
    of ours that can match), ``ours_counts`` (distinct transitions of ours from the program
    itself), ``originals`` (program id -> {original text: Program}) and the numbers of
    identity pairs, unparseable pairs and reference errors, and ``ours_made``: our transitions
    from the programs themselves, ``(row, program, program text, output text)``."""
    ref_all, ours_all, ours_counts, originals = {}, {}, {}, {}
    ours_made: list = []
    unparseable = errors = identity = 0
    for row, program in zip(rows, programs):
        result = reference.steps(row["leir"], known_names(row), strategy, seed=seed)
        errors += result.error is not None
        texts, keys, c_starts, ends = {}, {}, {}, {}
        starts = originals.setdefault(row["id"], {row["leir"]: program})
        for before, out in result.pairs:
            start = starts.get(before) or program_or_none(before, row)
            after = program_or_none(out, row)
            c_after = _canonical(after)
            if start is None or c_after is None:
                unparseable += 1
                continue
            starts[before] = start
            if before not in c_starts:
                c_starts[before] = exact_canonical_text(start)
            if c_starts[before] == c_after:
                identity += 1
                continue
            key = (c_starts[before], c_after)
            if key not in texts:
                texts[key] = (before, out)
                if before != row["leir"]:   # swapped pairs end here: undo steps below
                    ends[out] = (after, c_after)
            keys.setdefault(before, set()).add(loose(c_after))
        ref_all[row["id"]] = texts
        ours, seen = set(), set()
        if ours_strategy is not None:
            for before in dict.fromkeys([row["leir"], *keys]):
                start, wanted = starts[before], keys.get(before, set())
                for t in single_steps(start, ours_strategy):
                    text = t.after.text
                    if before == row["leir"]:
                        seen.add(text)
                    if loose(text) in wanted:
                        ours.add((c_starts[before], exact_canonical_text(t.after)))
            # A pair from another original (Q, P) is, for the swapped strategies, the
            # reference's step P -> Q of the inverse strategy read backwards; ours for it are
            # our undo steps ending at P (docs/REFERENCE_RECALL.md).
            for end, (target, c_end) in sorted(ends.items()) if ours_strategy.inverse else ():
                for t in undo_steps(target, ours_strategy):
                    ours.add((exact_canonical_text(t.before), c_end))
                    if end == row["leir"]:
                        ours_made.append((row, t.before, t.before.text, t.after.text))
        ours_all[row["id"]] = ours
        ours_counts[row["id"]] = len(seen)
        ours_made.extend((row, program, row["leir"], text) for text in sorted(seen))
    return ref_all, ours_all, ours_counts, originals, identity, unparseable, errors, ours_made


STRESS_SCALE = 100.0
ZERO_SHARE = 0.25


def stress_failure(before: Program, after_text: str, seed: int) -> str | None:
    """Why ``after_text``, which the verifier found equal to ``before``, is not equal after
    all on inputs the verifier's standard-normal draws never produce (module docstring), or
    None: ``"zeros"`` when on inputs with a seeded quarter of their elements exactly 0, or with
    all of them 0, it gives a non-finite output element where ``before`` gives a finite one,
    ``"overflow"`` the same on inputs ``STRESS_SCALE`` times larger. Zeros are tried first: they
    decide for every strategy, an overflow not for the value splits (``verdicts_of``). A
    program that cannot run here decides nothing (None)."""
    import numpy as np

    from leir_egraph.lower import run
    from leir_egraph.verify.inputs import random_inputs
    from leir_egraph.verify.session import equal_target
    try:
        after = Program.parse(after_text, before.signature, before.name, before.values)
        target = equal_target()     # the verifier's equality builds: per-operation rounding
        floats = [spec.name for spec in before.signature.inputs
                  if spec.name not in before.values and spec.code[0] == "f"]
        for kind in ("zeros", "overflow", "masked"):
            for trial in range(2):
                inputs = random_inputs(before, seed, 100 + trial)
                rng = np.random.default_rng([seed, 200 + trial])
                for name in floats:
                    x = inputs[name]
                    if kind == "overflow":
                        inputs[name] = (x * STRESS_SCALE).astype(x.dtype)
                    elif kind == "masked":   # an attention mask's -inf, in a quarter, then half
                        share = ZERO_SHARE * (1 + trial)
                        inputs[name] = np.where(rng.random(x.shape) < share, -np.inf, x
                                                ).astype(x.dtype)
                    else:   # a quarter of the elements 0, then every element 0
                        share = ZERO_SHARE if trial == 0 else 1.0
                        inputs[name] = np.where(rng.random(x.shape) < share, 0, x
                                                ).astype(x.dtype)
                want, got = run(before, inputs, target), run(after, inputs, target)
                if any((np.isfinite(want[k]) & ~np.isfinite(got[k])).any() for k in want):
                    return kind
    except Exception:  # noqa: BLE001 -- a program that cannot run here decides nothing
        return None
    return None


def cuda_failure(before: Program, after_text: str) -> str | None:
    """Why ``after_text`` cannot be the CUDA program that ``before`` can be (TVM lowering for
    CUDA: launch limits, shared/local memory confined to one kernel), or None."""
    from leir_egraph.lower import CudaInvalid, lower
    try:
        lower(before, "cuda")
    except Exception:  # noqa: BLE001 -- the original is no CUDA program: nothing to keep
        return None
    try:
        lower(Program.parse(after_text, before.signature, before.name, before.values), "cuda")
    except CudaInvalid as err:
        return err.reason
    except Exception:  # noqa: BLE001 -- not this check's business (the verifier's)
        return None
    return None


def finite_domain(strategy_id: str) -> bool:
    """Whether our strategy is defined on the FINITE domain (its rules read ``finite_operand``
    facts: exact real arithmetic on finite inputs, ``leir/ranges.py``), where an intermediate
    that overflows is outside the contract, so the ``overflow`` check does not decide."""
    ours = our_strategy(strategy_id)
    return ours is not None and "finite_operand" in ours.guards


def verdicts_of(chosen: list, workers: int, seed: int, overflow_decides: bool
                ) -> tuple[dict, dict, list]:
    """Our verifier's verdicts on ``chosen`` (``(row, original program, original text, output
    text)``), with the CUDA, zeros and overflow checks of the module docstring: (verdict
    counts, check counts, examples). ``overflow_decides``: an overflow makes the verdict
    ``not_equal`` (else it is only counted, as ``overflow_outside_domain``)."""
    verdicts = {"equal": 0, "not_equal": 0, "invalid": 0, "undecidable": 0}
    checks = {"overflow": 0, "zeros": 0, "masked": 0, "cuda_invalid": 0,
              "overflow_outside_domain": 0, "masked_outside_domain": 0}
    examples = []
    if not chosen:
        return verdicts, checks, examples
    from leir_egraph.verify import verify_many
    results = verify_many([(p, text) for _, p, _, text in chosen], timing=False, workers=workers)
    for (row, program, before, text), res in zip(chosen, results):
        verdict, reason = classify(res), res.reason
        if verdict == "equal":
            cuda = cuda_failure(program, text)
            stress = None if cuda else stress_failure(program, text, seed)
            if cuda:
                verdict, reason = "invalid", f"not a valid CUDA program: {cuda}"
                checks["cuda_invalid"] += 1
            elif stress in ("overflow", "masked") and not overflow_decides:
                checks[f"{stress}_outside_domain"] += 1
            elif stress:
                what = {"overflow": f"inputs x{STRESS_SCALE:g}",
                        "masked": f"inputs with {ZERO_SHARE:.0%} or {2 * ZERO_SHARE:.0%} of their "
                                  "elements -inf",
                        "zeros": f"inputs with {ZERO_SHARE:.0%} or all elements 0"}[stress]
                verdict, reason = "not_equal", f"non-finite where the original is finite, {what}"
                checks[stress] += 1
        verdicts[verdict] += 1
        examples.append({"program": row["id"], "name": row["name"], "before": before,
                         "after": text, "verdict": verdict, "reason": reason})
    return verdicts, checks, examples


@lru_cache(maxsize=None)
def _unguarded(strategy_id: str) -> tuple:
    """``(guard, our strategy without that guard)`` for each guard but the pattern itself (built
    once per strategy: each is a new engine)."""
    from leir_egraph.egraph.rulecheck import without_guard
    ours = our_strategy(strategy_id)
    if ours is None:
        return ()
    return tuple((g, without_guard(ours, g)) for g in ours.guards if g != "pattern_match")


def refusing_guard(strategy_id: str, row: dict, program: Program, after_text: str,
                   swapped: bool = False) -> str | None:
    """The guard of our strategy that refuses this reference move: without it, one of our rules
    makes exactly the reference's output (exact canonical form); for a ``swapped`` pair (from
    another original), also a guard of an inverse strategy whose step from the output back to
    the original it refuses (``<inverse>:<guard>``). None when no single guard does (the move
    is not one of our rules' at all)."""
    after = program_or_none(after_text, row)
    want = _canonical(after)
    if want is None:
        return None
    for guard, unguarded in _unguarded(strategy_id):
        for t in single_steps(program, unguarded):
            if exact_canonical_text(t.after) == want:
                return guard
    # or the reversed step of an inverse strategy, from the output back to the original
    ours = our_strategy(strategy_id)
    if swapped and ours is not None and ours.inverse:
        start = exact_canonical_text(program)
        for inverse in ours.inverse:
            for guard, unguarded in _unguarded(inverse):
                for t in single_steps(after, unguarded):
                    if exact_canonical_text(t.after) == start:
                        return f"{inverse}:{guard}"
    return None


def judge(entry: dict, missed: list, sample: int, workers: int, rng: random.Random,
          seed: int = 0, ours: list | None = None, sample_ours: int = 0) -> None:
    """Verify a seeded sample of the reference-only transitions ``missed`` (``(row, original
    program, original text, output text)``) and add the verdicts and the estimated sound
    recall to ``entry``; with ``ours`` and ``sample_ours``, a seeded sample of our own
    transitions too, judged the same way (``ours_sample``: anything but ``equal`` or
    ``undecidable`` there is a soundness defect of ours)."""
    decides = not finite_domain(entry["strategy"])
    chosen = rng.sample(missed, min(sample, len(missed))) if sample else []
    verdicts, checks, examples = verdicts_of(chosen, workers, seed, decides)
    refused = 0
    for (row, program, before, text), example in zip(chosen, examples):
        if example["verdict"] == "equal":
            example["refused_by"] = refusing_guard(entry["strategy"], row, program, text,
                                                   swapped=before != row["leir"])
            refused += example["refused_by"] is not None
    judged = verdicts["equal"] + verdicts["not_equal"] + verdicts["invalid"]
    eq_share = verdicts["equal"] / judged if judged else None
    est = len(missed) * eq_share if eq_share is not None else None
    est_refused = len(missed) * refused / judged if judged else 0.0
    if not missed:
        est = 0.0
    shared = entry["shared"]
    owed = est - est_refused if est is not None else None
    entry.update(sample=verdicts, **checks, sampled=examples, overflow_decides=decides,
                 estimated_sound_missed=est, refused_equal=refused,
                 estimated_refused=est_refused,
                 sound_recall=(shared / (shared + est) if est is not None and shared + est
                               else None),
                 owed_recall=(shared / (shared + owed) if owed is not None and shared + owed
                              else None))
    if ours and sample_ours:
        mine = random.Random(f"{seed}|ours|{entry['strategy']}").sample(
            ours, min(sample_ours, len(ours)))
        verdicts, checks, examples = verdicts_of(mine, workers, seed, decides)
        entry.update(ours_sample=verdicts, ours_checks=checks,
                     ours_defects=[e for e in examples
                                   if e["verdict"] not in ("equal", "undecidable")])


def print_row(entry: dict) -> None:
    rec = f"{100 * entry['recall']:.1f}%" if entry["reference"] else "-"
    srec = f"{100 * entry['sound_recall']:.1f}%" if entry["sound_recall"] is not None else "-"
    orec = (f"{100 * entry['owed_recall']:.1f}%" if entry.get("owed_recall") is not None
            else "-")
    v = entry["sample"]
    print(f"{entry['strategy']:<56}{entry['reference']:>7}{entry['ours']:>7}"
          f"{entry['shared']:>7}{rec:>8}"
          f"{v['equal']:>8}/{v['not_equal']}/{v['invalid']}/{v['undecidable']:<8}{srec:>13}"
          f"{entry.get('refused_equal', 0):>8}{orec:>7}"
          + (f"{'':>4}{o['equal']}/{o['not_equal']}/{o['invalid']}/{o['undecidable']}"
             if (o := entry.get("ours_sample")) else ""),
          flush=True)


def finish(report: dict) -> None:
    """Totals over the strategies of ``report``."""
    entries = report["strategies"]
    tot_ref = sum(e["reference"] for e in entries)
    tot_shared = sum(e["shared"] for e in entries)
    report["total"] = {"reference": tot_ref, "shared": tot_shared,
                       "recall": tot_shared / tot_ref if tot_ref else None}
    est = [e["estimated_sound_missed"] for e in entries]
    if all(x is not None for x in est):
        missed_sound = sum(est)
        owed = missed_sound - sum(e.get("estimated_refused", 0.0) for e in entries)
        report["total"]["sound_recall"] = (tot_shared / (tot_shared + missed_sound)
                                           if tot_shared + missed_sound else None)
        report["total"]["owed_recall"] = (tot_shared / (tot_shared + owed)
                                          if tot_shared + owed else None)
    print(f"total: reference {tot_ref}, shared {tot_shared}, recall "
          f"{100 * tot_shared / tot_ref if tot_ref else 0:.1f}%"
          + (f", estimated sound recall {100 * report['total']['sound_recall']:.1f}%"
             f" ({100 * report['total']['owed_recall']:.1f}% of the sound moves no guard of "
             "ours refuses)"
             if report["total"].get("sound_recall") else ""))


def reverify(path: str, rows: list[dict], sample: int, workers: int, seed: int) -> dict:
    """Only the sampling step, on the reference-only outputs an earlier report listed (run it
    with ``--show-missed`` at least as large as the misses, or the sample is of the listed
    ones and ``sample_of_listed`` says so)."""
    report = json.loads(Path(path).read_text())
    by_id = {r["id"]: r for r in rows}
    programs: dict[str, Program] = {}
    rng = random.Random(seed)
    report["sample"] = sample
    for entry in report["strategies"]:
        missed = []
        for m in entry["missed"]:
            row = by_id[m["program"]]
            before = m.get("before", row["leir"])
            if before not in programs:
                programs[before] = Program.parse(before, row["signature"], row["name"])
            missed.append((row, programs[before], before, m["after"]))
        listed = len(missed)
        judge(entry, missed, sample, workers, rng, seed)
        if listed < entry["reference_only"]:
            entry["sample_of_listed"] = listed
            if entry["estimated_sound_missed"] is not None and listed:
                entry["estimated_sound_missed"] *= entry["reference_only"] / listed
                est, shared = entry["estimated_sound_missed"], entry["shared"]
                entry["sound_recall"] = shared / (shared + est) if shared + est else None
        print_row(entry)
    finish(report)
    return report


def _hash_seed(argv: list[str]) -> int:
    """The ``--hash-seed`` of the command line (0 without one), read before the re-execution."""
    for k, arg in enumerate(argv):
        if arg == "--hash-seed" and k + 1 < len(argv):
            return int(argv[k + 1])
        if arg.startswith("--hash-seed="):
            return int(arg.split("=", 1)[1])
    return 0


def main() -> int:
    require_fixed_hash_seed(_hash_seed(sys.argv[1:]))
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reference-dir", help="a checkout of the reference (not with --reverify)")
    ap.add_argument("--programs", choices=tuple(SOURCES), default="golden")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--limit", type=int, default=None, help="first N programs only")
    ap.add_argument("--strategies", help="comma-separated strategy ids (default: all shared)")
    ap.add_argument("--sample", type=int, default=20,
                    help="reference-only outputs verified per strategy (0: none)")
    ap.add_argument("--sample-ours", type=int, default=0,
                    help="our own transitions per strategy judged the same way (0: none)")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--show-missed", type=int, default=5,
                    help="reference-only outputs listed per strategy in the report")
    ap.add_argument("--reverify", metavar="REPORT",
                    help="no enumeration: verify a sample of the misses REPORT lists")
    ap.add_argument("--hash-seed", type=int, default=0,
                    help="PYTHONHASHSEED to run under (the reference orders some outputs by "
                         "Python's string hashing; 0 is the figures' seed)")
    ap.add_argument("--json", help="write the report here")
    args = ap.parse_args()
    if args.reverify:
        report = reverify(args.reverify, load_rows(args.programs, args.dtype, None),
                          args.sample, args.workers, args.seed)
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=1))
        return 0

    if not args.reference_dir:
        ap.error("--reference-dir is required (unless --reverify)")
    reference = ReferenceStrategies(args.reference_dir)
    rows = load_rows(args.programs, args.dtype, args.limit)
    programs = [Program.parse(r["leir"], r["signature"], r["name"]) for r in rows]
    wanted = args.strategies.split(",") if args.strategies else list(SHARED_STRATEGIES)
    rng = random.Random(args.seed)
    report = {"programs": args.programs, "dtype": args.dtype, "count": len(rows),
              "seed": args.seed, "hash_seed": args.hash_seed, "sample": args.sample, "strategies": []}
    print(f"{len(rows)} {args.programs} {args.dtype} programs")
    print(f"{'strategy':<56}{'ref':>7}{'ours':>7}{'shared':>7}{'recall':>8}"
          f"{'  sample eq/ne/inv/und':>24}{'sound-recall':>13}{'refused':>8}{'owed':>7}"
          + (f"{'  ours eq/ne/inv/und':>20}" if args.sample_ours else ""))
    for sid in wanted:
        if not reference.has(sid):
            continue
        start = time.perf_counter()
        ref_all, ours_all, ours_counts, originals, identity, unparseable, errors, ours_made = strategy_row(
            sid, our_strategy(sid), rows, programs, reference, args.seed)
        ref_n = sum(len(v) for v in ref_all.values())
        ours_n = sum(ours_counts.values())
        shared = sum(len(set(ref_all[k]) & ours_all[k]) for k in ref_all)
        missed = [(row, originals[row["id"]][before], before, after)
                  for row in rows
                  for c in sorted(set(ref_all[row["id"]]) - ours_all[row["id"]])
                  for before, after in [ref_all[row["id"]][c]]]
        from_other = sum(before != row["leir"] for row in rows
                         for before, _ in ref_all[row["id"]].values())
        entry = {"strategy": sid, "reference": ref_n, "ours": ours_n, "shared": shared,
                 "reference_only": len(missed), "identity": identity,
                 "unparseable": unparseable, "from_other_original": from_other,
                 "reference_errors": errors,
                 "recall": shared / ref_n if ref_n else None,
                 "seconds": round(time.perf_counter() - start, 1),
                 "missed": [{"program": row["id"], "before": before, "after": text}
                            for row, _, before, text in missed[:args.show_missed]]}
        judge(entry, missed, args.sample, args.workers, rng, args.seed, ours_made,
              args.sample_ours)
        report["strategies"].append(entry)
        print_row(entry)
    finish(report)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(recorded(main))
