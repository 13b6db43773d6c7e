"""Assembling a LEIR program op by op: tensor handles, loop nests with the binding rule, dead
nest removal, the reference's naming order, and the final validated ``Program``.

Emitters work with provisional tensor keys (``%7``) and placeholder indices; names are given
once the whole graph is translated, so that they follow the reference translator's order:
forward inputs, intermediates of fx nodes, outputs, constants, parameters, then the
temporaries that ops introduce.

    >>> from leir_egraph.frontend.expr import vmax
    >>> b = Builder()
    >>> x = b.tensor((16, 256), "f32", "input", "x")
    >>> y = b.tensor((16, 256), "f32", "node", "relu")
    >>> lp = Loops(y.shape)
    >>> b.emit(lp, (y.at(*lp), vmax(x.at(*lp), 0)))
    >>> b.finish([y]).text
    'B^{16}_{tx=0}L^{256}_{a=0}[C^{f32,g}_{tx,a}=max(A^{f32,g}_{tx,a},0);];'
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np

from ..leir.analysis import equation_reads
from ..leir.ast import Equation, Idx, IName, Leir, Loop, LoopNest, Var
from ..leir.hardware import AXIS_LIMITS
from ..leir.program import Program
from ..leir.signature import DTYPE_NAMES, Signature, TensorSpec
from ..leir.traverse import rebuild
from ..leir.validate import LeirValidationError, check
from .errors import TranslationError
from .expr import I, X, lift
from .naming import index_names, tensor_name


_ids = itertools.count()


@dataclass(eq=False)
class Tensor:
    """A tensor of the program being built. ``role`` is one of ``input constant parameter node
    temp``: ``node`` tensors hold the value of an fx node, ``temp`` ones are an op's internal
    steps (a softmax's row maxima)."""
    key: str
    dtype: str
    shape: tuple[int, ...]
    role: str
    label: str = ""
    value: Any = field(default=None, repr=False)  # numpy array for constants and parameters
    order: int = 0  # declaration order of parameters

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def at(self, *subs) -> X:
        """A read or write of one element: ``t.at(i, 0, j)``; a 0-d tensor takes no subscript."""
        if len(subs) == 1 and isinstance(subs[0], (list, tuple)):
            subs = tuple(subs[0])
        if len(subs) != self.rank:
            raise TranslationError(f"tensor {self.label or self.key} of shape {list(self.shape)} "
                                   f"indexed with {len(subs)} subscripts")
        return X(Var(self.key, self.dtype, "g", tuple(I.of(s).node for s in subs)))


class Nest:
    """A nest being assembled: ``Loops`` and a body of equations ``(target, value)`` and
    nested ``Nest``s, for :meth:`Builder.emit`."""

    def __init__(self, loops: "Loops", *items):
        self.loops = loops
        self.body: list = []
        for item in items:
            if isinstance(item, Nest):
                self.body.append(item)
                continue
            target, value = item
            if not isinstance(target, X) or not isinstance(target.node, Var):
                raise TranslationError("the target of an equation must be a tensor element")
            self.body.append(Equation(target.node, lift(value)))

    def equations(self):
        for item in self.body:
            if isinstance(item, Nest):
                yield from item.equations()
            else:
                yield item

    def loop_count(self) -> int:
        return len(self.loops) + sum(i.loop_count() for i in self.body if isinstance(i, Nest))


class Loops:
    """The loops of one nest, outermost first, with placeholder indices (``lp[0]``, ...).

    A loop whose index does not occur in the written subscripts is a reduction axis. ``serial``
    marks further axes that must stay serial although they index the target (a scan's axis).
    """

    def __init__(self, extents: Iterable[int], serial: Iterable[int] = ()):
        self.extents = tuple(int(e) for e in extents)
        if any(e < 1 for e in self.extents):
            raise TranslationError(f"loop extents {list(self.extents)} include an empty loop")
        self.serial = frozenset(serial)
        uid = next(_ids)
        self.idx = tuple(I(IName(f"#{uid}_{k}")) for k in range(len(self.extents)))

    def __iter__(self):
        return iter(self.idx)

    def __getitem__(self, k):
        return self.idx[k]

    def __len__(self):
        return len(self.idx)


def _index_names_in(node) -> set[str]:
    found = set()

    def visit(n):
        if isinstance(n, (IName, Idx)):
            found.add(n.name)
        return None

    rebuild(node, visit)
    return found


class Builder:
    """Collects tensors and nests; ``finish`` names, prunes and validates them."""

    def __init__(self):
        self.tensors: list[Tensor] = []
        self.nests: list[LoopNest] = []
        self._keys = itertools.count()
        self.context = ""  # the op being emitted, for internal error messages

    # ------------------------------------------------------------ tensors

    def tensor(self, shape: Sequence[int], dtype: str, role: str = "temp", label: str = "",
               value: Any = None, order: int = 0) -> Tensor:
        t = Tensor(f"%{next(self._keys)}", dtype, tuple(int(s) for s in shape), role, label,
                   value, order)
        self.tensors.append(t)
        return t

    def temp(self, shape: Sequence[int], dtype: str, label: str = "") -> Tensor:
        return self.tensor(shape, dtype, "temp", label or self.context)

    # ------------------------------------------------------------ nests

    def emit(self, loops: Loops, *items) -> None:
        """One nest: ``loops`` around ``items`` in order, each an equation ``(target, value)``
        or a nested :class:`Nest` (the body of a loop over time, say).

        The first top-level loop that indexes every target (and is not ``serial``) is bound to
        a GPU thread, ``B^{N}_{tx=0}``, when ``N <= 1024``; every other loop, nested ones
        included, is serial ``L`` and takes the next ordinary index name. A nest without loops
        (a scalar step) gets ``B^{1}_{tx=0}``.
        """
        root = Nest(loops, *items)
        equations = list(root.equations())
        written: set[str] = set()
        for k, eq in enumerate(equations):
            names = _index_names_in(eq.target)
            written = names if k == 0 else written & names
        placeholders = [i.node.name for i in loops.idx]
        bound = None
        for pos, name in enumerate(placeholders):
            if pos in loops.serial or name not in written:
                continue
            if loops.extents[pos] <= AXIS_LIMITS["tx"]:  # larger extents stay serial
                bound = pos
            break  # only the first spatial loop is a binding candidate
        ordinary = iter(index_names(root.loop_count()))
        rename: dict[str, str] = {}

        def fix(n):
            if isinstance(n, IName) and n.name in rename:
                return IName(rename[n.name])
            if isinstance(n, Idx) and n.name in rename:
                return Idx(rename[n.name])
            return None

        def build(nest: Nest, top: bool) -> LoopNest:
            loop_nodes = []
            for pos, (i, extent) in enumerate(zip(nest.loops.idx, nest.loops.extents)):
                if top and pos == bound:
                    rename[i.node.name] = "tx"
                    loop_nodes.append(Loop("B", extent, "tx"))
                else:
                    rename[i.node.name] = next(ordinary)
                    loop_nodes.append(Loop("L", extent, rename[i.node.name]))
            if top and not loop_nodes:
                loop_nodes.append(Loop("B", 1, "tx"))
            body = tuple(build(item, False) if isinstance(item, Nest) else rebuild(item, fix)
                         for item in nest.body)
            return LoopNest(tuple(loop_nodes), body)

        self.nests.append(build(root, True))

    # ------------------------------------------------------------ the program

    def finish(self, outputs: Sequence[Tensor], inputs: Sequence[Tensor] = (),
               name: str = "") -> Program:
        """Name every tensor, drop nests whose results nobody reads, validate, and return the
        Program (inputs in call order: forward inputs, constants, parameters)."""
        inputs = list(inputs) or [t for t in self.tensors if t.role == "input"]
        nests = self._live_nests({t.key for t in outputs})
        by_key = {t.key: t for t in self.tensors}
        first_write: dict[str, int] = {}
        first_read: dict[str, int] = {}
        counter = itertools.count()
        for nest in nests:
            for eq in _equations(nest):
                for var in equation_reads(eq):
                    first_read.setdefault(var.name, next(counter))
                first_write.setdefault(eq.target.name, next(counter))
        output_keys = [t.key for t in outputs]
        used = set(first_read) | set(first_write)
        order: list[Tensor] = list(inputs)
        order += sorted((by_key[k] for k in first_write if by_key[k].role == "node"
                         and k not in output_keys), key=lambda t: first_write[t.key])
        order += list(outputs)
        order += sorted((t for t in self.tensors if t.role == "constant" and t.key in used),
                        key=lambda t: first_read[t.key])
        params = sorted((t for t in self.tensors if t.role == "parameter" and t.key in used),
                        key=lambda t: t.order)
        order += params
        order += sorted((by_key[k] for k in first_write if by_key[k].role == "temp"
                         and k not in output_keys), key=lambda t: first_write[t.key])
        names = {t.key: tensor_name(n) for n, t in enumerate(order)}
        missing = used - set(names)
        if missing:
            raise TranslationError(f"tensors {sorted(missing)} are read but have no writer")

        def rename(n):
            if isinstance(n, Var) and n.name in names:
                return Var(names[n.name], n.dtype, n.scope, n.subscripts)
            return None

        leir = Leir(tuple(rebuild(nest, rename) for nest in nests))
        constants = [t for t in order if t.role == "constant"]
        sig_inputs = list(inputs) + constants + params

        def spec(t: Tensor) -> TensorSpec:
            return TensorSpec(names[t.key], DTYPE_NAMES[t.dtype], t.shape)

        signature = Signature(tuple(spec(t) for t in sig_inputs), tuple(spec(t) for t in outputs))
        values = {names[t.key]: np.asarray(t.value) for t in constants + params}
        program = Program(leir, signature, name, values)
        try:
            check(program)
        except LeirValidationError as err:
            raise TranslationError(f"the translation of {name or 'the module'} is not valid "
                                   f"LEIR (a frontend bug):\n{err.render()}\n{program.text}") from None
        return program

    def _live_nests(self, live: set[str]) -> list[LoopNest]:
        """Nests, in order, that contribute to ``live`` tensors; the rest is dead code (an
        unused ``max`` value next to its ``argmax``, a branch the outputs do not depend on)."""
        live = set(live)
        keep = []
        for nest in reversed(self.nests):
            eqs = _equations(nest)
            if any(eq.target.name in live for eq in eqs):
                keep.append(nest)
                for eq in eqs:
                    live.add(eq.target.name)
                    live.update(v.name for v in equation_reads(eq))
        return list(reversed(keep))


def _equations(nest: LoopNest) -> list[Equation]:
    out = []
    for item in nest.body:
        out.extend([item] if isinstance(item, Equation) else _equations(item))
    return out
