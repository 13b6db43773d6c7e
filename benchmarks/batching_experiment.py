"""Why ``steps_many`` pays one push/run/pop per program instead of loading a batch into one run
(issue 11, goal 2): the measurement behind that decision.

It loads N golden-corpus programs, their ``let`` names made distinct per program, with all their
facts, into ONE e-graph run of all strategies, and compares that with N separate runs (the
engine's own path): CPU seconds to insert facts, to run the rules and to print the match tables,
and the number of match rows. The combined run is *not* sound and is never used for
enumeration: facts keyed by names (``FreshTensor``, ``Intermediate``, ``NonNegativeTensor``...) or
by nests whose surroundings differ hold for one program and not the other, so rules match
across programs; the extra rows it prints are exactly those cross-program combinations.

    python benchmarks/batching_experiment.py [--programs 12]

The latest figures: benchmarks/results/batching_experiment.md.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from results_file import recorded  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # this checkout's leir_egraph


@contextmanager
def quiet_stderr():
    """egglog's Rust side prints a line per unextractable term on stderr; keep the table
    readable."""
    saved = os.dup(2)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def main(argv=None) -> int:
    from transition_snapshot import GOLDEN, corpus

    from leir_egraph.egraph.engine import MAX_ROWS, batches, engine_for, ruleset_name
    from leir_egraph.egraph.loaded import LoadedProgram
    from leir_egraph.egraph.steps import default_strategies

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--programs", type=int, default=12)
    args = parser.parse_args(argv)
    programs = [p for name, p in corpus(GOLDEN, args.programs) if not name.startswith("zoo:")]
    engine = engine_for(default_strategies())
    step = engine.one_iteration(engine.strategies, ruleset_name)  # every strategy, one ruleset

    def commands(batch) -> list[str]:
        out = []
        for k, program in enumerate(batch):
            loaded = LoadedProgram(program)
            rename = lambda text, k=k: re.sub(r"\$([ns]\d+)", lambda m: f"$p{k}{m.group(1)}", text)
            out += rename(loaded.declarations()).splitlines()
            out += [f.text() for f in engine.vocabulary.facts(loaded, engine.read_relations)]
        return out

    def one_run(batch) -> dict:
        figures = {}
        engine.run("(push)")
        start = time.process_time()
        for text in batches(commands(batch)):
            engine.run(text)
        figures["facts_s"] = time.process_time() - start
        start = time.process_time()
        engine.run(f"(run-schedule (saturate (run analysis)))\n{step}\n"
                    "(run-schedule (saturate (run helpers)))")
        figures["rules_s"] = time.process_time() - start
        start = time.process_time()
        (sizes,) = engine.run("(print-size Matched)")
        figures["rows"] = sizes.size if hasattr(sizes, "size") else sizes.sizes[0][1]
        with quiet_stderr():
            engine.run(f"(print-function Matched {MAX_ROWS})")  # every rule's rows: one table
        figures["print_s"] = time.process_time() - start
        engine.run("(pop)")
        return figures

    separate = [one_run([p]) for p in programs]
    together = one_run(programs)
    keys = ("facts_s", "rules_s", "print_s", "rows")
    print(f"{len(programs)} golden programs, all {len(engine.strategies)} strategies, "
          f"load {os.getloadavg()[0]:.1f}")
    print(f"{'':<28}" + "".join(f"{k:>10}" for k in keys))
    print(f"{'separate runs (the engine)':<28}" +
          "".join(f"{sum(f[k] for f in separate):>10.2f}" if k.endswith("_s")
                  else f"{sum(f[k] for f in separate):>10}" for k in keys))
    print(f"{'one combined run (unsound)':<28}" +
          "".join(f"{together[k]:>10.2f}" if k.endswith("_s") else f"{together[k]:>10}"
                  for k in keys))
    return 0


if __name__ == "__main__":
    sys.exit(recorded(main))
