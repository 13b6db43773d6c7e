"""Where a program's intermediates are allocated and initialised: per top-level nest, the
intermediates it writes first and the implicit initialisations its accumulations need
(docs/LEIR.md §3). Pure; the lowering (``tir.py``) and the segmentation (``segments.py``) read it.

    B^{16}_{tx=0}L^{256}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,a});];
    -> allocate_before {0: ['D']}, init_before {0: [('D', 'max')]}
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..leir.analysis import accumulation_op, equation_sites, intermediate_shapes
from ..leir.program import Program
from .expr import tvm_dtype


@dataclass
class Plan:
    """Where allocations and implicit initialisations go, per top-level nest."""
    shapes: dict[str, tuple[int, ...]]
    dtypes: dict[str, str]
    allocate_before: dict[int, list[str]] = field(default_factory=dict)
    init_before: dict[int, list[tuple[str, str]]] = field(default_factory=dict)
    scopes: dict[str, str] = field(default_factory=dict)  # intermediate -> 'g' | 's' | 'l'
    # buffers allocated elsewhere (a segment's parameters) that a poison build fills right
    # before the nest writing them first; intermediates allocated here are poisoned on allocation
    poison_before: dict[int, list[str]] = field(default_factory=dict)


def plan(program: Program) -> Plan:
    """Allocation point (first writing top-level nest) and implicit initialisations.

    An accumulation ``X=X op e`` initialises X over its whole shape right before its top-level
    nest when no textually earlier equation wrote X and X is not an input."""
    sig = program.signature
    known = {t.name for t in sig.tensors}
    shapes = {t.name: t.shape for t in sig.tensors}
    shapes.update(intermediate_shapes(program.leir, known))
    dtypes = {t.name: t.dtype for t in sig.tensors}
    p = Plan(shapes, dtypes)
    inputs = set(sig.input_names)
    written: set[str] = set()
    for site in equation_sites(program.leir):
        target = site.equation.target
        name = target.name
        if name not in known and name not in dtypes:
            dtypes[name] = tvm_dtype(target.dtype)
            p.scopes[name] = target.scope
            p.allocate_before.setdefault(site.nest, []).append(name)
        op = accumulation_op(site.equation)
        if op is not None and name not in written and name not in inputs:
            p.init_before.setdefault(site.nest, []).append((name, op))
        written.add(name)
    return p
