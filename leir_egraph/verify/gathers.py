"""Out-of-bounds gathers on the actual inputs.

A gather subscript (``A_{I_{tx}}``, ``H_{C_{tx}+1}``) takes its value from a tensor, so
validation cannot bound it. TVM does not check bounds: an index outside the dimension reads
whatever lies there -- garbage that two builds need not agree on ("inf at different
positions") -- or crashes. So before a program runs, every gather it executes is evaluated
here with NumPy on the inputs, over its iteration space, and an index out of range is named::

    >>> gather_problem(program, {"A": a, "I": np.array([0, 1, 2, 4])})   # doctest: +SKIP
    "A^{f32,g}_{I^{i32,g}_{tx}} reads A at 4 in dimension 0 (size 4) at tx=3"

Only gathers through input tensors are checked (an intermediate's values exist only while
the program runs), on at most ``ENUMERATION_LIMIT`` points per access; a gather inside a branch
of an ``if_then_else`` whose condition reads a tensor is skipped (the branch may guard it).
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from ..leir.analysis import (equation_sites, guarded_accesses, has_gather, index_array,
                             intermediate_shapes)
from ..leir.ast import IfThenElse, IName, Var
from ..leir.printer import to_text
from ..leir.program import Program
from ..leir.traverse import walk

ENUMERATION_LIMIT = 1 << 20


class _OutOfBounds(Exception):
    def __init__(self, var: Var, dim: int, value: int, size: int, where: int):
        self.var, self.dim, self.value, self.size, self.where = var, dim, value, size, where


def index_values(sub, env: Mapping[str, np.ndarray],
                 tensors: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
    """Index arithmetic over arrays of index values (``analysis.index_array``); gathers read
    ``tensors`` (a gather out of its tensor's bounds raises _OutOfBounds)."""
    def gathered(node):
        if tensors is None or node.name not in tensors:
            raise KeyError(node.name)
        values = np.asarray(tensors[node.name])
        index = []
        for dim, s in enumerate(node.subscripts):
            i = np.asarray(index_values(s, env, tensors))
            bad = np.ravel((i < 0) | (i >= values.shape[dim]))
            if bad.any():
                at = int(np.argmax(bad))
                raise _OutOfBounds(node, dim, int(np.ravel(i)[at]), values.shape[dim], at)
            index.append(i)
        return values[tuple(index)].astype(np.int64) if index else np.int64(values)
    return index_array(sub, env, gathered)


def gather_problem(program: Program, inputs: Mapping[str, np.ndarray]) -> str | None:
    """What the first out-of-bounds gather of ``program`` reads on ``inputs``, or None."""
    shapes = None
    for site in equation_sites(program.leir):
        if not any(isinstance(n, Var) and any(has_gather(s) for s in n.subscripts)
                   for n in walk(site.equation)):
            continue
        if shapes is None:
            shapes = {t.name: t.shape for t in program.signature.tensors}
            shapes.update(intermediate_shapes(program.leir, set(shapes)))
        guarded = _tensor_guarded(site.equation)
        for access in guarded_accesses(site):
            var = access.var
            if id(var) in guarded or not any(has_gather(s) for s in var.subscripts):
                continue
            gathered = {n.name for s in var.subscripts for n in walk(s) if isinstance(n, Var)}
            if not gathered <= set(inputs) or var.name not in shapes:
                continue
            found = _access_problem(var, access.env, shapes[var.name], inputs)
            if found is not None:
                return found
    return None


def _access_problem(var: Var, ranges, shape, inputs) -> str | None:
    names = sorted({n.name for s in var.subscripts for n in walk(s) if isinstance(n, IName)})
    if any(not isinstance(ranges.get(n), tuple) for n in names):
        return None
    spans = [range(ranges[n][0], ranges[n][1] + 1) for n in names]
    if math.prod(len(s) for s in spans) > ENUMERATION_LIMIT:
        return None
    grids = np.meshgrid(*[np.arange(s.start, s.stop, dtype=np.int64) for s in spans],
                        indexing="ij")
    env = {n: g.ravel() for n, g in zip(names, grids)}
    points = env[names[0]].size if names else 1

    def at(k: int) -> str:
        return ",".join(f"{n}={int(env[n][k])}" for n in names) or "every iteration"

    for dim, sub in enumerate(var.subscripts):
        if not has_gather(sub):
            continue
        try:
            values = np.broadcast_to(index_values(sub, env, inputs), (points,))
        except _OutOfBounds as oob:
            return (f"{to_text(oob.var)} reads {oob.var.name} at {oob.value} in dimension "
                    f"{oob.dim} (size {oob.size}) at {at(oob.where % points)}")
        bad = (values < 0) | (values >= shape[dim])
        if bad.any():
            k = int(np.argmax(bad))
            return (f"{to_text(var)} reads {var.name} at {int(values[k])} in dimension {dim} "
                    f"(size {shape[dim]}) at {at(k)}")
    return None


def _tensor_guarded(equation) -> set[int]:
    """ids of the tensor reads inside a branch of an if_then_else whose condition reads a
    tensor (a data-dependent guard this check cannot evaluate)."""
    out: set[int] = set()
    for node in walk(equation.value):
        if isinstance(node, IfThenElse) and any(isinstance(n, Var) for n in walk(node.cond)):
            for branch in (node.then, node.otherwise):
                out.update(id(n) for n in walk(branch) if isinstance(n, Var))
    return out
