"""The output folder: shards written atomically, read back for the final files and resume.

Programs are numbered in selection order and cut into shards of ``shard_size``; shard ``n``
holds programs ``n*shard_size ...`` whatever order they finished in, so its bytes never depend
on the worker count. A shard is four files::

    dictionary/part-NNNNN.parquet   the records (fixed schema, records.SCHEMA)
    dictionary/part-NNNNN.jsonl     the same records as JSON lines
    failures/part-NNNNN.jsonl       failure rows
    programs/part-NNNNN.jsonl       one summary per program -- written last: it marks the
                                    shard complete

Every file is written to a temporary name in the same folder, fsynced, renamed over its final
name and the folder fsynced, so a file is either complete or absent; a kill between two files
leaves a shard without its marker, which ``--resume`` rewrites from scratch.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from .records import frame, jsonl_bytes, parquet_bytes, read_jsonl

RUN_FILE = "run.json"
SHARD_DIRS = ("dictionary", "failures", "programs")
FINAL_OUTPUTS = ("chat", "plots", "report.md", "summary.json", "failures.jsonl")


class ResumeError(ValueError):
    """``--resume`` on a folder written with different settings, or with no run in it."""


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that ``path`` is never seen half-written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def shard_name(n: int) -> str:
    return f"part-{n:05d}"


class OutputFolder:
    """The run's folder: its ``run.json``, its shards and its final files."""

    def __init__(self, root: Path):
        self.root = Path(root)

    # ---------------------------------------------------------------- run identity

    def start(self, run: dict[str, Any], resume: bool) -> set[int]:
        """Begin a run (clearing this tool's earlier outputs) or resume one; returns the
        shards already complete."""
        path = self.root / RUN_FILE
        text = json.dumps(run, indent=1, sort_keys=True) + "\n"
        if resume:
            if not path.exists():
                raise ResumeError(f"--resume: {path} does not exist; start without --resume")
            old = json.loads(path.read_text())
            if old != run:
                changed = sorted(k for k in set(old) | set(run) if old.get(k) != run.get(k))
                raise ResumeError(f"--resume: {self.root} was written with different settings "
                                  f"({', '.join(changed)} differ); use the same options, or a "
                                  "new --out folder")
            self._remove_temporaries()
            return self.complete_shards()
        self.clear()
        atomic_write(path, text.encode())
        return set()

    def clear(self) -> None:
        """Remove what an earlier run of this tool wrote here (and nothing else)."""
        for name in (RUN_FILE, *SHARD_DIRS, *FINAL_OUTPUTS):
            p = self.root / name
            if p.is_dir():
                shutil.rmtree(p)
            elif p.exists():
                p.unlink()

    def _remove_temporaries(self) -> None:
        for sub in ("", *SHARD_DIRS, "chat", "plots"):
            folder = self.root / sub
            if folder.is_dir():
                for p in folder.glob(".*.tmp-*"):
                    p.unlink()

    # ---------------------------------------------------------------- shards

    def complete_shards(self) -> set[int]:
        folder = self.root / "programs"
        if not folder.is_dir():
            return set()
        return {int(p.stem.split("-")[1]) for p in folder.glob("part-*.jsonl")}

    def write_shard(self, n: int, results: list[dict[str, Any]]) -> None:
        """``results`` in program order; the programs file goes last (the completion mark)."""
        name = shard_name(n)
        records = [r for res in results for r in res["records"]]
        atomic_write(self.root / "dictionary" / f"{name}.parquet", parquet_bytes(frame(records)))
        atomic_write(self.root / "dictionary" / f"{name}.jsonl", jsonl_bytes(records))
        atomic_write(self.root / "failures" / f"{name}.jsonl",
                     jsonl_bytes(f for res in results for f in res["failures"]))
        atomic_write(self.root / "programs" / f"{name}.jsonl",
                     jsonl_bytes(res["program"] for res in results))

    def shard_files(self, kind: str, suffix: str) -> list[Path]:
        """Complete shards' files of one kind, in shard order."""
        return [self.root / kind / f"{shard_name(n)}.{suffix}" for n in sorted(self.complete_shards())]

    def programs(self) -> list[dict[str, Any]]:
        return [p for f in self.shard_files("programs", "jsonl") for p in read_jsonl(f)]

    def failures(self) -> list[dict[str, Any]]:
        return [p for f in self.shard_files("failures", "jsonl") for p in read_jsonl(f)]

    def dictionary_paths(self) -> list[Path]:
        return self.shard_files("dictionary", "parquet")
