"""``build_dataset``: the Step-TP dataset pipeline from program selectors to the final files.

    sources -> (per program, in workers) Program -> transitions -> TIR/CUDA + verification
            -> shards (atomic, in program order) -> balancing -> chat sets, report, plots

The output folder is described in docs/DATASET.md. With the same DatasetConfig the files are
byte-identical whatever the executor and worker count, and an interrupted run resumed with
``resume=True`` ends with the same files as an uninterrupted one.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .balance import BalancePolicy, balance_multi, balance_single, balance_table
from .chat import multi_example, multi_meta, single_example, single_meta
from .config import DatasetConfig, Execution
from .executors import executor
from .pipeline import select_strategies
from .records import jsonl_bytes
from .report import plots, summarize, write_report
from .shards import OutputFolder
from .sources import SourceError, select_programs
from .splits import (ALL_SPLITS, chat_count, check_leaks, checked_splits, kind_splits,
                     split_file, split_table, test_case)
from .tokens import dataset_tokens

RUN_FORMAT = 1
# What balancing and the chat sets need of a record (the TIR and CUDA texts stay on disk).
_TRAINING_COLUMNS = ("id", "program_id", "program", "signature", "before_leir", "after_leir",
                     "strategy", "category", "direction", "difficulty", "cot", "speedup",
                     "domain", "exact", "bitwise")


@dataclass
class BuildResult:
    """What a run produced: ``summary`` (as in summary.json) and this session's throughput."""
    out: Path
    summary: dict[str, Any]
    elapsed_s: float
    programs_processed: int      # in this session (a resumed run skips finished shards)
    transitions_processed: int
    verified_processed: int
    failures_processed: int
    files: list[str] = field(default_factory=list)

    def rates(self) -> dict[str, float]:
        minutes = max(self.elapsed_s, 1e-9) / 60
        return {"programs_per_min": self.programs_processed / minutes,
                "transitions_per_min": self.transitions_processed / minutes,
                "verified_per_min": self.verified_processed / minutes}


def run_identity(config: DatasetConfig, sources) -> dict[str, Any]:
    """What run.json holds: the settings, the expanded program list and each strategy's rule
    file digest -- a resume with anything different would mix two datasets."""
    strategies = select_strategies(config.strategies, config.rules)
    return {"format": RUN_FORMAT, "config": config.to_dict(),
            "programs": [s.to_dict() for s in sources],
            "strategies": {s.id: hashlib.sha256(Path(s.path).read_bytes()).hexdigest()[:16]
                           for s in strategies}}


def input_files(sources, rules: tuple[str, ...]) -> list[Path]:
    """Every file the run reads: program files and rule files (the output folder must not
    hold any of them where it writes or removes)."""
    files = [f for s in sources for f in s.files()]
    for folder in rules:
        files.extend(p for p in sorted(Path(folder).rglob("*")) if p.is_file())
    return files


def build_dataset(config: DatasetConfig, execution: Execution | None = None,
                  on_program: Callable[[dict[str, Any]], None] | None = None) -> BuildResult:
    """Run the pipeline; see the module docstring. Raises SourceError, ResumeError,
    OutputFolderError, StrategySelectionError or RuleFileError before any work when the inputs
    are unusable.
    ``on_program`` is called in this process with each program's result as it arrives."""
    execution = execution or Execution()
    start = time.perf_counter()
    sources = select_programs(list(config.programs), count=config.count, size=config.size,
                              dtype=config.dtype, seed=config.seed, dtypes=config.dtypes)
    if not sources:
        raise SourceError("no programs selected")
    if config.split is not None:
        refuse_leaks_early(sources, config, execution.program_timeout)
    folder = OutputFolder(execution.out)
    done = folder.start(run_identity(config, sources), execution.resume, execution.overwrite,
                        input_files(sources, config.rules))
    try:
        size = config.shard_size
        shard_of = {i: i // size for i in range(len(sources))}
        members: dict[int, list[int]] = {}
        for i, n in shard_of.items():
            members.setdefault(n, []).append(i)
        tasks = [(i, s.to_dict()) for i, s in enumerate(sources) if shard_of[i] not in done]
        progress = _Progress(len(sources), folder.programs() if done else [], execution.quiet)
        buffers: dict[int, dict[int, dict]] = {}
        counts = Counter()
        run = executor(execution.executor, execution.workers, config.to_dict(),
                       execution.ray_address, execution.program_timeout)
        try:
            for index, result in run.run(tasks):
                folder.check_held()   # --out removed: stop now, not at the shard's write
                n = shard_of[index]
                buffers.setdefault(n, {})[index] = result
                counts["programs"] += 1
                counts["transitions"] += len(result["records"])
                counts["verified"] += sum(r["verified"] for r in result["records"])
                counts["failures"] += len(result["failures"])
                progress.update(result)
                if on_program is not None:
                    on_program(result)
                if len(buffers[n]) == len(members[n]):
                    folder.write_shard(n, [buffers[n][i] for i in members[n]])
                    del buffers[n]
        finally:
            progress.close()
        summary, files = finalize(folder, config)
        return BuildResult(folder.root, summary, time.perf_counter() - start, counts["programs"],
                           counts["transitions"], counts["verified"], counts["failures"], files)
    finally:
        folder.close()  # the lock on --out, held from start to end


def refuse_leaks_early(sources, config: DatasetConfig, timeout: float | None) -> None:
    """Load every selected program (the frontend alone, each within ``timeout`` seconds) and
    refuse a split leak (``splits.SplitLeakError``) before the output folder is touched or any
    program is enumerated: the check ``finalize`` repeats on the finished shards, done first.
    A program that does not load is left to the pipeline, which records why."""
    from ..outside import OutsideInputError, bounded
    from .sources import FrontendFailure, load_program
    summaries = []
    for src in sources:
        try:
            program = (load_program(src) if timeout is None else
                       bounded(lambda: load_program(src), timeout, "loading took too long"))
        except (FrontendFailure, OutsideInputError):
            continue
        summaries.append({"program_id": src.program_id, "program": src.name,
                          "leir": program.text})
    checked_splits(summaries, config)


def finalize(folder: OutputFolder, config: DatasetConfig) -> tuple[dict[str, Any], list[str]]:
    """Balancing, chat sets (per variant and split), failures, summary, report and plots from
    the complete shards. Raises ``splits.SplitLeakError`` before writing any of them when a
    split leaks."""
    import polars as pl

    programs, failures = folder.programs(), folder.failures()
    paths = folder.dictionary_paths()
    frame = pl.scan_parquet(paths) if paths else None
    variants = config.variant_list()
    columns = _TRAINING_COLUMNS + (("before_tir", "after_tir")
                                   if any(v.representation == "tir" for v in variants) else ())
    levels: Counter = Counter()
    verified: list[dict[str, Any]] = []
    if frame is not None:
        levels.update(dict(frame.group_by("level").len().collect().iter_rows()))
        verified = (frame.filter(pl.col("verified")).select(columns).collect().to_dicts())
    split_of = program_splits(programs, config)
    written: dict[str, bytes] = {}
    if config.split is not None:
        forms = check_leaks(programs, {p["program"]: split_of[p["program_id"]]
                                       for p in programs})
        written["splits.json"] = _json(split_file(programs, split_of, forms, config))
        for split in sorted(set(split_of.values()), key=ALL_SPLITS.index):
            written[f"cases/{split}.jsonl"] = jsonl_bytes(
                test_case(p, split) for p in programs
                if split_of[p["program_id"]] == split and p["status"] == "ok")
    by_split: dict[str | None, list[dict[str, Any]]] = {}
    for r in verified:
        by_split.setdefault(split_of[r["program_id"]], []).append(r)
    chat_counts: dict[str, dict[str, Any]] = {}
    present = sorted(set(split_of.values()), key=lambda s: ALL_SPLITS.index(s) if s else -1)
    base_split = "train" if config.split is not None else None
    base: tuple[list, list, list] = ([], [], [])   # the report's balancing table's data
    for variant in variants:
        policy = BalancePolicy(config.seed, config.easy_simplify_keep, config.easy_expand_keep,
                               config.medium_cap, config.multi_max_answers,
                               config.multi_max_entries, variant.filter)
        for split in present or [None]:
            records = by_split.get(split, [])
            single = balance_single(records, policy)
            multi = balance_multi(records, policy)
            where = {k: v for k, v in (("split", split), ("variant", variant.name)) if v}
            prefix = "/".join(["chat", *(x for x in (variant.name, split) if x)])
            rep, cot = variant.representation, variant.cot
            written[f"{prefix}/single.jsonl"] = jsonl_bytes(single_example(r, rep, cot)
                                                            for r in single)
            written[f"{prefix}/single.meta.jsonl"] = jsonl_bytes(single_meta(r, **where)
                                                                 for r in single)
            written[f"{prefix}/multi.jsonl"] = jsonl_bytes(multi_example(e, rep, cot)
                                                           for e in multi)
            written[f"{prefix}/multi.meta.jsonl"] = jsonl_bytes(multi_meta(e, **where)
                                                                for e in multi)
            chat_counts[prefix] = chat_count(variant, split, records, single, multi)
            if variant is variants[0] and split == base_split:
                base = (records, single, multi)
    written["failures.jsonl"] = jsonl_bytes(failures)
    # The report's balancing table: the first variant, on the training data when split.
    table = balance_table(*base)
    single, multi = base[1], base[2]
    summary = summarize(programs, failures, levels, table, len(single), len(multi))
    summary["chat"] = chat_counts
    if config.split is not None:
        summary["splits"] = split_table(programs, split_of, verified)
    summary["tokens"], token_rows = dataset_tokens(paths)
    speedups: dict[str, list[float]] = {}
    if config.timing:
        for r in verified:
            if r["speedup"] is not None:
                speedups.setdefault(r["strategy"], []).append(r["speedup"])
    written["summary.json"] = _json(summary)
    written["report.md"] = write_report(config.to_dict(), summary, failures,
                                        speedups).encode()
    for name, data in plots(table, token_rows).items():
        written[f"plots/{name}"] = data
    folder.write_many(written)
    files = ["dictionary/part-*.parquet", "dictionary/part-*.jsonl", *written]
    return summary, files


def _json(data: Any) -> bytes:
    return (json.dumps(data, indent=1) + "\n").encode()


def program_splits(programs: list[dict[str, Any]], config: DatasetConfig
                   ) -> dict[str, str | None]:
    """program_id -> split (None for every program of a run without ``--split``)."""
    if config.split is None:
        return {p["program_id"]: None for p in programs}
    kinds = kind_splits(programs, config.seed, config.split, config.hold_steptp,
                        config.merge_equal_kinds)
    return {p["program_id"]: kinds[p["program"]] for p in programs}


class _Progress:
    """A tqdm bar over programs with running counts; silent when ``quiet``."""

    def __init__(self, total: int, finished: list[dict[str, Any]], quiet: bool):
        self.counts = Counter()
        for p in finished:
            self._count(p, None)
        self.bar = None
        if not quiet:
            from tqdm import tqdm
            self.bar = tqdm(total=total, initial=len(finished), unit="program", file=sys.stderr,
                            dynamic_ncols=True, smoothing=0.1)
            self._show()

    def _count(self, program: dict[str, Any], failures: int | None) -> None:
        self.counts["transitions"] += program["selected"] if program["status"] == "ok" else 0
        self.counts["verified"] += program["verified"]
        self.counts["failed programs"] += program["status"] != "ok"
        if failures is not None:
            self.counts["failures"] += failures

    def update(self, result: dict[str, Any]) -> None:
        self._count(result["program"], len(result["failures"]))
        if self.bar is not None:
            self.bar.update(1)
            self._show()

    def _show(self) -> None:
        c = self.counts
        self.bar.set_postfix_str(f"transitions={c['transitions']} verified={c['verified']} "
                                 f"failed={c['failures']} (programs {c['failed programs']})",
                                 refresh=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
