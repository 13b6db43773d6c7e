"""Does the cost model rank the kernel moves of issue 39 as the machine does?

For a few of the paper's test workloads at CPU size (default the matrix products #10, 47, 62,
63), the programs one or two steps away along the moves that reach fast CPU kernels -- loop
reorder (reduction outward), register tiling (vector lanes, local accumulator tile), loop
vectorisation, loop split, loop parallelisation -- are enumerated (``egraph.single_steps``),
a seeded sample of them is timed with TVM (llvm, opt-level 3) and costed by the model
(``cost.cost``, the machine of ``search.rules_proposer.timing_machine``: what the search ranks
with). It prints, per workload, the Spearman rank correlation of model and measurement over the
sample (ranking candidates of one root is what search needs), and its mean, and which program
each ranks first.

Timing: all programs of a workload run on one set of tensors (``lower.prepared_calls``),
``--rounds`` interleaved rounds, each timing every program once for at least ``--min-ms``,
the order rotating from round to round (``peers.interleaved``); a program's time is the
fastest of its rounds (``--statistic min``, the default: load only ever adds time, so the
fastest round is the least disturbed one; two runs of the same programs agree far better on it
than on the median) or their median. **Noise ceiling**: the Spearman of that statistic over the
even rounds against the odd rounds -- two measurements of the same programs. A model cannot be
shown to rank better than the measurement agrees with itself.

``--save FILE`` writes every program (text, signature, label) with its round times as JSON;
``--load FILE`` re-costs saved programs without timing them (for working on the model: fit on
some workloads' timings, report on others': ``benchmarks/cost_fit.py``). ``--against FILE``
prints, per workload, the Spearman of this run's times and those of another run of the same
programs: the agreement of two measurements in different processes, which also differ in
where the allocator places each program's intermediates.

    python benchmarks/kernel_ranking.py [--workloads 10,47,62,63] [--programs 12] [--rounds 10]
        [--min-ms 2] [--threads 1] [--seed 0] [--verbose] [--save FILE | --load FILE]
        [--statistic min|median] [--against FILE]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys

from cost_model import spearman  # noqa: E402  (one Spearman for every benchmark)
from peers import interleaved  # noqa: E402  (one interleaved clock for every benchmark)
from results_file import recorded  # noqa: E402

FIRST = ("loop_reorder", "register_tiling", "loop_vectorization", "loop_split",
         "loop_parallelization")
SECOND = ("register_tiling", "loop_vectorization", "loop_reorder")


def candidates(root, rng: random.Random, programs: int) -> list:
    """(how it was reached, program): the root and a seeded sample of the programs one step away along FIRST and two steps
    away (a FIRST step, then a SECOND one), distinct texts only."""
    from leir_egraph.egraph import single_steps
    one = [(sid, t.after) for sid in FIRST for t in single_steps(root, sid)]
    rng.shuffle(one)
    two = []
    for first, p in one[:4]:
        two.extend((f"{first}+{sid}", t.after) for sid in SECOND for t in single_steps(p, sid))
    rng.shuffle(two)
    out, seen = [("root", root)], {root.text}
    for label, p in [x for pair in zip(one, two) for x in pair] + one + two:
        if p.text not in seen and len(out) < programs:
            seen.add(p.text)
            out.append((label, p))
    return out


def measured(programs: list, inputs, rounds: int, min_ms: float) -> list[list[float]]:
    """Per program, its per-call milliseconds in each interleaved round."""
    from leir_egraph.lower import prepared_calls
    calls = prepared_calls(programs, inputs)
    times = interleaved({str(i): c for i, c in enumerate(calls)}, rounds, min_ms)
    return [times[str(i)] for i in range(len(programs))]


STATISTICS = {"min": min, "median": statistics.median}


def noise_ceiling(rounds: list[list[float]], statistic=min) -> float:
    """Spearman of ``statistic`` over the even rounds against the odd rounds (module
    docstring)."""
    if min(len(r) for r in rounds) < 2:
        return float("nan")
    return spearman([statistic(r[0::2]) for r in rounds], [statistic(r[1::2]) for r in rounds])


def _across(times: dict | None, timed, statistic) -> str:
    """The Spearman of this run's times and another run's (``--against``), on the programs
    both timed."""
    if times is None:
        return ""
    both = [(statistic(r), times[p.text]) for _, p, r in timed if p.text in times]
    return f"  across runs {spearman(*zip(*both)) if len(both) >= 3 else float('nan'):6.3f}"


def _timed_workloads(args):
    """(index, name, [(label, program, round times)]) per workload: timed now, or loaded."""
    from leir_egraph import Program
    if args.load:
        for w in json.loads(open(args.load).read())["workloads"]:
            yield w["index"], w["name"], [
                (r["label"], Program.parse(r["text"], json.loads(r["signature"])), r["rounds"])
                for r in w["programs"]]
        return
    from leir_egraph.verify.inputs import random_inputs
    from leir_egraph.workloads import steptp
    for index in (int(w) for w in args.workloads.split(",") if w.strip()):
        root = steptp.program(index, "cpu", seed=args.seed)
        rng = random.Random(f"{args.seed}|{index}")
        chosen = candidates(root, rng, args.programs)
        rounds = measured([p for _, p in chosen], random_inputs(root, args.seed, 0),
                          args.rounds, args.min_ms)
        yield index, root.name, [(label, p, r) for (label, p), r in zip(chosen, rounds)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default="10,47,62,63")
    ap.add_argument("--programs", type=int, default=12, help="programs timed per workload")
    ap.add_argument("--rounds", type=int, default=10, help="interleaved timing rounds")
    ap.add_argument("--min-ms", type=float, default=2.0,
                    help="milliseconds of calls per program and round, at least")
    ap.add_argument("--threads", type=int, default=1,
                    help="TVM runtime threads the programs run on (lower.threads.use); the "
                         "model's cores follow")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--verbose", action="store_true", help="every program's two times")
    ap.add_argument("--save", help="write the programs and their round times (JSON)")
    ap.add_argument("--load", help="re-cost the programs of a --save file; time nothing")
    ap.add_argument("--statistic", choices=sorted(STATISTICS), default="min",
                    help="a program's time from its rounds (module docstring)")
    ap.add_argument("--against", help="a --save file of the same programs measured in another "
                                      "run: print the Spearman of the two runs' times (the "
                                      "measurement's agreement with itself across processes)")
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.programs < 2:
        ap.error("--rounds must be >= 1 and --programs >= 2")
    from leir_egraph.cost import cost
    from leir_egraph.lower.threads import configure, use
    from leir_egraph.search.rules_proposer import timing_machine

    use(args.threads)
    threads = configure()
    machine = timing_machine()
    print(f"timing threads: {threads}; model cores: {machine.cores}"
          + (f"; timings loaded from {args.load}" if args.load else
             f"; {args.rounds} interleaved rounds of >= {args.min_ms} ms per program")
          + f"; a program's time: the {args.statistic} of its rounds")
    statistic = STATISTICS[args.statistic]
    other = {}
    if args.against:
        for w in json.loads(open(args.against).read())["workloads"]:
            other[w["index"]] = {r["text"]: statistic(r["rounds"]) for r in w["programs"]}
    rhos, ceilings, saved = [], [], []
    for index, name, timed in _timed_workloads(args):
        rows = [(cost(p, machine).seconds * 1e3, statistic(r), label) for label, p, r in timed]
        rho = spearman([r[0] for r in rows], [r[1] for r in rows])
        ceiling = noise_ceiling([r for _, _, r in timed], statistic)
        rhos.append(rho)
        ceilings.append(ceiling)
        by_model = min(rows, key=lambda r: r[0])
        by_time = min(rows, key=lambda r: r[1])
        print(f"#{index:3d} {name[:32]:32s} programs {len(rows):2d} spearman {rho:6.3f}  "
              f"noise ceiling {ceiling:6.3f}  root {rows[0][1]:8.3f} ms  "
              f"model's first {by_model[1]:8.3f} ms  fastest {by_time[1]:8.3f} ms"
              + _across(other.get(index), timed, statistic), flush=True)
        if args.verbose:
            for (model_ms, measured_ms, label), (_, _, r) in zip(rows, timed):
                spread = (max(r) - min(r)) / measured_ms if measured_ms else float("nan")
                print(f"      model {model_ms:9.4f} ms  measured {measured_ms:9.4f} ms "
                      f"(spread {spread:5.2f})  {label}")
        saved.append({"index": index, "name": name, "programs": [
            {"label": label, "text": p.text, "signature": p.signature.to_json(), "rounds": r}
            for label, p, r in timed]})
    if args.save:
        with open(args.save, "w") as f:
            json.dump({"threads": threads, "rounds": args.rounds, "min_ms": args.min_ms,
                       "seed": args.seed, "workloads": saved}, f)
    finite = [r for r in rhos if r == r]
    ceil = [c for c in ceilings if c == c]
    print(f"Spearman per workload, mean of {len(finite)}: "
          f"{statistics.mean(finite) if finite else float('nan'):.3f} "
          f"(min {min(finite, default=float('nan')):.3f}, "
          f"max {max(finite, default=float('nan')):.3f}); noise ceiling mean "
          f"{statistics.mean(ceil) if ceil else float('nan'):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(recorded(main))
