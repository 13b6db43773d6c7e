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

The folder's manifest (``.leir-manifest.json``) lists every file this tool wrote there, and a
file is listed *before* it is written. A new run removes exactly the files of the previous
run's manifest -- never anything else -- and refuses a non-empty folder without a manifest
(one this tool did not create) unless ``overwrite``; it also refuses to start when one of its
own inputs lies where it would write or remove files.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable

from .records import frame, jsonl_bytes, parquet_bytes, read_jsonl

RUN_FILE = "run.json"
MANIFEST = ".leir-manifest.json"
SHARD_DIRS = ("dictionary", "failures", "programs")
# Every top-level name this tool writes under --out (inputs there are refused).
LAYOUT = (RUN_FILE, MANIFEST, *SHARD_DIRS, "chat", "plots", "report.md", "summary.json",
          "failures.jsonl", "splits.json", "cases", "trajectories")
_WRITER = "python -m leir_egraph.sample"


class ResumeError(ValueError):
    """``--resume`` on a folder written with different settings, or with no run in it."""


class OutputFolderError(ValueError):
    """An output folder this run must not write into (not ours, or holding its inputs)."""


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that ``path`` is never seen half-written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temporary(path, os.getpid())
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _temporary(path: Path, pid: int | str) -> Path:
    return path.with_name(f".{path.name}.tmp-{pid}")


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def shard_name(n: int) -> str:
    return f"part-{n:05d}"


class OutputFolder:
    """The run's folder: its manifest, its ``run.json``, its shards and its final files."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self._files: set[str] = set()  # the manifest: relative POSIX paths this run wrote

    # ---------------------------------------------------------------- run identity

    def start(self, run: dict[str, Any], resume: bool, overwrite: bool = False,
              inputs: Iterable[Path] = ()) -> set[int]:
        """Begin a run or resume one; returns the shards already complete.

        A new run removes the files of the previous run's manifest (and nothing else). Raises
        OutputFolderError for a non-empty folder without a manifest (unless ``overwrite``) or
        when one of ``inputs`` (files this run reads) lies where it writes or removes."""
        if self.root.exists() and not self.root.is_dir():
            raise OutputFolderError(f"--out {self.root}: exists and is not a folder")
        previous = self._read_manifest()
        self._refuse_inputs_inside(inputs, previous or set())
        path = self.root / RUN_FILE
        text = json.dumps(run, indent=1, sort_keys=True) + "\n"
        if resume:
            if previous is None or RUN_FILE not in previous or not path.exists():
                raise ResumeError(f"--resume: {self.root} holds no run of this tool "
                                  f"({RUN_FILE} and {MANIFEST} are missing); start without "
                                  "--resume")
            old = json.loads(path.read_text())
            if old != run:
                changed = sorted(k for k in set(old) | set(run) if old.get(k) != run.get(k))
                raise ResumeError(f"--resume: {self.root} was written with different settings "
                                  f"({', '.join(changed)} differ); use the same options, or a "
                                  "new --out folder")
            self._files = set(previous)
            self._remove_temporaries()
            return self.complete_shards()
        if previous is None and not overwrite and self.root.is_dir() and any(self.root.iterdir()):
            raise OutputFolderError(
                f"--out {self.root}: the folder is not empty and was not written by this tool "
                f"(no {MANIFEST}); choose a new or empty folder, or pass --overwrite (files of "
                "this tool's names are replaced, nothing is removed)")
        self._remove(previous or set())
        self._files = set()
        self.write(RUN_FILE, text.encode())
        return set()

    def _read_manifest(self) -> set[str] | None:
        path = self.root / MANIFEST
        if not path.is_file():
            return None
        try:
            data = json.loads(path.read_text())
            files = set(data["files"])
        except (ValueError, KeyError, TypeError):
            raise OutputFolderError(f"{path}: unreadable manifest; this folder's files cannot "
                                    "be told apart from others -- choose another --out") from None
        # A manifest lists relative paths inside the folder: anything else is not ours to touch.
        return {f for f in files if isinstance(f, str) and _inside(f)}

    def _refuse_inputs_inside(self, inputs: Iterable[Path], previous: set[str]) -> None:
        root = self.root.resolve()
        for path in inputs:
            try:
                rel = Path(path).resolve().relative_to(root)
            except ValueError:
                continue
            if rel.parts and (rel.parts[0] in LAYOUT or rel.as_posix() in previous):
                raise OutputFolderError(
                    f"input {path} lies in --out {self.root} where this run writes or removes "
                    "files; move it out of that folder or choose another --out")

    def _remove(self, files: set[str]) -> None:
        """Remove exactly ``files`` (the previous manifest), then the folders of the layout
        that this leaves empty."""
        for rel in sorted(files):
            path = self.root / rel
            if path.is_file() or path.is_symlink():
                path.unlink()
        folders = sorted({(self.root / rel).parent for rel in files}, key=lambda p: -len(p.parts))
        for folder in folders:
            if folder != self.root and folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
        manifest = self.root / MANIFEST
        if manifest.exists():
            manifest.unlink()

    def _remove_temporaries(self) -> None:
        """Leftovers of a killed run: temporaries of the files its manifest names."""
        for rel in self._files:
            path = self.root / rel
            for tmp in path.parent.glob(_temporary(path, "*").name):
                tmp.unlink()

    # ---------------------------------------------------------------- writing

    def write(self, rel: str, data: bytes) -> None:
        """Write one file of the layout (recorded in the manifest before it exists)."""
        self.write_many({rel: data})

    def write_many(self, files: dict[str, bytes]) -> None:
        """Record ``files`` in the manifest, then write each atomically, in the given order."""
        new = set(files) - self._files
        if new:
            self._files |= new
            body = {"written_by": _WRITER, "files": sorted(self._files)}
            atomic_write(self.root / MANIFEST, (json.dumps(body, indent=0) + "\n").encode())
        for rel, data in files.items():
            atomic_write(self.root / rel, data)

    # ---------------------------------------------------------------- shards

    def complete_shards(self) -> set[int]:
        """Shards whose completion mark this run (or the run it resumes) wrote."""
        out = set()
        for rel in self._files:
            parts = rel.split("/")
            if (len(parts) == 2 and parts[0] == "programs" and parts[1].startswith("part-")
                    and parts[1].endswith(".jsonl") and (self.root / rel).is_file()):
                out.add(int(parts[1][len("part-"):-len(".jsonl")]))
        return out

    def write_shard(self, n: int, results: list[dict[str, Any]]) -> None:
        """``results`` in program order; the programs file goes last (the completion mark)."""
        name = shard_name(n)
        records = [r for res in results for r in res["records"]]
        self.write_many({
            f"dictionary/{name}.parquet": parquet_bytes(frame(records)),
            f"dictionary/{name}.jsonl": jsonl_bytes(records),
            f"failures/{name}.jsonl": jsonl_bytes(f for res in results for f in res["failures"]),
            f"programs/{name}.jsonl": jsonl_bytes(res["program"] for res in results),
        })

    def shard_files(self, kind: str, suffix: str) -> list[Path]:
        """Complete shards' files of one kind, in shard order."""
        return [self.root / kind / f"{shard_name(n)}.{suffix}" for n in sorted(self.complete_shards())]

    def programs(self) -> list[dict[str, Any]]:
        return [p for f in self.shard_files("programs", "jsonl") for p in read_jsonl(f)]

    def failures(self) -> list[dict[str, Any]]:
        return [p for f in self.shard_files("failures", "jsonl") for p in read_jsonl(f)]

    def dictionary_paths(self) -> list[Path]:
        return self.shard_files("dictionary", "parquet")


def _inside(rel: str) -> bool:
    """A relative path that stays inside the folder (no absolute paths, no '..')."""
    p = Path(rel)
    return bool(rel) and not p.is_absolute() and ".." not in p.parts
