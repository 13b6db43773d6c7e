"""Where programs come from: zoo selectors, PyTorch files, LEIR files, LEIR corpora.

A :class:`ProgramSource` is plain data (it travels to worker processes and Ray tasks); turning
it into a :class:`~leir_egraph.leir.Program` (:func:`load_program`) is part of the per-program
work, so a frontend failure is recorded like any other failure.

Selectors accepted by :func:`select_programs`:

* a zoo kind name (``ReLU``), a glob over kind names (``Gemm_*``), ``level1:*``/``level2:Conv*``
  (a glob within a level), ``family:attention`` (a zoo family), ``*`` (the whole zoo), and
  ``composed`` (programs drawn by the zoo's seeded composer): each gives ``count`` instances
  with instancing seeds ``seed, seed+1, ...``;
* ``path/to/model.py``: a PyTorch module file, KernelBench style (``Model``, ``get_inputs()``,
  ``get_init_inputs()``) or ``model``/``Model`` with ``example_inputs``/``get_inputs()``;
* ``path/to/prog.leir`` with its signature in ``path/to/prog.sig.json``;
* ``path/to/corpus.jsonl``: one program per line with ``leir``, ``signature`` and ``name``
  (the format of the shared golden/reference corpora);
* a directory: every ``.leir``, ``.py`` and ``.jsonl`` file in it, sorted by name.
"""

from __future__ import annotations

import fnmatch
import json
import runpy
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..leir.files import LeirFileError, read_program, read_signature, read_text
from ..leir.program import Program


class SourceError(ValueError):
    """A selector that names nothing, or a file that cannot be used as a program source."""


@dataclass(frozen=True)
class ProgramSource:
    """One program to process. ``kind`` is ``zoo``, ``composed``, ``py``, ``leir`` or ``jsonl``;
    ``ref`` is the zoo kind or the file path; ``line`` the corpus line (jsonl only)."""
    program_id: str
    name: str
    kind: str
    ref: str
    seed: int
    size: str = "small"
    dtype: str = "f32"
    line: int = -1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "ProgramSource":
        return ProgramSource(**d)

    def files(self) -> tuple[Path, ...]:
        """The user files this source reads (none for zoo programs)."""
        if self.kind == "leir":
            return (Path(self.ref), _signature_file(Path(self.ref)))
        if self.kind in ("py", "jsonl"):
            return (Path(self.ref),)
        return ()


def select_programs(selectors: list[str], *, count: int = 1, size: str = "small",
                    dtype: str = "f32", seed: int = 0, dtypes: tuple[str, ...] = ()
                    ) -> list[ProgramSource]:
    """Expand selectors into sources, in selector order (each zoo selector once per dtype of
    ``dtypes``, or ``dtype`` alone); duplicates are dropped, later same-named file programs
    get ``-2``, ``-3`` suffixes so every ``program_id`` is unique."""
    out: list[ProgramSource] = []
    seen: set[tuple] = set()
    used_ids: dict[str, int] = {}

    def add(src: ProgramSource):
        key = (src.kind, src.ref, src.seed, src.size, src.dtype, src.line)
        if key in seen:
            return
        seen.add(key)
        pid = src.program_id
        if pid in used_ids:
            used_ids[pid] += 1
            pid = f"{pid}-{used_ids[src.program_id]}"
        used_ids.setdefault(pid, 1)
        out.append(ProgramSource(pid, src.name, src.kind, src.ref, src.seed, src.size,
                                 src.dtype, src.line))

    for selector in selectors:
        for dt in dtypes or (dtype,):
            for src in _expand(selector, count, size, dt, seed):
                add(src)
    return out


def _expand(selector: str, count: int, size: str, dtype: str, seed: int) -> list[ProgramSource]:
    path = Path(selector)
    if path.suffix in (".py", ".leir", ".jsonl") or path.is_dir():
        return _files(path, seed)
    from ..workloads import families, zoo

    if selector == "composed":
        return [ProgramSource(f"composed-{size}-{dtype}-s{seed + i}", "composed", "composed",
                              "composed", seed + i, size, dtype) for i in range(count)]
    if selector.startswith("family:"):
        name = selector.split(":", 1)[1]
        kinds = families().get(name)
        if not kinds:
            raise SourceError(f"no zoo family '{name}'; families: {', '.join(sorted(families()))}")
    elif ":" in selector and selector.split(":", 1)[0] in ("level1", "level2"):
        level, pattern = selector.split(":", 1)
        kinds = [k for k in zoo(level=int(level[-1])) if fnmatch.fnmatchcase(k, pattern or "*")]
    else:
        kinds = [k for k in zoo() if fnmatch.fnmatchcase(k, selector)]
    if not kinds:
        raise SourceError(f"'{selector}' matches no zoo kind and is not a .py/.leir/.jsonl file "
                          f"or directory (zoo kinds: see leir_egraph.workloads.zoo())")
    return [ProgramSource(f"{k}-{size}-{dtype}-s{seed + i}", k, "zoo", k, seed + i, size, dtype)
            for k in kinds for i in range(count)]


def _files(path: Path, seed: int) -> list[ProgramSource]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix in (".py", ".leir", ".jsonl"))
        return [s for f in files for s in _files(f, seed)]
    if not path.is_file():
        raise SourceError(f"{path}: no such file")
    if path.suffix == ".leir":
        sig = _signature_file(path)
        if not sig.is_file():
            raise SourceError(f"{path}: the signature file {sig.name} is missing next to it")
        return [ProgramSource(path.stem, path.stem, "leir", str(path), seed)]
    if path.suffix == ".py":
        return [ProgramSource(path.stem, path.stem, "py", str(path), seed)]
    out = []
    for i, line in enumerate(read_text(path).splitlines()):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise SourceError(f"{path}:{i + 1}: not JSON: {err}") from None
        if not {"leir", "signature"} <= set(row):
            raise SourceError(f"{path}:{i + 1}: a corpus line needs 'leir' and 'signature'")
        name = str(row.get("name") or f"{path.stem}-{i + 1}")
        pid = str(row.get("id") or f"{path.stem}-{i + 1}")
        out.append(ProgramSource(pid, name, "jsonl", str(path), seed, line=i))
    return out


def _signature_file(path: Path) -> Path:
    return path.with_name(path.name[: -len(".leir")] + ".sig.json")


# ---------------------------------------------------------------- loading (worker side)

class FrontendFailure(Exception):
    """Wraps what went wrong turning a source into a Program, with the pipeline stage."""

    def __init__(self, stage: str, reason: str):
        self.stage, self.reason = stage, reason
        super().__init__(f"{stage}: {reason}")


def load_program(src: ProgramSource) -> Program:
    """Instantiate ``src`` as a Program; raises FrontendFailure (stage ``instantiate`` or
    ``frontend``) with a one-line reason."""
    if src.kind == "leir":
        path = Path(src.ref)
        try:  # the readers of `leir fmt`: UTF-8 (a BOM dropped), errors name the file
            return read_program(path, read_signature(_signature_file(path)), src.name)
        except LeirFileError as err:
            raise FrontendFailure("parse", str(err)) from None
    if src.kind == "jsonl":
        try:
            line = read_text(src.ref).splitlines()[src.line]
            row = json.loads(line)
            return Program.parse(row["leir"], row["signature"], src.name)
        except Exception as err:  # noqa: BLE001
            raise FrontendFailure("parse", _one_line(err)) from None
    module, inputs = _torch_program(src)
    from ..frontend import from_torch
    try:
        return from_torch(module, inputs, name=src.name)
    except Exception as err:  # noqa: BLE001 -- UnsupportedOp, TraceFailure, TranslationError
        raise FrontendFailure("frontend", _one_line(err)) from None


def _torch_program(src: ProgramSource):
    import torch

    try:
        if src.kind == "zoo":
            from ..workloads import instantiate
            module, inputs, _ = instantiate(src.ref, src.seed, size=src.size, dtype=src.dtype)
            return module, inputs
        if src.kind == "composed":
            from ..workloads import compose
            module, inputs, _ = compose(src.seed, size=src.size, dtype=src.dtype)
            return module, inputs
        # A user file: its weights and inputs come from torch's generator, seeded here so the
        # same file and seed always give the same program values.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(src.seed)
            scope = runpy.run_path(src.ref, run_name="leir_program")
            return _module_and_inputs(scope, src.ref)
    except FrontendFailure:
        raise
    except Exception as err:  # noqa: BLE001 -- the user's code or a zoo kind failing to build
        raise FrontendFailure("instantiate", _one_line(err)) from None


def _module_and_inputs(scope: dict, path: str):
    import torch

    if "model" in scope and isinstance(scope["model"], torch.nn.Module):
        module = scope["model"]
    elif "Model" in scope:
        init = scope["get_init_inputs"]() if "get_init_inputs" in scope else []
        module = scope["Model"](*init)
    else:
        raise FrontendFailure("instantiate", f"{path} defines neither 'Model' (a class) nor "
                                             "'model' (an nn.Module instance)")
    if "get_inputs" in scope:
        inputs = scope["get_inputs"]()
    elif "example_inputs" in scope:
        inputs = scope["example_inputs"]
    else:
        raise FrontendFailure("instantiate", f"{path} defines neither get_inputs() nor "
                                             "example_inputs")
    # The reference's convention (tests/data/README.md): batch statistics for modules with
    # BatchNorm, eval mode (no dropout) for all others.
    module.train(any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm)
                     for m in module.modules()))
    return module, tuple(inputs) if isinstance(inputs, (list, tuple)) else (inputs,)


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(err).__name__}: {first}" if first else type(err).__name__
