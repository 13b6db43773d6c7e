"""Multi-step trajectories and preference pairs from the search (docs/DATASET.md,
"Trajectories").

For every chosen program, ``search`` (docs/SEARCH.md) runs with our rules as the proposer;
every candidate is verified against the root and timed against it with the paired method
(interleaved rounds, median of the per-round ratios, faster only beyond ``NOISE_THRESHOLD``),
and the best node is re-timed at the end. Two files come out:

* ``trajectories/trajectories.jsonl``: one line per program -- the root, every step on the
  path from the root to the best node (its program, strategy, chain of thought, verification
  level, its measured time and paired speedup against the root), the final (confirmed)
  speedup, and the machine it was measured on;
* ``trajectories/preferences.jsonl``: pairs of verified steps from the same state (a node of
  the search tree), ``chosen`` faster than ``rejected``: the two are timed *against each
  other* with the paired method, and a pair is kept only when both the median and the
  fastest-round ratio reach the noise threshold (the ratio is recorded).

Measurements differ between runs (and the search moves on measured speedups), so unlike the
single-step dataset these files are not byte-identical between runs; the programs they name
are verified whatever the measurements were. Programs run one after another in this process
(timings taken side by side would disturb each other).
"""

from __future__ import annotations

import json
import platform
from typing import Any

from ..leir.program import Program

MAX_PAIRS_PER_STATE = 2


def machine() -> dict[str, Any]:
    """Where the timings were taken: CPU model, LLVM's CPU name (the timing builds' target),
    the cores this process may use and the thread count TVM's pool runs with
    (``lower.threads``), the platform and TVM's version."""
    model = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f
                          if line.startswith("model name")), model)
    except OSError:
        pass
    import tvm

    from ..lower.targets import host_cpu
    from ..lower.threads import machine_threads, wanted
    return {"cpu": model, "llvm_mcpu": host_cpu() or "generic", "cores": machine_threads(),
            "tvm_num_threads": wanted(),   # the pool size every timing worker configures
            "platform": platform.platform(), "tvm": tvm.__version__}


def _levels(result) -> dict[tuple[int, str], str]:
    """(parent node id, candidate text) -> verification level of each valid sample."""
    return {(s.node, s.text): s.level for s in result.samples if s.valid}


def trajectory(result, meta: dict[str, Any]) -> dict[str, Any]:
    """One line of trajectories.jsonl from a ``SearchResult``."""
    levels = _levels(result)
    steps = []
    for node in result.trajectory[1:]:
        steps.append({"depth": node.depth, "strategy": node.strategy, "cot": node.cot,
                      "leir": node.program.text,
                      "level": levels.get((node.parent.id, node.program.text)),
                      "time_ms": node.time_ms, "speedup": node.speedup,
                      "faster": node.faster})
    confirmed = next((c for c in result.confirmations if c.get("node") == result.best.id), None)
    return {**meta, "root_leir": result.root.program.text,
            "signature": result.root.program.signature.to_dict(), "root_ms": result.root_ms,
            "algorithm": result.algorithm, "proposer": result.proposer, "steps": steps,
            "final_speedup": result.speedup,
            "final_rounds": confirmed.get("rounds") if confirmed else None,
            "threads": result.threads,
            "samples": result.n_samples, "valid": sum(s.valid for s in result.samples),
            "stopped": result.stopped, "load": list(result.load or ())}


def preference_pairs(result, judge, meta: dict[str, Any],
                     max_per_state: int = MAX_PAIRS_PER_STATE) -> list[dict[str, Any]]:
    """Pairs of valid children of one node, timed against each other (module docstring)."""
    from ..verify import TimingError
    out = []
    for state in result.nodes:
        children = sorted(state.children, key=lambda n: (-n.speedup, n.id))
        candidates = [(fast, slow) for i, fast in enumerate(children)
                      for slow in children[i + 1:]
                      if slow.speedup > 0 and fast.speedup / slow.speedup >= judge.threshold]
        candidates.sort(key=lambda p: (-p[0].speedup / p[1].speedup, p[0].id, p[1].id))
        for fast, slow in candidates[:max_per_state]:
            try:
                paired = judge.verifier.time_pair(slow.program, fast.program,
                                                  rounds=judge.rounds,
                                                  timeout=judge.options["timeout"],
                                                  seed=judge.options["seed"])
            except TimingError:
                continue
            if not paired.faster(judge.threshold):
                continue   # the root-relative gap did not survive a direct measurement
            out.append({**meta, "state_leir": state.program.text, "state_depth": state.depth,
                        "signature": state.program.signature.to_dict(),
                        "chosen": _side(fast), "rejected": _side(slow),
                        "ratio": paired.speedup, "min_ratio": paired.min_speedup,
                        "threads": paired.threads,
                        "rounds": judge.rounds, "threshold": judge.threshold})
    return out


def _side(node) -> dict[str, Any]:
    return {"leir": node.program.text, "strategy": node.strategy, "cot": node.cot,
            "speedup_vs_root": node.speedup}


def search_program(program: Program, meta: dict[str, Any], *, algorithm: str = "greedy",
                   max_samples: int | None = 8, seed: int = 0, trials: int = 3,
                   timeout: float = 60.0, verifier=None,
                   strategies: tuple[str, ...] = ()) -> tuple[dict[str, Any], list[dict]]:
    """Search one program; its trajectory line and its preference pairs."""
    from ..search import Judge, RulesProposer, search
    from ..verify import Verifier
    own = verifier is None
    verifier = verifier or Verifier()
    try:
        judge = Judge(program, verifier=verifier, trials=trials, timeout=timeout, seed=seed)
        proposer = RulesProposer(seed=seed, strategies=list(strategies) or None)
        result = search(program, algorithm, proposer, max_samples=max_samples, judge=judge,
                        seed=seed)
        return trajectory(result, meta), preference_pairs(result, judge, meta)
    finally:
        if own:
            verifier.close()


def build_trajectories(config, execution, *, algorithm: str = "greedy",
                       max_samples: int | None = 8, on_program=None) -> dict[str, Any]:
    """Search every program of ``config`` (its selection, seed, strategies, split) and write
    the two files into ``execution.out`` (an ``OutputFolder``, as the sampler's). Returns the
    summary written to ``trajectories/summary.json``. A program that fails to load or to be
    searched is a line of ``trajectories/failures.jsonl``, never the end of the run.

    Each program's outcome is written as soon as it is searched
    (``trajectories/programs/part-NNNNN.json``, its checksum in the manifest), and the final
    files are made from these; ``execution.resume`` keeps every outcome whose file matches its
    checksum and searches only the others, so a run killed at any point and resumed ends with
    the files an uninterrupted run with the same measurements writes."""
    from ..verify import Verifier
    from .pipeline import select_strategies
    from .records import failure, jsonl_bytes
    from .shards import OutputFolder, shard_name
    from .sources import FrontendFailure, SourceError, load_program, select_programs
    from .splits import checked_splits

    sources = select_programs(list(config.programs), count=config.count, size=config.size,
                              dtype=config.dtype, seed=config.seed, dtypes=config.dtypes)
    if not sources:
        raise SourceError("no programs selected")
    strategies = tuple(s.id for s in select_strategies(config.strategies, config.rules))
    lines, pairs, failures, loaded = [], [], [], []
    for i, src in enumerate(sources):   # every program first: the split and its leak check
        try:
            loaded.append((i, src, load_program(src)))
        except FrontendFailure as err:
            failures.append(failure(src.program_id, src.name, err.stage, err.reason))
    split: dict[str, str] = {}
    if config.split is not None:   # refused before the folder is touched
        summaries = [{"program_id": src.program_id, "program": src.name, "leir": p.text}
                     for _, src, p in loaded]
        split = checked_splits(summaries, config)
    folder = OutputFolder(execution.out)
    identity = {"mode": "trajectories", "config": config.to_dict(), "algorithm": algorithm,
                "max_samples": max_samples, "programs": [s.to_dict() for s in sources]}
    folder.start(identity, execution.resume, execution.overwrite,
                 [f for s in sources for f in s.files()])
    try:
        where = machine()
        verifier = None
        try:
            for i, src, program in loaded:
                rel = f"trajectories/programs/{shard_name(i)}.json"
                data = folder.kept(rel)
                if data is None:
                    verifier = verifier or Verifier()
                    meta = {"program_id": src.program_id, "program": src.name,
                            "split": split.get(src.name), "machine": where}
                    outcome = _searched(program, src, meta, algorithm, max_samples, config,
                                        verifier, strategies)
                    folder.write(rel, (json.dumps(outcome) + "\n").encode())
                    if on_program is not None and outcome["trajectory"] is not None:
                        on_program(outcome["trajectory"])
                else:
                    outcome = json.loads(data)
                if outcome["trajectory"] is not None:
                    lines.append(outcome["trajectory"])
                pairs.extend(outcome["pairs"])
                failures.extend(outcome["failures"])
        finally:
            if verifier is not None:
                verifier.close()
        summary = {"programs": len(sources), "trajectories": len(lines),
                   "with_speedup": sum(t["final_speedup"] > 1 for t in lines),
                   "steps": sum(len(t["steps"]) for t in lines),
                   "preference_pairs": len(pairs), "failures": len(failures), "machine": where}
        folder.write_many({
            "trajectories/trajectories.jsonl": jsonl_bytes(lines),
            "trajectories/preferences.jsonl": jsonl_bytes(pairs),
            "trajectories/failures.jsonl": jsonl_bytes(failures),
            "trajectories/summary.json": (json.dumps(summary, indent=1) + "\n").encode(),
        })
        return summary
    finally:
        folder.close()


def _searched(program: Program, src, meta: dict[str, Any], algorithm: str,
              max_samples: int | None, config, verifier, strategies) -> dict[str, Any]:
    """One program's outcome: its trajectory line and pairs, or its failure row."""
    from .records import failure
    try:
        line, found = search_program(program, meta, algorithm=algorithm,
                                     max_samples=max_samples, seed=config.seed,
                                     trials=config.trials, timeout=config.verify_timeout,
                                     verifier=verifier, strategies=strategies)
    except Exception as err:  # noqa: BLE001 -- one program's failure is recorded
        return {"trajectory": None, "pairs": [],
                "failures": [failure(src.program_id, src.name, "search",
                                     f"{type(err).__name__}: {err}")]}
    return {"trajectory": line, "pairs": found, "failures": []}
