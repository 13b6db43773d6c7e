"""Single-step enumeration throughput over a fixed sample of the reference corpus.

    python benchmarks/single_step_throughput.py [--programs 60] [--seed 0]
        [--corpus reference|golden] [--modes per,all,rendered,many] [--verify 0]
        [--vs-reference --reference-dir DIR [--repeats 3]]

Modes (each over the same programs, each engine compiled outside the timed region):

* ``per``: every strategy alone on its own engine (``single_steps``), one call per program and
  strategy; prints the per-strategy table (programs where it applies, transitions, time,
  transitions/second), each strategy's time its own;
* ``all``: every strategy at once on one engine, one call per program (``all_steps``); a
  transition's site, bindings, guard facts and CoT are rendered lazily, on first use, so this
  measures enumeration up to the distinct ``after`` programs;
* ``rendered``: ``all``, then every transition's CoT (and so its site, bindings and facts)
  rendered, as a caller that keeps them all pays;
* ``many``: every program at once on one engine (``steps_many``).

For each mode it prints calls, transitions, wall and CPU seconds, milliseconds per call and
transitions per CPU second, with the machine's load average (the machine is shared: compare
modes of one run, not runs).

``--vs-reference --reference-dir DIR`` also runs the Step-TP authors' reference strategies from
a checkout at DIR (github.com/LIUMENGFAN-gif/StepTP, fetched by the user; nothing of it is
vendored, see ``reference_steptp.py``) on the same programs, one call per program and strategy
as the reference's own driver does, and compares distinct valid transitions per CPU second on
the 30 structural strategies and on all 42 shared ones. A transition counts once per (program,
strategy, resulting text), and only if the text parses against the program's signature and
passes validation (ours: our result trees are validated directly, see
``valid_programs``). Ours is timed batched (``all_steps`` over the strategy set, one engine).
Each side does its whole run ``--repeats`` times (default 3); the CPU seconds are printed as the
fastest and the median run, and the ratio both ways (the reference's structural run is well under
a CPU second and varies by a third from one run to the next, so a single run decides nothing).
Without a reference directory it prints our figures alone.

With ``--verify N`` it also verifies the first N transitions of each strategy on TVM (llvm) and
reports the Equal rate and transitions/second for enumeration + verification. The reference
corpus' larger programs are used for enumeration; verification runs on the golden twins (same
structure, tiny shapes) so it finishes on a laptop.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from leir_egraph.egraph import all_steps, single_steps, steps_many  # noqa: E402
from leir_egraph.egraph.engine import engine_for  # noqa: E402
from leir_egraph.egraph.steps import default_strategies, resolve  # noqa: E402
from leir_egraph.leir import Program  # noqa: E402
from results_file import recorded  # noqa: E402

DATA = ROOT / "tests" / "data"
CORPORA = {"reference": DATA / "reference_corpus.jsonl",
           "golden": DATA / "golden" / "golden_corpus.jsonl"}


def load(path: Path, n: int, seed: int) -> list[Program]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    rows = [r for r in rows if r["dtype"] in ("float32", "float64")]
    random.Random(seed).shuffle(rows)
    return [Program.parse(r["leir"], r["signature"], r["name"]) for r in rows[:n]]


class Clock:
    """Wall and CPU seconds of a block."""

    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu


def valid_texts(program: Program, texts) -> set[str]:
    """The distinct texts among ``texts`` that parse against the program's signature and
    validate."""
    from leir_egraph.leir import check

    out = set()
    for text in set(texts):
        try:
            check(Program.parse(text, program.signature))
        except Exception:  # noqa: BLE001 -- an invalid transition is not counted
            continue
        out.add(text)
    return out


def valid_programs(programs, parse_every: int = 20) -> set[str]:
    """The distinct texts of ``programs`` (our transitions' results, already syntax trees)
    that validate. The tree is checked, not a parse of its text: a lark parse per transition
    made a side-by-side run take 47 minutes (17 ms a parse and check against 2.6 ms a check, on
    the golden corpus' largest program). Every ``parse_every``-th distinct text is still parsed
    back against the signature and must give the same tree, else it is not counted."""
    from leir_egraph.leir import check

    out = {}
    for program in programs:
        out.setdefault(program.text, program)
    valid = set()
    for i, (text, program) in enumerate(out.items()):
        try:
            check(program)
            if i % parse_every == 0 and Program.parse(text, program.signature) != program:
                continue
        except Exception:  # noqa: BLE001 -- an invalid transition is not counted
            continue
        valid.add(text)
    return valid


def per_strategy(programs: list[Program]) -> tuple[list[list], Clock, int]:
    rows, total = [], Clock()
    total.wall = total.cpu = 0.0
    for strategy in default_strategies():
        engine_for((strategy,))  # compile outside the timed region
        applies = count = 0
        with Clock() as clock:
            for p in programs:
                n = len(single_steps(p, strategy))
                count += n
                applies += n > 0
        total.wall += clock.wall
        total.cpu += clock.cpu
        rows.append([strategy.id, applies, count, clock.wall,
                     count / clock.wall if clock.wall else 0.0])
    return rows, total, sum(r[2] for r in rows)


def run_mode(mode: str, programs: list[Program]) -> tuple[Clock, int, int]:
    """(clock, calls, transitions) of the ``all`` or ``many`` mode."""
    engine_for(default_strategies())
    with Clock() as clock:
        if mode == "all":
            count = sum(len(all_steps(p)) for p in programs)
        elif mode == "rendered":   # all, and every transition's site, bindings and CoT printed
            count = sum(len([t.cot for t in all_steps(p)]) for p in programs)
        else:
            count = sum(map(len, steps_many(programs)))
    return clock, len(programs) if mode != "many" else 1, count


def versus_reference(programs: list[Program], reference_dir: str | None, seed: int,
                     repeats: int = 3) -> None:
    """Ours against the reference on the 30 structural and the 42 shared strategies; without
    ``reference_dir``, our figures alone (the reference's columns empty).

    Both sides do the same work ``repeats`` times; each side's CPU seconds are given as the
    fastest and the median of its runs, and the ratio is printed both ways (fastest against
    fastest, median against median). The reference's whole structural run takes well under a
    second of CPU, so one run of it varies by a third from run to run."""
    from statistics import median

    from reference_steptp import SHARED_STRATEGIES, STRUCTURAL, ReferenceStrategies

    reference = ReferenceStrategies(reference_dir) if reference_dir else None
    print(f"\nreference: {reference.root if reference else 'none (our figures alone)'}; one "
          f"call per program and strategy, seed {seed}; distinct valid transitions per CPU "
          f"second; each side run {repeats} times: CPU s fastest / median")
    head = (f"{'strategies':<14}{'ours trans':>11}{'ours cpu s':>16}{'ref trans':>11}"
            f"{'ref cpu s':>16}{'ref errors':>11}{'ours/ref fastest':>18}{'ours/ref median':>17}")
    print(head)
    for label, ids in (("structural", STRUCTURAL), ("shared", SHARED_STRATEGIES)):
        ids = [s for s in ids if reference is None or reference.has(s)]
        chosen = resolve(ids)
        engine_for(chosen)
        ours_cpu, found = [], None
        for _ in range(repeats):
            with Clock() as ours:
                again = [all_steps(p, chosen) for p in programs]
            ours_cpu.append(ours.cpu)
            if found is None:
                found = again
            elif list(map(len, again)) != list(map(len, found)):
                raise RuntimeError(f"{label}: a repeated run found other transitions")
            del again
        ours_count = 0
        for transitions in found:
            for sid in ids:
                ours_count += len(valid_programs(t.after for t in transitions
                                                 if t.strategy == sid))
        ref_count = errors = 0
        ref_cpu = []
        for run in range(repeats if reference else 0):
            seconds = 0.0
            for p in programs:
                for sid in ids:
                    result = reference.steps(p.text, p.signature.names, sid, seed=seed)
                    seconds += result.seconds
                    if run == 0:
                        errors += result.error is not None
                        ref_count += len(valid_texts(p, result.outputs))
            ref_cpu.append(seconds)

        def ratio(ours_s, ref_s):
            if not ours_s or not ref_s or not ref_count:
                return float("nan")
            return (ours_count / ours_s) / (ref_count / ref_s)

        ref_text = (f"{min(ref_cpu):.2f} / {median(ref_cpu):.2f}" if ref_cpu else "-")
        print(f"{label + f' ({len(ids)})':<14}{ours_count:>11}"
              f"{f'{min(ours_cpu):.2f} / {median(ours_cpu):.2f}':>16}{ref_count:>11}"
              f"{ref_text:>16}{errors:>11}"
              f"{ratio(min(ours_cpu), min(ref_cpu) if ref_cpu else 0):>18.2f}"
              f"{ratio(median(ours_cpu), median(ref_cpu) if ref_cpu else 0):>17.2f}")
        print(f"{'':<14}ours runs: {' '.join(f'{c:.2f}' for c in ours_cpu)}; reference runs: "
              f"{' '.join(f'{c:.3f}' for c in ref_cpu) or '-'}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--programs", type=int, default=60)
    ap.add_argument("--corpus", choices=sorted(CORPORA), default="reference")
    ap.add_argument("--modes", default="per", help="comma-separated: per, all, rendered, many")
    ap.add_argument("--verify", type=int, default=0, help="verify this many transitions per strategy")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vs-reference", action="store_true",
                    help="also run the authors' reference strategies (needs --reference-dir)")
    ap.add_argument("--reference-dir", help="a checkout of github.com/LIUMENGFAN-gif/StepTP")
    ap.add_argument("--repeats", type=int, default=3,
                    help="--vs-reference: runs of each side (fastest and median reported)")
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if set(modes) - {"per", "all", "rendered", "many"}:
        ap.error(f"unknown mode in --modes {args.modes}")
    if args.vs_reference and not args.reference_dir:
        print("--vs-reference: no --reference-dir given; printing our figures alone",
              file=sys.stderr)
    if args.vs_reference and args.reference_dir:
        from reference_steptp import require_fixed_hash_seed

        require_fixed_hash_seed()  # the reference's output order depends on the hash seed

    programs = load(CORPORA[args.corpus], args.programs, args.seed)
    print(f"{len(programs)} {args.corpus}-corpus programs (seed {args.seed}), "
          f"{len(default_strategies())} strategies, load average before "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    summary = []
    rows = None
    for mode in modes:
        if mode == "per":
            rows, clock, count = per_strategy(programs)
            calls = len(programs) * len(default_strategies())
        else:
            clock, calls, count = run_mode(mode, programs)
        summary.append((mode, calls, count, clock))

    if args.verify and rows is not None:
        from leir_egraph.verify import verify

        golden = load(CORPORA["golden"], args.programs, args.seed)
        for row, strategy in zip(rows, default_strategies()):
            done = equal = 0
            start = time.perf_counter()
            for p in golden:
                for t in single_steps(p, strategy):
                    if done >= args.verify:
                        break
                    result = verify(t.before, t.after)
                    done += 1
                    equal += result.level in ("equal", "independent")
                if done >= args.verify:
                    break
            seconds = time.perf_counter() - start
            row += [done, equal, done / seconds if seconds else 0.0]

    if rows is not None:
        head = f"{'strategy':<58}{'programs':>9}{'transitions':>12}{'enum s':>9}{'trans/s':>10}"
        if args.verify:
            head += f"{'verified':>9}{'equal':>7}{'enum+verify/s':>15}"
        print(head)
        for row in rows:
            line = f"{row[0]:<58}{row[1]:>9}{row[2]:>12}{row[3]:>9.2f}{row[4]:>10.1f}"
            if args.verify:
                line += f"{row[5]:>9}{row[6]:>7}{row[7]:>15.2f}"
            print(line)
    print(f"\n{'mode':<6}{'calls':>7}{'transitions':>13}{'wall s':>9}{'cpu s':>9}"
          f"{'ms/call':>9}{'trans/cpu s':>13}")
    for mode, calls, count, clock in summary:
        print(f"{mode:<6}{calls:>7}{count:>13}{clock.wall:>9.2f}{clock.cpu:>9.2f}"
              f"{clock.cpu / calls * 1000 if calls else 0:>9.1f}"
              f"{count / clock.cpu if clock.cpu else 0:>13.1f}")
    if args.vs_reference:
        versus_reference(programs, args.reference_dir, args.seed, args.repeats)
    print(f"load average after {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(recorded(main))
