"""Random inputs for one verification trial.

* floats: standard normal, cast to the dtype;
* integers used as a gather subscript: uniform over the valid positions of the dimension they
  index (``H_{C_{tx}}`` with H of size 10 -> C in 0..9; ``X_{C_{tx}+1}`` shifts the range);
* integers compared with a loop index (``if_then_else(c==C_{tx},...)``): uniform over that
  index's range;
* other integers: small, non-zero (-4..4 without 0, unsigned 1..8) so that integer division
  by an input cannot trap;
* bool: fair coin;
* inputs with a stored value (``program.values``) use that value.

Trial ``t`` of seed ``s`` draws from ``numpy.random.default_rng([s, t])``.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from ..leir.analysis import affine, equation_sites, index_range, intermediate_shapes
from ..leir.ast import Compare, IBin, Idx, Var
from ..leir.program import Program
from ..leir.traverse import walk
from ..lower.build import numpy_dtype

Range = tuple[int, int]


def integer_ranges(program: Program) -> dict[str, Range]:
    """Inclusive value range for integer inputs whose use implies one."""
    sig = program.signature
    shapes = {t.name: t.shape for t in sig.tensors}
    shapes.update(intermediate_shapes(program.leir, set(shapes)))
    inputs = {t.name for t in sig.inputs if t.code[0] in "iu"}
    gather: dict[str, Range] = {}
    compared: dict[str, Range] = {}
    for site in equation_sites(program.leir):
        env = site.loop_ranges
        for node in walk(site.equation):
            if isinstance(node, Var) and node.name in shapes:
                for dim, sub in enumerate(node.subscripts):
                    found = _gather_offset(sub, inputs, env)
                    if found is None or dim >= len(shapes[node.name]):
                        continue
                    name, (lo, hi) = found
                    r = (0 - lo, shapes[node.name][dim] - 1 - hi)
                    old = gather.get(name)
                    gather[name] = r if old is None else (max(old[0], r[0]), min(old[1], r[1]))
            elif isinstance(node, Compare):
                _compared_ranges(node, inputs, env, compared)
    out = dict(compared)
    out.update(gather)  # a gather's bounds are a hard constraint, comparisons only a hint
    return {k: v for k, v in out.items() if v[0] <= v[1]}


def _gather_offset(sub, inputs, env):
    """``(name, range of the rest)`` if ``sub`` is ``G``, ``G+e``, ``e+G`` or ``G-e`` with G an
    integer input and e affine in loop indices (``G-e`` as ``G+(-e)``)."""
    if isinstance(sub, Var) and sub.name in inputs:
        return sub.name, (0, 0)
    if not (isinstance(sub, IBin) and sub.op in ("+", "-")):
        return None
    pairs = [(sub.lhs, sub.rhs)] + ([(sub.rhs, sub.lhs)] if sub.op == "+" else [])
    for gather, rest in pairs:
        if isinstance(gather, Var) and gather.name in inputs:
            r = index_range(rest, env)
            if r is None:
                return None
            return gather.name, (r if sub.op == "+" else (-r[1], -r[0]))
    return None


def _compared_ranges(node: Compare, inputs, env, out: dict[str, Range]) -> None:
    operands = node.operands
    for a, b in zip(operands, operands[1:]):
        for tensor, other in ((a, b), (b, a)):
            if not (isinstance(tensor, Var) and tensor.name in inputs):
                continue
            if not any(isinstance(n, Idx) for n in walk(other)) or affine(other) is None:
                continue
            r = index_range(other, env)
            if r is not None:
                old = out.get(tensor.name)
                out[tensor.name] = r if old is None else (min(old[0], r[0]), max(old[1], r[1]))


def random_inputs(program: Program, seed: int, trial: int,
                  ranges: Mapping[str, Range] | None = None) -> dict[str, np.ndarray]:
    """One input set: every signature input, stored values as they are."""
    rng = np.random.default_rng([seed, trial])
    ranges = integer_ranges(program) if ranges is None else ranges
    out: dict[str, np.ndarray] = {}
    for spec in program.signature.inputs:
        if spec.name in program.values:
            out[spec.name] = np.asarray(program.values[spec.name])
            continue
        dtype = numpy_dtype(spec.dtype)
        code = spec.code
        if code == "bool":
            out[spec.name] = rng.random(spec.shape) < 0.5
        elif code[0] == "f" or code == "bf16":
            out[spec.name] = rng.standard_normal(spec.shape).astype(dtype)
        elif spec.name in ranges:
            lo, hi = ranges[spec.name]
            out[spec.name] = rng.integers(lo, hi + 1, spec.shape).astype(dtype)
        elif code[0] == "u":
            out[spec.name] = rng.integers(1, 9, spec.shape).astype(dtype)
        else:
            magnitude = rng.integers(1, 5, spec.shape)
            sign = np.where(rng.random(spec.shape) < 0.5, -1, 1)
            out[spec.name] = (magnitude * sign).astype(dtype)
    return out
