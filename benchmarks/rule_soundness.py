"""What every built-in strategy preserves, measured by the soundness check of
``leir rules check --verify`` (leir_egraph/egraph/soundcheck.py).

For each strategy: its declaration (``exact``, ``domain``), then the check run with the
declaration and -- to measure rather than judge -- with no ULP limit, on any IEEE input
(``float``) and, when that finds NaN/inf moved, on finite inputs. Prints one Markdown row per
strategy: declared, verdict under the declaration, transitions judged, bitwise, worst ULP
measured, CPU seconds (this process and the verification worker), and how many of the
judged transitions each kind of program gave (``soundcheck.PROGRAM_KINDS``).

    PYTHONPATH=. python benchmarks/rule_soundness.py [--budget 8] [--only id,id]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from leir_egraph.egraph.engine import engine_for
from leir_egraph.egraph.soundcheck import check_soundness
from leir_egraph.egraph.strategy import load_strategies
from leir_egraph.verify import Verifier
from results_file import recorded  # noqa: E402  (benchmarks/ is the script's folder)

UNLIMITED = 10 ** 9


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default="")
    ap.add_argument("--measure", action="store_true",
                    help="also measure with no ULP limit (float, then finite inputs)")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    strategies = [s for s in load_strategies() if not only or s.id in only]
    print("| strategy | declared | verdict | judged | bitwise | worst ULP | measured (no limit) "
          "| CPU s | judged per program kind |")
    print("|---|---|---|---|---|---|---|---|---|")
    failed = 0
    for s in strategies:
        engine_for.cache_clear()       # one strategy's e-graphs at a time
        with Verifier() as verifier:   # a fresh worker per strategy: a small build cache
            r = check_soundness(s, verifier, budget=args.budget, seed=args.seed)
            cpu = r.cpu_s
            measured = "-"
            if args.measure:
                parts = []
                for domain in ("float", "finite"):
                    m = check_soundness(replace(s, ulps=UNLIMITED, domain=domain), verifier,
                                        budget=args.budget, seed=args.seed)
                    cpu += m.cpu_s
                    parts.append(f"{domain}: {'NaN/inf moved' if m.problems else 'holds'}, "
                                 f"worst {m.worst_ulps:.3g} ULP")
                    if not m.problems:
                        break
                measured = "; ".join(parts)
            verdict = "holds" if not r.problems else "FAILS: " + \
                r.problems[0].splitlines()[0][len(s.id) + 2:][:160]
            failed += bool(r.problems)
            print(f"| {s.id} | {s.exact}, {s.domain} | {verdict} | {r.judged} | {r.bitwise} | "
                  f"{r.worst_ulps:.3g} | {measured} | {cpu:.1f} | "
                  + ", ".join(f"{k} {n}" for k, n in r.by_kind.items()) + " |")
            sys.stdout.flush()
            for p in r.problems:
                print(p, file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(recorded(main))
