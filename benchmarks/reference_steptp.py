"""Run the Step-TP authors' reference strategies from a checkout the user gives, side by side
with ours. Nothing of the reference is vendored: ``--reference-dir`` points at a checkout of
github.com/LIUMENGFAN-gif/StepTP (commit 2bd4888 was studied, docs/REFERENCE.md), and this
module imports its ``strategies`` package from there and calls
``apply_<strategy>_to_IR`` exactly as its own ``apply_strategy_to_IR.py`` does.

Used by ``single_step_throughput.py --vs-reference`` and ``reference_recall.py``.

Two facts about the reference that decide how it must be called:

* it picks among variants with the global ``random`` module (e.g. one split factor per site),
  so every call is seeded here (``random.seed(seed)`` right before it);
* it iterates over ``list(set(...))`` of strings, whose order depends on the interpreter's hash
  seed, so its output differs between processes unless ``PYTHONHASHSEED`` is fixed.
  :func:`require_fixed_hash_seed` re-executes the calling script with ``PYTHONHASHSEED=0`` (or
  another fixed seed: ``reference_recall.py --hash-seed N`` measures against another of the
  reference's orders).

Its ``name_start_idx`` argument is the next free position in its tensor-name counter; we pass
one past the highest name the program uses (:func:`name_start_index`).
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import random
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from leir_egraph.leir.names import TENSOR_ALPHABET

#: The reference's strategies that are among the paper's 43 (it lacks
#: normal_matmul_to_prefix_matmul_based_on_online_softmax and adds dead_code_elimination).
SHARED_STRATEGIES = (
    "operator_fusion", "operator_fission", "compute_inline", "expression_splitting",
    "tensor_concat_to_fuse_operators", "tensor_split_to_decouple_operators",
    "common_subexpression_elimination", "expression_reorder", "loop_reorder", "loop_tiling",
    "loop_split", "loop_fusion", "loop_unrolling", "loop_parallelization", "loop_vectorization",
    "loop_binding", "reduction_factorization", "cache_read_write", "layout_transformation",
    "set_storage_scope", "set_storage_layout", "precompute_indices", "factorization",
    "expand_factorization", "cancellation", "expand_cancellation", "apart", "together",
    "powsimp", "expand_powsimp", "expand_log", "logsimp", "collect", "expand_collect",
    "partially_equivalent_then_correct", "normal_loop_max_to_prefix_max", "exponential_split",
    "multiplicative_split", "additive_split",
    "normal_loop_summation_on_exp_to_prefix_summation_on_exp", "online_softmax",
    "flashattention_wo_tiling")

#: The 12 strategies whose reference implementation calls sympy; the other 30 are "structural".
SYMPY_FAMILY = ("factorization", "expand_factorization", "cancellation", "expand_cancellation",
                "apart", "together", "powsimp", "expand_powsimp", "expand_log", "logsimp",
                "collect", "expand_collect")
STRUCTURAL = tuple(s for s in SHARED_STRATEGIES if s not in SYMPY_FAMILY)


class ReferenceUnavailable(RuntimeError):
    """The given directory is not a usable checkout of the reference."""


def require_fixed_hash_seed(seed: int = 0) -> None:
    """Re-execute the running script with ``PYTHONHASHSEED=seed`` unless it already runs so."""
    if os.environ.get("PYTHONHASHSEED") != str(seed):
        os.environ["PYTHONHASHSEED"] = str(seed)
        os.execv(sys.executable, [sys.executable, *sys.argv])


def name_start_index(leir_text: str) -> int:
    """One past the reference counter position of the highest tensor name in ``leir_text``."""
    def ordinal(name: str) -> int:
        n = 0
        for ch in name.upper():
            n = n * len(TENSOR_ALPHABET) + TENSOR_ALPHABET.index(ch) + 1
        return n - 1

    names = set(re.findall(r"([A-Z][a-z]*)\^\{[a-z0-9]+,[gsl]\}", leir_text))
    return 1 + max((ordinal(n) for n in names), default=-1)


@dataclass(frozen=True)
class ReferenceResult:
    outputs: tuple[str, ...]      # distinct changed programs, in the reference's order
    error: str | None             # the exception the reference raised, if any
    seconds: float                # wall time of the call (process time of one core)
    #: the reference's training pairs ``(original, transformed)``, distinct, in its order.
    #: The original is not always the program it was given: the sympy strategies also rewrite
    #: its 1- and 2-step compute_inline results and pair each rewrite with the inlined
    #: program, and the swapped strategies (expand_powsimp, apart, loop_fusion, ...) return
    #: their forward strategy's pairs reversed (docs/REFERENCE.md §3).
    pairs: tuple[tuple[str, str], ...] = ()


def training_pairs(program: str, originals, outputs) -> list[tuple[str, str]]:
    """The reference's ``(original_IR_list[i], transformed_IR_list[i])`` pairs, as its
    dataset generator forms them: lists of one length pair up index by index; a single
    original (a string, or a list of one) goes with every output; anything else pairs the
    outputs with ``program`` (the reference returned no usable originals)."""
    outputs = list(outputs) if isinstance(outputs, (list, tuple)) else []
    if isinstance(originals, str):
        originals = [originals]
    if isinstance(originals, (list, tuple)) and len(originals) == len(outputs):
        pairs = [(a if isinstance(a, str) else program, b) for a, b in zip(originals, outputs)]
    elif isinstance(originals, (list, tuple)) and len(originals) == 1 \
            and isinstance(originals[0], str):
        pairs = [(originals[0], b) for b in outputs]
    else:
        pairs = [(program, b) for b in outputs]
    return [(a, b) for a, b in pairs if isinstance(b, str)]


class ReferenceStrategies:
    """The reference's ``strategies`` package, imported from ``reference_dir``."""

    def __init__(self, reference_dir: str | os.PathLike):
        root = Path(reference_dir).expanduser().resolve()
        if not (root / "strategies" / "strategy.py").is_file():
            raise ReferenceUnavailable(
                f"{root}: not a checkout of the Step-TP reference (no strategies/strategy.py); "
                "fetch github.com/LIUMENGFAN-gif/StepTP and pass its folder")
        if "strategies" in sys.modules and not str(
                getattr(sys.modules["strategies"], "__file__", "")).startswith(str(root)):
            raise ReferenceUnavailable("another module named 'strategies' is already imported")
        sys.path.insert(0, str(root))
        try:
            self.module = importlib.import_module("strategies")
        finally:
            sys.path.remove(str(root))
        self.root = root

    def has(self, strategy: str) -> bool:
        return hasattr(self.module, f"apply_{strategy}_to_IR")

    def steps(self, leir_text: str, known_names, strategy: str, *, seed: int = 0
              ) -> ReferenceResult:
        """The reference's transformed programs of ``leir_text`` under ``strategy``
        (``known_names``: the inputs, outputs, constants and parameters)."""
        apply = getattr(self.module, f"apply_{strategy}_to_IR")
        start = time.process_time()
        try:
            # the reference prints its intermediate steps; they are not part of the result
            with contextlib.redirect_stdout(io.StringIO()):
                random.seed(seed)
                split = self.module.split_IR_to_equations(leir_text)
                originals, outputs, changed = apply(leir_text, list(known_names),
                                                    name_start_index(leir_text), *split)
        except Exception as err:  # the reference's own failures are data, not crashes
            return ReferenceResult((), f"{type(err).__name__}: {err}"[:300],
                                   time.process_time() - start)
        seconds = time.process_time() - start
        distinct = tuple(dict.fromkeys(o for o in (outputs if changed else ())
                                       if isinstance(o, str) and o != leir_text))
        pairs = tuple(dict.fromkeys(
            (a, b) for a, b in training_pairs(leir_text, originals, outputs if changed else ())
            if a != b))
        return ReferenceResult(distinct, None, seconds, pairs)
