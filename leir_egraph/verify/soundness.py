"""One rewrite judged on the values a guard must survive (docs/VERIFY.md "Special values").

``judge(verifier, before, after, ulps, domain)`` runs ``before``, ``after`` and a float64
evaluation of ``before`` on random normal input sets and on one set of every special-value
family within ``domain`` (``inputs.families``), and holds ``after`` to the declared exactness:

* ``ulps == 0`` (``exact = "bitwise"``): every output bit of ``after`` equals ``before``'s on
  every set (NaN payloads aside; ``-0`` and ``+0`` differ);
* ``ulps == N``: NaN and ±inf at the same positions as ``before``, and every finite element
  within N ULPs (of the output's dtype, at the output's largest magnitude) *more* than the
  original's own distance from the float64 evaluation of the original; on a set where that
  evaluation has NaN or ±inf elsewhere than the original (the dtype overflowed where float64
  does not), within N ULPs of ``before`` itself;
* ``scale == "values"`` (``exact = "N ulp of values"``): the same, with the ULPs taken at the
  largest magnitude of any value the original reads or writes in that set -- its inputs, every
  intermediate (``exposed``: the float64 evaluation runs the original with its intermediates
  as outputs) and its outputs -- where that is larger than the output's.

An N-ULP bound is a statement about the equation the rule rewrites, so it is judged where the
rewrite acts: at the tensors it writes (``rewritten``), run as extra outputs of both programs;
the program's other outputs, computed from them by nests the rewrite left alone (a
normalisation may divide the rewrite's rounding by a small deviation), are held to Equal's
tolerance (``compare``) with NaN and ±inf where the original has them. Without such a tensor
(a nest inserted, a tensor renamed) the bound is judged at the outputs. A bitwise declaration
is always judged at the outputs.

The answer is a :class:`Judgement`: whether ``after`` held, the exactness measured (bitwise, and
the largest ULP difference from ``before``), and for a failure a report with the input set,
both outputs and the place they differ.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..leir.analysis import (accesses, changed_span, intermediate_shapes, program_shapes, reads,
                             writes)
from ..leir.ast import Var
from ..leir.program import Program
from ..leir.signature import Signature
from ..leir.traverse import rebuild
from .compare import compare, exactness, value_scale, worst_place
from .inputs import families, integer_ranges, random_inputs, special_inputs

FLOAT_CODES = {"f16": "float16", "f32": "float32", "f64": "float64", "bf16": "bfloat16"}


def with_float_dtype(program: Program, code: str) -> Program:
    """``program`` with every float tensor (signature and intermediates) in the dtype ``code``
    (``f16``, ``f32``, ``f64``); integer and bool tensors are unchanged."""
    def retype(node):
        if isinstance(node, Var) and node.dtype in FLOAT_CODES and node.dtype != code:
            from dataclasses import replace
            return replace(node, dtype=code)
        return None

    sig = program.signature.to_dict()
    for spec in sig["inputs"] + sig["outputs"]:
        if spec["dtype"] in FLOAT_CODES.values():
            spec["dtype"] = FLOAT_CODES[code]
    values = {k: v for k, v in program.values.items()}
    return Program(rebuild(program.leir, retype), Signature.from_dict(sig), program.name, values)


def exposed(program: Program, names=None) -> Program:
    """``program`` with every float intermediate it writes (whose shape its writes bound) as an
    extra output, after the signature's own -- or, with ``names``, only those among them: one
    run then shows every value it computes (the scale of an ``"N ulp of values"`` bound), or
    the tensors a rewrite writes (``rewritten``). ``program`` itself when there is none."""
    known = {t.name for t in program.signature.tensors} | set(program.values)
    shapes = intermediate_shapes(program.leir, known)
    dtypes = {v.name: v.dtype for v in accesses(program.leir) if v.name in shapes}
    extra = [{"name": n, "dtype": FLOAT_CODES[dtypes[n]], "shape": list(shape)}
             for n, shape in shapes.items() if dtypes.get(n) in FLOAT_CODES
             and (names is None or n in names)]
    if not extra:
        return program
    sig = program.signature.to_dict()
    sig["outputs"] = sig["outputs"] + extra
    return Program(program.leir, Signature.from_dict(sig), program.name, dict(program.values))


def rewritten(before: Program, after: Program) -> tuple[str, ...]:
    """The float tensors where a rewrite's exactness is judged (docs/RULES.md section 10): those
    the nests it changed write, in ``before`` and in ``after`` alike, with one shape, and whose
    values the rest of the program sees -- an output of the signature, or a tensor a nest after
    the changed ones reads. A tensor only the changed nests read may hold other values after
    the rewrite (a partial sum, a running maximum) and is not one of them. Empty when no such
    tensor exists (a nest inserted, a tensor renamed): the rewrite is then judged at the
    program's outputs."""
    first, end_before, _, end_after = changed_span(before.leir.nests, after.leir.nests)
    changed = before.leir.nests[first:end_before]
    if not changed:
        return ()
    seen = set().union(*(reads(n) for n in before.leir.nests[end_before:]))
    seen |= {t.name for t in before.signature.outputs}
    both = set().union(*(writes(n) for n in changed)) & \
        set().union(*(writes(n) for n in after.leir.nests[first:end_after]))
    shapes_before, shapes_after = program_shapes(before), program_shapes(after)
    dtypes = {v.name: v.dtype for v in accesses(before.leir)}
    dtypes_after = {v.name: v.dtype for v in accesses(after.leir)}
    return tuple(sorted(n for n in both & seen if dtypes.get(n) in FLOAT_CODES
                        and dtypes.get(n) == dtypes_after.get(n)
                        and shapes_before.get(n) is not None
                        and shapes_before.get(n) == shapes_after.get(n)))


def in_float64(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """An input set for the float64 evaluation of the original (``with_float_dtype(.., "f64")``):
    every float input cast to float64 (exactly), the others as they are."""
    return {k: (v.astype(np.float64) if v.dtype.kind == "f" else v) for k, v in inputs.items()}


@dataclass(frozen=True)
class Judgement:
    """What ``judge`` found for one rewrite."""
    ok: bool
    bitwise: bool            # every output bit equal to before's on every set tried
    ulps: float              # largest finite difference from before, in ULPs (inf: NaN/inf moved)
    sets: int                # input sets tried
    failure: str | None = None   # the first failing set: family, inputs, outputs, place
    skipped: str | None = None   # why nothing was judged (the original does not run)
    cpu_s: float = 0.0           # the worker's CPU time for the runs
    # the largest distance of after from the float64 evaluation of the original beyond the
    # original's own, in ULPs where the bound is judged (what an N-ULP bound is held to; 0
    # for a bitwise declaration, and where the reference cannot judge)
    beyond: float = 0.0


def _show(array: np.ndarray) -> str:
    return np.array2string(np.asarray(array), precision=9, threshold=24, max_line_width=200)


def _report(label: str, inputs: dict, name: str, before: np.ndarray, after: np.ndarray,
            problem: str) -> str:
    place = worst_place(before, after)
    at = ",".join(str(int(i)) for i in place)
    lines = [f"input set: {label}", *(f"  {k} = {_show(v)}" for k, v in inputs.items()),
             f"output {name}: {problem}"]
    if place != () or before.ndim == 0:
        lines.append(f"  at [{at}]: before {before[place]!r}, after {after[place]!r}")
    lines += [f"  before {name} = {_show(before)}", f"  after  {name} = {_show(after)}"]
    return "\n".join(lines)


def input_sets(program: Program, domain: str, seed: int, trials: int = 2,
               only: tuple[str, ...] | None = None) -> list[tuple[str, dict[str, np.ndarray]]]:
    """The labelled input sets ``judge`` tries: ``trials`` normal ones, then one per special
    family within ``domain`` (with ``only``, those of them named there)."""
    ranges = integer_ranges(program)
    sets = [(f"normal #{t}", random_inputs(program, seed, t, ranges)) for t in range(trials)]
    return sets + [(family, special_inputs(program, family, seed, 0, ranges))
                   for family in families(domain) if only is None or family in only]


def judge(verifier, before: Program, after: Program, ulps: int, domain: str = "float",
          seed: int = 0, trials: int = 2, timeout: float = 120.0,
          scale: str = "output", only: tuple[str, ...] | None = None) -> Judgement:
    """See the module docstring. ``verifier`` is a :class:`leir_egraph.verify.Verifier`;
    ``scale`` is ``Strategy.scale`` (``"output"`` or ``"values"``); ``only``: the special
    families to try (``input_sets``), all of the domain's by default."""
    sets = input_sets(before, domain, seed, trials, only)
    floats = any(s.code[0] == "f" or s.code == "bf16" for s in before.signature.outputs)
    local = rewritten(before, after) if ulps and floats else ()
    programs = [exposed(before, local), exposed(after, local)] if local else [before, after]
    if ulps and floats:
        shown = exposed(before) if scale == "values" else programs[0]
        programs.append(with_float_dtype(shown, "f64"))
    reference_inputs = [in_float64(inputs) for _, inputs in sets]
    answer = verifier.outputs(programs[:2], [inputs for _, inputs in sets], timeout)
    runs, cpu = answer["outputs"], answer["cpu_s"]
    if len(programs) == 3:
        answer = verifier.outputs(programs[2:], reference_inputs, timeout)
        runs, cpu = runs + answer["outputs"], cpu + answer["cpu_s"]
    if isinstance(runs[0], str):
        return Judgement(True, False, 0.0, 0, skipped=f"the original does not run: {runs[0]}",
                         cpu_s=cpu)
    if isinstance(runs[1], str):
        return Judgement(False, False, np.inf, 1, f"after does not run: {runs[1]}", cpu_s=cpu)
    reference = runs[2] if len(runs) > 2 and not isinstance(runs[2], str) else None
    bitwise, worst, beyond = True, 0.0, 0.0
    for k, (label, inputs) in enumerate(sets):
        at = 0.0   # the ULPs' magnitude where it exceeds the output's ("N ulp of values")
        if scale == "values" and reference is not None:
            at = value_scale([*inputs.values(), *reference[k].values()])
        for name, b in _local_first(runs[0][k], local):
            a = runs[1][k][name]
            measured = exactness(b, a, name=name, scale=at)
            bitwise = bitwise and measured.bitwise
            if local and name not in local:
                # an output downstream of the rewritten tensors: Equal's tolerance
                problem = measured.problem or _beyond_equal(b, a, name, local)
                if problem is not None:
                    return Judgement(False, False, max(worst, measured.ulps), k + 1,
                                     _report(label, inputs, name, b, a, problem), cpu_s=cpu)
                continue
            worst = max(worst, measured.ulps)
            if ulps == 0:
                if not measured.bitwise:
                    problem = measured.problem or (
                        f"not bitwise identical ({measured.ulps:.3g} ULP apart), and the rule "
                        "declares exact = \"bitwise\"")
                    return Judgement(False, False, worst, k + 1,
                                     _report(label, inputs, name, b, a, problem), cpu_s=cpu)
                continue
            pair = from_reference(b, a, None if reference is None else reference[k][name],
                                  name, at)
            problem = beyond_bound(measured, pair, ulps, fallback=ulps,
                                   declared=f"{ulps} ulp{_OF[scale]}",
                                   where=_where_judged(name, local))
            if pair is not None and pair[1].problem is None:
                beyond = max(beyond, pair[1].ulps - pair[0].ulps)
            if problem is not None:
                return Judgement(False, False, worst, k + 1,
                                 _report(label, inputs, name, b, a, problem), cpu_s=cpu,
                                 beyond=beyond)
    return Judgement(True, bitwise, worst, len(sets), cpu_s=cpu, beyond=beyond)


def from_reference(before: np.ndarray, after: np.ndarray, reference: np.ndarray | None,
                   name: str, at: float):
    """``(own, moved)``: the exactness of ``before`` and of ``after`` from ``reference``, the
    float64 evaluation of the original -- or ``None`` where it cannot judge (no reference, or
    one with NaN or ±inf elsewhere than ``before``: the dtype overflowed where float64 does
    not)."""
    if reference is None:
        return None
    own = exactness(reference, before, before.dtype, name, at)
    if own.problem is not None:
        return None
    return own, exactness(reference, after, after.dtype, name, at)


def beyond_bound(apart, pair, ulps: int, fallback: float, declared: str,
                 where: str = "") -> str | None:
    """Why ``after`` breaks an N-ULP bound on one tensor (``None``: within it). ``pair`` is
    :func:`from_reference` of the two, against the float64 evaluation of the original:
    ``after`` may be at most ``ulps`` further from it than ``before`` is -- a rewrite that
    rounds *less* than the original (a long sum split into blocks) is never blamed for the
    original's own error. Where the reference cannot judge (``pair`` is ``None``), ``apart``
    (``exactness(before, after)``) may be at most ``fallback`` ULPs."""
    if apart.problem is not None:
        return apart.problem
    if pair is not None:
        own, moved = pair
        if moved.problem is not None:
            return moved.problem
        if moved.ulps > own.ulps + ulps:
            return (f"{moved.ulps:.3g} ULP from the float64 evaluation of the original, "
                    f"which itself is {own.ulps:.3g} ULP away{where}; the rule declares "
                    f"exact = \"{declared}\"")
        return None
    if apart.ulps > fallback:
        return (f"{apart.ulps:.3g} ULP from before{where}; the rule declares "
                f"exact = \"{declared}\"")
    return None


def _local_first(outputs: dict[str, Any], local: tuple[str, ...]) -> list[tuple[str, Any]]:
    """``outputs``' items, the tensors the rewrite writes first: a rewrite that breaks its bound
    there is reported where it acts, not at an output computed from them."""
    return sorted(outputs.items(), key=lambda item: item[0] not in local)


def _where_judged(name: str, local: tuple[str, ...]) -> str:
    return f" at {name}, a tensor the rewrite writes" if name in local else ""


def _beyond_equal(before: np.ndarray, after: np.ndarray, name: str,
                  local: tuple[str, ...]) -> str | None:
    """Why an output the rewrite does not write itself breaks Equal's tolerance (``None``:
    within it): the declared bound holds at the tensors the rewrite writes (``local``), and
    what the program computes from them afterwards is held to the dataset's verdict."""
    c = compare(before, after, name)
    if c.equal:
        return None
    return (f"{c.problem}; the output is computed from {', '.join(local)}, where the "
            "declared bound held, and must stay within Equal's tolerance")


_OF = {"output": "", "values": " of values"}


def special_trial(before_out: dict[str, Any], after_out: dict[str, Any], scale: float = 0.0,
                  local: tuple[str, ...] = (), reference: dict[str, Any] | None = None,
                  ulps: int = 0, declared: str = ""):
    """The exactness of one input set's outputs (``after`` against ``before``), every output
    joined: ``(bitwise, ulps, problem)`` -- the dataset verification's trial. ``scale``: the
    ULPs' magnitude where it exceeds an output's (``value_scale``). With ``local``
    (``rewritten``: the tensors the rewrite writes, among the outputs given), the ULPs are
    those of ``local``, and every other output is held to Equal's tolerance. With
    ``reference`` (the float64 evaluation of the original's tensors) and a declared bound of
    ``ulps`` > 0 (``declared``: its text), ``problem`` also says where the bound breaks
    (``beyond_bound``; where the reference cannot judge, ``after`` may be 2N ULPs from
    ``before``: each may be N from the exact result)."""
    bitwise, worst = True, 0.0
    for name, b in _local_first(before_out, local):
        a = after_out[name]
        measured = exactness(b, a, name=name, scale=scale)
        if measured.problem is not None:
            return False, np.inf, measured.problem
        bitwise = bitwise and measured.bitwise
        if local and name not in local:
            problem = _beyond_equal(b, a, name, local)
            if problem is not None:
                return False, worst, problem
            continue
        worst = max(worst, measured.ulps)
        if ulps and reference is not None:
            pair = from_reference(b, a, reference.get(name), name, scale)
            problem = beyond_bound(measured, pair, ulps, fallback=2 * ulps, declared=declared,
                                   where=_where_judged(name, local))
            if problem is not None:
                return False, worst, problem
    return bitwise, worst, None
