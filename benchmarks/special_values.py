"""What the dataset's special-value trial finds and costs (docs/VERIFY.md "Special values").

Reads a sampler output folder (``python -m leir_egraph.sample --out DIR``) and prints: how many
verified transitions are bitwise identical, the ULP distribution of the others (per strategy),
and the verification time of each transition without and with the special-value set (its
strategy's declared domain and exactness), builds warm (each pair verified once before).

    PYTHONPATH=. python benchmarks/special_values.py DIR
"""

from __future__ import annotations

import collections
import glob
import json
import statistics
import sys

from leir_egraph.egraph.strategy import load_strategies
from leir_egraph.leir.parser import parse
from leir_egraph.leir.program import Program
from leir_egraph.leir.signature import Signature
from leir_egraph.verify import Verifier
from results_file import recorded  # noqa: E402  (benchmarks/ is the script's folder)


def main(out: str) -> int:
    rows = [json.loads(line) for p in sorted(glob.glob(f"{out}/dictionary/*.jsonl"))
            for line in open(p)]
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
    strategies = {s.id: s for s in load_strategies()}
    plain, special, extra = [], [], []
    with Verifier() as v:
        for r in rows:
            sig = Signature.from_dict(json.loads(r["signature"]))
            before = Program(parse(r["before_leir"]), sig, r["program"])
            after = before.with_leir(parse(r["after_leir"]))
            v.verify(before, after, timing=False)  # builds warm
            a = v.verify(before, after, timing=False)
            s = strategies[r["strategy"]]
            b = v.verify(before, after, timing=False, domain=s.domain, ulps=s.ulps)
            plain.append(a.cpu_s)
            special.append(b.cpu_s)
            extra.append(b.special_s or 0.0)
    print(f"worker CPU s per verification, builds warm: without the special-value set median "
          f"{statistics.median(plain):.4f} (sum {sum(plain):.2f}), with it median "
          f"{statistics.median(special):.4f} (sum {sum(special):.2f}); the set itself: wall s "
          f"median {statistics.median(extra):.4f} (sum {sum(extra):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(recorded(lambda: main(sys.argv[1])))
