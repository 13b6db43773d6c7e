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
file is listed *before* it is written; once written, its SHA-256 is recorded beside it. A new
run removes exactly the files of the previous run's manifest -- never anything else -- and
refuses a non-empty folder without a manifest (one this tool did not create) unless
``overwrite``; it also refuses to start when one of its own inputs lies where it would write or
remove files. ``--resume`` keeps a shard only when each of its four files has the checksum the
manifest recorded; a damaged or missing file makes the shard be redone.

One writer at a time: a run holds ``.leir-lock`` (an exclusive ``flock``; the file says the
holder's pid and start time) from start to end, and a second run on the same folder is refused
with a line naming them. The kernel drops the lock of a process that dies, so the lock of a
killed run is taken over by the next. A run whose folder is removed or replaced while it runs
stops with an error rather than reporting files that no longer exist.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any, Iterable

from .records import frame, jsonl_bytes, parquet_bytes, read_jsonl

RUN_FILE = "run.json"
MANIFEST = ".leir-manifest.json"
LOCK = ".leir-lock"
SHARD_DIRS = ("dictionary", "failures", "programs")
# Every top-level name this tool writes under --out (inputs there are refused).
LAYOUT = (RUN_FILE, MANIFEST, LOCK, *SHARD_DIRS, "chat", "plots", "report.md", "summary.json",
          "failures.jsonl", "splits.json", "cases", "trajectories")
_WRITER = "python -m leir_egraph.sample"


class ResumeError(ValueError):
    """``--resume`` on a folder written with different settings, or with no run in it."""


class OutputFolderError(ValueError):
    """An output folder this run must not write into (not ours, or holding its inputs)."""


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that ``path`` is never seen half-written; a failed write
    (a full disk) leaves no temporary behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temporary(path, os.getpid())
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise
    _fsync_dir(path.parent)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _file_sha256(path: Path) -> str | None:
    """The SHA-256 of a file's bytes, or None when it cannot be read."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


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


class FolderLock:
    """The one-writer lock of an output folder (module docstring)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.path = self.root / LOCK
        self._fd: int | None = None
        self._made_root = False

    def acquire(self) -> None:
        if self.root.exists() and not self.root.is_dir():
            raise OutputFolderError(f"--out {self.root}: exists and is not a folder")
        if not self.root.exists():
            self.root.mkdir(parents=True)
            self._made_root = True
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder(fd)
                os.close(fd)
                raise OutputFolderError(
                    f"--out {self.root}: another run is writing there ({holder}); wait for it "
                    "to end or choose another --out") from None
            try:   # the holder before us may have removed the file as we opened it
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        self._fd = fd
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        try:
            os.ftruncate(fd, 0)
            os.write(fd, (json.dumps({"pid": os.getpid(), "started": started}) + "\n").encode())
            os.fsync(fd)
        except OSError:   # a full disk: leave nothing behind
            self.release()
            raise

    def held(self) -> bool:
        """Whether the folder is still the one this lock was taken in (not removed, not
        replaced)."""
        if self._fd is None:
            return False
        try:
            return os.fstat(self._fd).st_ino == os.stat(self.path).st_ino
        except OSError:
            return False

    def release(self) -> None:
        if self._fd is None:
            return
        if self.held():
            self.path.unlink()
            if self._made_root and not any(self.root.iterdir()):
                self.root.rmdir()
        os.close(self._fd)   # closing drops the flock
        self._fd = None


def _holder(fd: int) -> str:
    """``pid N, started T`` of a lock file's holder, as far as its file says."""
    try:
        data = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
        return f"pid {int(data['pid'])}, started {data['started']}"
    except (ValueError, KeyError, TypeError, OSError):
        return "its pid is not recorded yet"


class OutputFolder:
    """The run's folder: its lock, its manifest, its ``run.json``, its shards and its final
    files."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self._files: set[str] = set()  # the manifest: relative POSIX paths this run wrote
        self._sums: dict[str, str] = {}  # their SHA-256, once written
        self._complete: set[int] = set()
        self.redone: list[int] = []    # shards a resume found damaged
        self.lock = FolderLock(self.root)

    def close(self) -> None:
        """Release the folder (the end of the run, or its failure)."""
        self.lock.release()

    # ---------------------------------------------------------------- run identity

    def start(self, run: dict[str, Any], resume: bool, overwrite: bool = False,
              inputs: Iterable[Path] = ()) -> set[int]:
        """Take the folder's lock, then begin a run or resume one; returns the shards already
        complete (every file present with its recorded checksum).

        A new run removes the files of the previous run's manifest (and nothing else). Raises
        OutputFolderError for a folder another run holds, a non-empty folder without a
        manifest (unless ``overwrite``) or when one of ``inputs`` (files this run reads) lies
        where it writes or removes. On an error the lock is released again."""
        self.lock.acquire()
        try:
            return self._start(run, resume, overwrite, inputs)
        except BaseException:
            self.close()
            raise

    def _start(self, run, resume, overwrite, inputs) -> set[int]:
        previous = self._read_manifest()
        self._refuse_inputs_inside(inputs, set(previous or {}))
        path = self.root / RUN_FILE
        text = json.dumps(run, indent=1, sort_keys=True) + "\n"
        if resume:
            if previous is None or RUN_FILE not in previous or not path.exists():
                raise ResumeError(f"--resume: {self.root} holds no run of this tool "
                                  f"({RUN_FILE} and {MANIFEST} are missing); start without "
                                  "--resume")
            self._files, self._sums = set(previous), {
                k: v for k, v in previous.items() if v is not None}
            old = self._read_run(path)
            if old != run:
                changed = sorted(k for k in set(old) | set(run) if old.get(k) != run.get(k))
                raise ResumeError(f"--resume: {self.root} was written with different settings "
                                  f"({', '.join(changed)} differ); use the same options, or a "
                                  "new --out folder")
            self._remove_temporaries()
            self._complete = self._valid_shards()
            return set(self._complete)
        if previous is None and not overwrite and self._foreign_entries():
            raise OutputFolderError(
                f"--out {self.root}: the folder is not empty and was not written by this tool "
                f"(no {MANIFEST}); choose a new or empty folder, or pass --overwrite (files of "
                "this tool's names are replaced, nothing is removed)")
        self._files = set(previous or {})
        self._remove_temporaries()
        self._remove(set(previous or {}))
        self._files, self._sums, self._complete = set(), {}, set()
        self.write(RUN_FILE, text.encode())
        return set()

    def _read_run(self, path: Path) -> dict[str, Any]:
        """The resumed run's ``run.json``, checked against its recorded checksum."""
        try:
            data = path.read_bytes()
            want = self._sums.get(RUN_FILE)
            if want is not None and sha256(data) != want:
                raise ValueError("checksum")
            old = json.loads(data)
            if not isinstance(old, dict):
                raise ValueError("not an object")
        except (OSError, ValueError):
            raise ResumeError(f"--resume: {path} is damaged (it does not hold what this tool "
                              "wrote there); start again without --resume") from None
        return old

    def _foreign_entries(self) -> list[Path]:
        """What the folder holds besides this tool's lock and its temporaries."""
        if not self.root.is_dir():
            return []
        return [p for p in self.root.iterdir() if p.name != LOCK and not _is_temporary(p.name)]

    def _read_manifest(self) -> dict[str, str | None] | None:
        """The previous run's files (relative paths) with their checksums (None: not
        recorded, the file may be partial), or None when there is no manifest."""
        path = self.root / MANIFEST
        if not path.is_file():
            return None
        try:
            data = json.loads(path.read_text())
            files = set(data["files"])
            sums = data.get("sha256", {})
            if not isinstance(sums, dict):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            raise OutputFolderError(f"{path}: unreadable manifest; this folder's files cannot "
                                    "be told apart from others -- choose another --out") from None
        # A manifest lists relative paths inside the folder: anything else is not ours to touch.
        return {f: (sums.get(f) if isinstance(sums.get(f), str) else None)
                for f in files if isinstance(f, str) and _inside(f)}

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
        """Leftovers of a killed or failed run: temporaries of the files its manifest names
        and of the top-level files of the layout (the manifest's own included)."""
        names = set(self._files) | {RUN_FILE, MANIFEST}
        for rel in names:
            path = self.root / rel
            if path.parent.is_dir():
                for tmp in path.parent.glob(_temporary(path, "*").name):
                    tmp.unlink()

    def _valid_shards(self) -> set[int]:
        """Shards whose four files are all listed with a checksum that their bytes match; the
        others are redone (``redone``), their completion mark removed first."""
        marked = set()
        for rel in self._files:
            parts = rel.split("/")
            if (len(parts) == 2 and parts[0] == "programs" and parts[1].startswith("part-")
                    and parts[1].endswith(".jsonl")):
                try:
                    marked.add(int(parts[1][len("part-"):-len(".jsonl")]))
                except ValueError:
                    continue
        good = set()
        for n in sorted(marked):
            files = _shard_files(n)
            if all(self._sums.get(rel) is not None
                   and _file_sha256(self.root / rel) == self._sums[rel] for rel in files):
                good.add(n)
                continue
            self.redone.append(n)
            marker = self.root / files[-1]
            if marker.is_file():
                marker.unlink()
            for rel in files:
                self._sums.pop(rel, None)
        return good

    # ---------------------------------------------------------------- writing

    def check_held(self) -> None:
        """Raise OutputFolderError when the folder was removed or replaced since the run took
        it (its lock file is no longer the one the run holds): checked before every write and
        as each program's result arrives, so a removal is noticed within one program."""
        if not self.lock.held():
            raise OutputFolderError(
                f"--out {self.root}: the folder was removed or replaced while this run was "
                "writing it (the files written so far went with it); run again")

    def write(self, rel: str, data: bytes) -> None:
        """Write one file of the layout (recorded in the manifest before it exists)."""
        self.write_many({rel: data})

    def write_many(self, files: dict[str, bytes]) -> None:
        """Record ``files`` in the manifest, then write each atomically, in the given order,
        then record their checksums. Raises OutputFolderError when the folder was removed or
        replaced since the run took it."""
        self.check_held()
        new = set(files) - self._files
        if new or any(rel in self._sums for rel in files):
            self._files |= new
            for rel in files:
                self._sums.pop(rel, None)
            self._write_manifest()
        for rel, data in files.items():
            atomic_write(self.root / rel, data)
        for rel, data in files.items():
            self._sums[rel] = sha256(data)
        self._write_manifest()

    def _write_manifest(self) -> None:
        body = {"written_by": _WRITER, "files": sorted(self._files),
                "sha256": {k: self._sums[k] for k in sorted(self._sums)}}
        atomic_write(self.root / MANIFEST, (json.dumps(body, indent=0) + "\n").encode())

    def kept(self, rel: str) -> bytes | None:
        """The bytes of ``rel`` when the resumed run wrote it whole -- listed in the manifest
        with a checksum its bytes match -- else None (the file is to be made again). A new run
        keeps nothing."""
        want = self._sums.get(rel)
        if want is None:
            return None
        try:
            data = (self.root / rel).read_bytes()
        except OSError:
            return None
        return data if sha256(data) == want else None

    # ---------------------------------------------------------------- shards

    def complete_shards(self) -> set[int]:
        """Shards complete in this folder: kept by the resume (checksums matched) or written
        by this run."""
        return set(self._complete)

    def write_shard(self, n: int, results: list[dict[str, Any]]) -> None:
        """``results`` in program order; the programs file goes last (the completion mark)."""
        records = [r for res in results for r in res["records"]]
        data = (parquet_bytes(frame(records)), jsonl_bytes(records),
                jsonl_bytes(f for res in results for f in res["failures"]),
                jsonl_bytes(res["program"] for res in results))
        self.write_many(dict(zip(_shard_files(n), data)))
        self._complete.add(n)

    def shard_files(self, kind: str, suffix: str) -> list[Path]:
        """Complete shards' files of one kind, in shard order."""
        return [self.root / kind / f"{shard_name(n)}.{suffix}" for n in sorted(self.complete_shards())]

    def programs(self) -> list[dict[str, Any]]:
        return [p for f in self.shard_files("programs", "jsonl") for p in read_jsonl(f)]

    def failures(self) -> list[dict[str, Any]]:
        return [p for f in self.shard_files("failures", "jsonl") for p in read_jsonl(f)]

    def dictionary_paths(self) -> list[Path]:
        return self.shard_files("dictionary", "parquet")


def _shard_files(n: int) -> tuple[str, str, str, str]:
    """A shard's four files, its completion mark last."""
    name = shard_name(n)
    return (f"dictionary/{name}.parquet", f"dictionary/{name}.jsonl",
            f"failures/{name}.jsonl", f"programs/{name}.jsonl")


def _is_temporary(name: str) -> bool:
    """A temporary name of :func:`atomic_write` for one of the layout's top-level files."""
    return any(name.startswith(f".{top}.tmp-") for top in LAYOUT)


def _inside(rel: str) -> bool:
    """A relative path that stays inside the folder (no absolute paths, no '..')."""
    p = Path(rel)
    return bool(rel) and not p.is_absolute() and ".." not in p.parts
