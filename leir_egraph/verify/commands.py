"""``leir verify``: how far a transformed LEIR program is equivalent to its original."""

from __future__ import annotations

import argparse
import json
import time

from ..cli import (EXIT_NOT_EQUIVALENT, TimeLimit, add_threads_option, natural, positive_float,
                   positive_int, time_limit)
from ..leir.commands import load_program
from ..leir.files import read_text

VERIFY_EXAMPLE = """example:
  leir verify leir_egraph/examples/softmax.leir after.leir --sig leir_egraph/examples/softmax.sig.json
  (after.leir: the softmax with its last nest's B^{16}_{tx=0} turned into P^{16}_{i=0})

  level: independent
  levels: diff ok  build ok  exec ok  equal ok  independent ok
  max abs error: 0   max rel error: 0   trials: 3
  time: before 0.09 ms, after 0.12 ms, speedup 0.76x

exit status: 0 when after reaches Equal (or better), 1 when it does not (a timeout included),
2 when an input file or option is unusable (one error line on stderr)."""


def register(sub) -> None:
    p = sub.add_parser("verify", help="check a transformed program against its original",
                       description="Verify AFTER against BEFORE: levels none < diff < build < "
                                   "exec < equal < independent, errors, max abs/rel error, times.",
                       epilog=VERIFY_EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("before", help="original LEIR file")
    p.add_argument("after", help="transformed LEIR file ('-' for standard input)")
    p.add_argument("--sig", required=True, help="signature JSON file (shared by both programs)")
    p.add_argument("--target", choices=("llvm", "cuda"), default="llvm",
                   help="build target; programs always execute on the CPU (default llvm)")
    p.add_argument("--trials", type=positive_int, default=3,
                   help="random input sets (default 3)")
    p.add_argument("--timeout", type=positive_float, default=60.0,
                   help="seconds for the whole verification, worker start-up included "
                        "(default 60)")
    p.add_argument("--seed", type=natural, default=0,
                   help="seed of the random inputs, >= 0 (default 0)")
    p.add_argument("--no-timing", action="store_true", help="skip the timing runs")
    add_threads_option(p)
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.set_defaults(handler=run_verify)


def run_verify(args) -> int:
    """The whole command runs within ``--timeout``: reading and validating BEFORE here (under
    an alarm), the rest in the verifier's worker with what is left of it."""
    from .result import VerificationResult
    from .verifier import verify

    started = time.monotonic()
    try:
        with time_limit(args.timeout):
            before = load_program(args.before, args.sig)
            after_text = read_text(args.after)
    except TimeLimit:
        result = VerificationResult.at(
            "none", f"diff: timed out after {args.timeout:g} s while reading and validating the "
                    "programs", cause="timeout", target=args.target)
    else:
        result = verify(before, after_text, target=args.target, trials=args.trials,
                        timeout=args.timeout, seed=args.seed, timing=not args.no_timing,
                        started=started)
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        print(result.summary())
    return 0 if result.equal else EXIT_NOT_EQUIVALENT

