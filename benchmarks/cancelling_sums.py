"""What the strategies that reassociate a sum keep where the sum cancels.

A sum whose terms nearly cancel (data far from zero minus its mean, a mean of mixed signs)
keeps no bound in ULPs of its small result when its order changes: its partial sums round at
the scale of the terms. reduction_factorization met that on the zoo and declares ``16 ulp of
values``; this measures the others that change a sum's order -- tensor_split_to_decouple_
operators (its reduction split) and the online-softmax family -- with the soundness judge
(``verify/soundness.py::judge``) on normal inputs and the ``cancelling`` special-value family
(every input ±1.5 within 2^-10, the sign a checkerboard over every dimension, so a sum along
any one dimension nearly cancels), at several seeds.

Programs: each strategy's own examples; four sums that cancel on those inputs (a row sum of
64 terms, a matrix product ``exp(Q)*W`` over 64 terms whose ``W`` alternates in sign, a mean
subtracted from its data and summed, attention over 64 keys -- ``softmax(|A|)`` times values
that alternate in sign); and what online_softmax makes of the attention (the programs
normal_matmul_to_prefix_matmul_based_on_online_softmax rewrites). The transitions of the
strategy on each program (at most ``--per-program`` per rule, spread over the list) are
judged at the declared bound and scale, on two normal input sets and the cancelling one;
"beyond" is the largest distance of the rewrite from the float64 evaluation of the original
*beyond the original's own*, in ULPs of the rewritten tensor's largest magnitude ("tensor")
and of the largest value the original reads or writes ("values"), over every judged
transition and seed.

    PYTHONPATH=. python benchmarks/cancelling_sums.py [--seeds 5] [--per-program 4] [--only id,id]
"""

from __future__ import annotations

import argparse
import sys
import time

from leir_egraph.egraph.rulecheck import example_program
from leir_egraph.egraph.steps import single_steps
from leir_egraph.egraph.strategy import load_strategies
from leir_egraph.verify import Verifier
from leir_egraph.verify.soundness import judge
from results_file import recorded  # noqa: E402  (benchmarks/ is the script's folder)

REASSOCIATING = (
    "tensor_split_to_decouple_operators", "reduction_factorization", "online_softmax",
    "normal_loop_summation_on_exp_to_prefix_summation_on_exp", "normal_loop_max_to_prefix_max",
    "flashattention_wo_tiling", "normal_matmul_to_prefix_matmul_based_on_online_softmax")

CANCELLING_SUMS = {
    "row sum of 64": ("B^{4}_{tx=0}L^{64}_{a=0}[D^{f32,g}_{tx}=D^{f32,g}_{tx}+A^{f32,g}_{tx,a};];",
                      "A:f32[4,64] -> D:f32[4]"),
    "exp(Q)*W over 64": (
        "B^{4}_{tx=0}L^{8}_{a=0}L^{64}_{c=0}[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+"
        "exp(Q^{f32,g}_{tx,c})*W^{f32,g}_{c,a};];", "Q:f32[4,64] W:f32[64,8] -> D:f32[4,8]"),
    "centred sum of 64": (
        "B^{4}_{tx=0}L^{64}_{a=0}[M^{f32,g}_{tx}=M^{f32,g}_{tx}+A^{f32,g}_{tx,a};];"
        "B^{4}_{tx=0}[N^{f32,g}_{tx}=M^{f32,g}_{tx}/64;];"
        "B^{4}_{tx=0}L^{64}_{a=0}[D^{f32,g}_{tx}=D^{f32,g}_{tx}+(A^{f32,g}_{tx,a}-N^{f32,g}_{tx});];",
        "A:f32[4,64] -> D:f32[4]"),
    # attention over 64 keys: the softmax of |A| weighs the keys about equally, and the
    # values C alternate in sign along the keys, so the weighted sum cancels
    "softmax(|A|)*C over 64": (
        "B^{2}_{tx=0}L^{64}_{c=0}[Z^{f32,g}_{tx,c}=abs(A^{f32,g}_{tx,c});];"
        "B^{2}_{tx=0}L^{64}_{c=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},Z^{f32,g}_{tx,c});];"
        "B^{2}_{tx=0}L^{64}_{c=0}[E^{f32,g}_{tx}=E^{f32,g}_{tx}+exp(Z^{f32,g}_{tx,c}-D^{f32,g}_{tx});];"
        "B^{2}_{tx=0}L^{64}_{c=0}[F^{f32,g}_{tx,c}=exp(Z^{f32,g}_{tx,c}-D^{f32,g}_{tx})/E^{f32,g}_{tx};];"
        "B^{2}_{tx=0}L^{5}_{a=0}L^{64}_{d=0}[G^{f32,g}_{tx,a}=G^{f32,g}_{tx,a}+F^{f32,g}_{tx,d}*C^{f32,g}_{d,a};];",
        "A:f32[2,64] C:f32[64,5] -> G:f32[2,5]"),
}


def spread(steps: list, per: int) -> list:
    """At most ``per`` transitions of each rule, evenly spaced over the deterministic order
    (a split at every point of a 64-term sum is 63 transitions of one rule)."""
    out = []
    for rule in dict.fromkeys(t.rule for t in steps):
        mine = [t for t in steps if t.rule == rule]
        step = max(1, -(-len(mine) // per))
        out += mine[::step][:per]
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--per-program", type=int, default=4,
                    help="transitions judged per program and rule, spread over its list")
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    strategies = [s for s in load_strategies() if s.id in REASSOCIATING
                  and (not only or s.id in only)]
    print("| strategy | declared | verdict | programs | transitions | judged | beyond, tensor "
          "| beyond, values | CPU s |")
    print("|---|---|---|---|---|---|---|---|---|")
    failed = 0
    with Verifier() as verifier:
        for s in strategies:
            start = time.process_time()
            programs = [example_program(ex.before, ex.signature) for ex in s.examples]
            programs += [example_program(text, sig) for text, sig in CANCELLING_SUMS.values()]
            programs += [t.after for t in single_steps(programs[-1], "online_softmax")]
            fired = transitions = judged = 0
            worst = {"output": 0.0, "values": 0.0}
            failure, cpu = None, 0.0
            for program in programs:
                steps = single_steps(program, s)
                fired += bool(steps)
                transitions += len(steps)
                for t in spread(steps, args.per_program):
                    for seed in range(args.seeds):
                        for scale in ("output", "values"):
                            j = judge(verifier, program, t.after, s.ulps, s.domain, seed=seed,
                                      trials=2, scale=scale, only=("cancelling",))
                            cpu += j.cpu_s
                            worst[scale] = max(worst[scale], j.beyond)
                            if not j.ok and scale == s.scale and failure is None:
                                failure = (f"{s.id}: rule '{t.rule}', seed {seed}\n"
                                           f"  program: {program.text}\n"
                                           f"  after:   {t.after.text}\n{j.failure}")
                        judged += 1
            failed += failure is not None
            verdict = "holds" if failure is None else "FAILS"
            print(f"| {s.id} | {s.exact}, {s.domain} | {verdict} | {fired} of {len(programs)} | "
                  f"{transitions} | {judged} | {worst['output']:.3g} | {worst['values']:.3g} | "
                  f"{time.process_time() - start + cpu:.1f} |")
            sys.stdout.flush()
            if failure is not None:
                print(failure, file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(recorded(main))
