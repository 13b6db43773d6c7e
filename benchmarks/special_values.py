"""What the dataset's special-value trial finds and costs (docs/VERIFY.md "Special values").

Reads a sampler output folder (``python -m leir_egraph.sample --out DIR``) and prints: how many
verified transitions are bitwise identical, the ULP distribution of the others (per strategy),
and the verification time of each transition without and with the special-value set (its
strategy's declared domain and exactness), builds warm (each pair verified once before, and
once with the set: its first run, which builds the programs the set adds, is shown apart).

    PYTHONPATH=. python benchmarks/special_values.py DIR [DIR ...] [--time N]

Several folders (one sample run in parts) are read as one. The failures they recorded are
counted by strategy and kind: a declared exactness broken, NaN/inf moved on the special-value
set, other.

``--time N`` times N transitions (a seeded choice; every transition when omitted): a large
sample's distribution is cheap, its re-verification is not.
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import random
import statistics
import sys

from leir_egraph.egraph.strategy import load_strategies
from leir_egraph.leir.parser import parse
from leir_egraph.leir.program import Program
from leir_egraph.leir.signature import Signature
from leir_egraph.verify import Verifier
from results_file import recorded  # noqa: E402  (benchmarks/ is the script's folder)


def main(outs: list[str], time_n: int | None = None) -> int:
    rows = [json.loads(line) for out in outs
            for p in sorted(glob.glob(f"{out}/dictionary/*.jsonl")) for line in open(p)]
    failures = [json.loads(line) for out in outs
                for p in sorted(glob.glob(f"{out}/failures/*.jsonl")) for line in open(p)]
    kinds = collections.Counter((f.get("strategy"), _failure_kind(f.get("reason") or ""))
                                for f in failures)
    print(f"failures {len(failures)}: " + ", ".join(
        f"{sid} {kind} {n}" for (sid, kind), n in sorted(kinds.items(), key=str)))
    for f in failures:
        if _failure_kind(f.get("reason") or "") != "other":
            print(f"  {f.get('program')} {f.get('strategy')}: {(f.get('reason') or '')[:300]}")
    verified = [r for r in rows if r["verified"]]
    others = [r for r in verified if not r["bitwise"]]
    print(f"transitions {len(rows)}, verified {len(verified)}, bitwise identical "
          f"{len(verified) - len(others)}, not bitwise {len(others)}")
    print("ULPs of the others:", sorted(r["max_ulps"] for r in others))
    by = collections.defaultdict(list)
    for r in others:
        by[r["strategy"]].append(r["max_ulps"])
    for sid, ulps in sorted(by.items()):
        print(f"  {sid}: {sorted(ulps)}")
    buckets = collections.Counter(_bucket(r["max_ulps"]) for r in others)
    print("not bitwise, by largest ULP difference: " + ", ".join(
        f"{b}: {buckets[b]}" for b in BUCKETS if buckets[b]))
    strategies = {s.id: s for s in load_strategies()}
    print(_per_strategy(rows, failures, strategies))
    plain, special, extra, cold = [], [], [], []
    timed = rows if time_n is None else random.Random(0).sample(rows, min(time_n, len(rows)))
    print(f"timed: {len(timed)} of {len(rows)} transitions")
    if not timed:
        return 0
    with Verifier() as v:
        for r in timed:
            sig = Signature.from_dict(json.loads(r["signature"]))
            before = Program(parse(r["before_leir"]), sig, r["program"])
            after = before.with_leir(parse(r["after_leir"]))
            v.verify(before, after, timing=False)  # builds warm
            a = v.verify(before, after, timing=False)
            s = strategies[r["strategy"]]
            first = v.verify(before, after, timing=False, domain=s.domain, ulps=s.ulps,
                             scale=s.scale)   # builds what the set adds: exposed, float64 runs
            b = v.verify(before, after, timing=False, domain=s.domain, ulps=s.ulps,
                         scale=s.scale)
            cold.append(first.cpu_s)
            plain.append(a.cpu_s)
            special.append(b.cpu_s)
            extra.append(b.special_s or 0.0)
    print(f"worker CPU s per verification, builds warm: without the special-value set median "
          f"{statistics.median(plain):.4f} (sum {sum(plain):.2f}), with it median "
          f"{statistics.median(special):.4f} (sum {sum(special):.2f}); the set itself: wall s "
          f"median {statistics.median(extra):.4f} (sum {sum(extra):.2f}); the first "
          f"verification with the set, which also builds the programs it adds (the tensors a "
          f"rewrite writes exposed, the float64 evaluation of the original): median "
          f"{statistics.median(cold):.4f} (sum {sum(cold):.2f})")
    return 0


def _per_strategy(rows, failures, strategies) -> str:
    """A Markdown table: per strategy, what it declares, its verified transitions, how many
    are bitwise, the largest ULP difference measured (where the declaration is judged: the
    outputs for bitwise strategies, the tensors the rewrite writes for the others) and its
    failure rows by kind."""
    lines = ["| strategy | declared | verified | bitwise | worst ULP | failures |",
             "|---|---|---|---|---|---|"]
    for sid in sorted({r["strategy"] for r in rows} | {f.get("strategy") for f in failures
                                                       if f.get("strategy")}):
        mine = [r for r in rows if r["strategy"] == sid and r["verified"]]
        broken = collections.Counter(_failure_kind(f.get("reason") or "") for f in failures
                                     if f.get("strategy") == sid)
        s = strategies.get(sid)
        declared = f"{s.exact}, {s.domain}" if s else "?"
        worst = max((r["max_ulps"] or 0.0 for r in mine), default=0.0)
        lines.append(f"| {sid} | {declared} | {len(mine)} | "
                     f"{sum(bool(r['bitwise']) for r in mine)} | {worst:.3g} | "
                     + (", ".join(f"{k} {n}" for k, n in sorted(broken.items())) or "0") + " |")
    return "\n".join(lines)


BUCKETS = ("0 ULP (a zero of the other sign)", "<= 0.5", "<= 1", "<= 2", "<= 4", "<= 16",
           "> 16")


def _failure_kind(reason: str) -> str:
    """A failure row's kind: a broken declaration of exactness, NaN/inf moved on the special-value
    set, or anything else (not established, timeouts, ...)."""
    if "declares exact" in reason:
        return "exactness breach"
    if "special values" in reason:
        return "special-value breach"
    if "within Equal's tolerance" in reason:
        return "output beyond Equal"
    return "other"


def _bucket(ulps: float) -> str:
    if ulps == 0:
        return BUCKETS[0]
    for limit, name in zip((0.5, 1, 2, 4, 16), BUCKETS[1:]):
        if ulps <= limit:
            return name
    return BUCKETS[-1]


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="+")
    ap.add_argument("--time", type=int, default=None)
    args = ap.parse_args()
    sys.exit(recorded(lambda: main(args.out, args.time)))
