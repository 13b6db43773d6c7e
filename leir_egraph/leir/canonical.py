"""The canonical form of a program up to renaming: one program per class of programs that differ
only in the names of their intermediate tensors and loop indices.

Exploration, search and the reference-recall benchmark deduplicate with it, so "the same
program" means the same thing everywhere. Exactly this is identified, nothing else:

* **intermediate tensors** (names not in the signature) are renamed ``A C D ...`` (the
  reference's alphabet, skipping the signature's names) in order of first appearance in the
  canonical text;
* **loop indices** are renamed per scope, in the order their loops are declared: ordinary
  indices ``a c d ...``; a hardware-bound index keeps its first two letters, which select the
  GPU axis (``tx`` = threadIdx.x, ``by`` = blockIdx.y), and gets the shortest free suffix
  (``tx``, ``txa``, ``txc`` ...). A nested nest continues its parent's naming; sibling nests
  start from the same point.

Signature tensors, dtypes, scopes, loop kinds and extents, equation order and every expression
are kept as written: two programs that compute the same values in another order or another
layout stay two programs.

:func:`exact_canonical_text` identifies a little more: expressions that are equal *bit for bit*
on every input under IEEE-754 arithmetic with round-to-nearest (``1-(A*C)`` and ``-A*C+1``;
``1e-05`` and ``1.0e-5``). Only identities that hold exactly are used: ``a-b = a+(-b)``,
``--a = a``, ``(-a)*b = -(a*b)`` and the same for ``/`` and either operand (rounding is
symmetric in sign), and the commutativity of one ``+`` or ``*``; in a float equation also
``x*1 = 1*x = x/1 = x`` and an integer literal as the float it is cast to (``1`` and ``1.0``);
in subscripts, the associativity of integer ``+`` (``c+(g+2)`` is ``c+g+2``).
Never associativity or distributivity, which change rounding, and never ``max``/``min`` operand
order, which decides what a NaN operand gives.

>>> from leir_egraph.leir.program import Program
>>> sig = {"inputs": [{"name": "A", "dtype": "float32", "shape": [4]}],
...        "outputs": [{"name": "C", "dtype": "float32", "shape": [4]}]}
>>> p = Program.parse("L^{4}_{q=0}[Z^{f32,g}_{q}=A^{f32,g}_{q}*2;];"
...                   "L^{4}_{w=0}[C^{f32,g}_{w}=Z^{f32,g}_{w}+1;];", sig)
>>> canonical_text(p)
'L^{4}_{a=0}[D^{f32,g}_{a}=A^{f32,g}_{a}*2;];L^{4}_{a=0}[C^{f32,g}_{a}=D^{f32,g}_{a}+1;];'
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import Iterable

from .ast import Bin, Equation, IBin, Idx, IName, Leir, LoopNest, Neg, Num, Var
from .hardware import hardware_axis
from .names import index_name_supply, tensor_name, tensor_name_supply
from .printer import to_text
from .program import Program
from .traverse import rebuild, replaced, walk

def is_hardware_index(name: str) -> bool:
    """``tx``, ``bya``, ``tza``...: a name whose first two letters select a GPU axis."""
    return hardware_axis(name) is not None


def _new_index(old: str, taken: Iterable[str]) -> str:
    """The canonical name of loop index ``old`` where the names ``taken`` are bound."""
    return _first_free(hardware_axis(old) or "", frozenset(taken))


@lru_cache(maxsize=4096)
def _first_free(prefix: str, taken: frozenset[str]) -> str:
    """The first name not in ``taken``: of a hardware axis ``prefix`` (``tx``, ``txa`` ...),
    or an ordinary index name when ``prefix`` is empty. Every nest of every successor asks
    it again for the same few sets, and each answer is a walk of the name supply."""
    if prefix:
        if prefix not in taken:
            return prefix
        return next(prefix + s for s in index_name_supply() if prefix + s not in taken)
    return next(n for n in index_name_supply() if n not in taken)


def _first_appearances(node, keep) -> list[str]:
    """The tensor names in ``node`` not in ``keep``, in order of first appearance."""
    order: list[str] = []
    seen: set[str] = set()
    for item in walk(node):
        if isinstance(item, Var) and item.name not in keep and item.name not in seen:
            seen.add(item.name)
            order.append(item.name)
    return order


def _tensor_renaming(leir: Leir, keep: Iterable[str]) -> dict[str, str]:
    keep = set(keep)
    supply = (n for n in tensor_name_supply() if n not in keep)
    return {old: next(supply) for old in _first_appearances(leir, keep)}


def _rename_nest(nest: LoopNest, env: dict[str, str], tensors: dict[str, str]) -> LoopNest:
    env = dict(env)
    loops = []
    for loop in nest.loops:
        new = _new_index(loop.index, set(env.values()))
        env[loop.index] = new
        loops.append(replaced(loop, index=new))

    def fn(node):
        if isinstance(node, IName) and node.name in env:
            return replaced(node, name=env[node.name])
        if isinstance(node, Idx) and node.name in env:
            return replaced(node, name=env[node.name])
        if isinstance(node, Var) and node.name in tensors:
            return replaced(node, name=tensors[node.name])
        return None

    body = tuple(_rename_nest(item, env, tensors) if isinstance(item, LoopNest)
                 else rebuild(item, fn) for item in nest.body)
    return LoopNest(tuple(loops), body)


def canonical_leir(leir: Leir, keep: Iterable[str]) -> Leir:
    """``leir`` with intermediates (names not in ``keep``) and loop indices renamed canonically."""
    return canonical_renaming(leir, keep)[0]


def canonical_renaming(leir: Leir, keep: Iterable[str]) -> tuple[Leir, dict[str, str]]:
    """:func:`canonical_leir` and the tensor renaming it applied (old name -> new name, in order
    of first appearance)."""
    tensors = _tensor_renaming(leir, keep)
    return Leir(tuple(_rename_nest(nest, {}, tensors) for nest in leir.nests)), tensors


class CanonicalNests:
    """:func:`canonical` for many programs of one signature that share most of their top-level
    nests (an exploration's successors, each one step from its parent): a top-level nest's
    canonical form depends only on the nest and on the new names of the intermediates it
    names (loop indices are renamed per top-level nest, tensors in order of first appearance
    over the program, which is the nests' orders joined), so each nest is renamed and printed
    once per such renaming. The caller names each nest by a hashable key standing for it (its
    encoded term); the result equals :func:`canonical` and its text :func:`canonical_text`."""

    def __init__(self, keep: Iterable[str]):
        self.keep = frozenset(keep)
        self._names: dict = {}   # nest key -> its intermediates, in order of first appearance
        self._done: dict = {}    # (nest key, their new names) -> (canonical nest, its text)
        self._new_names: list[str] = []   # tensor_name_supply()'s names not in keep, so far
        self._supplied = 0                # how many names of the supply were looked at

    def __call__(self, program: Program, keyed_nests: list[tuple[object, LoopNest]]) -> Program:
        """The canonical form of ``program``, whose top-level nests are ``keyed_nests``
        (``(key, nest)`` in order), with its ``text`` already made."""
        names_of = []
        order: dict[str, None] = {}
        known = self._names
        for key, nest in keyed_nests:
            names = known.get(key)
            if names is None:
                names = known[key] = tuple(_first_appearances(nest, self.keep))
            names_of.append(names)
            if names:
                order.update(dict.fromkeys(names))
        new_names = self._new_names   # the k-th intermediate's name, made once per exploration
        while len(new_names) < len(order):
            name = tensor_name(self._supplied)
            self._supplied += 1
            if name not in self.keep:
                new_names.append(name)
        new_name = dict(zip(order, new_names)).__getitem__
        nests, texts = [], []
        for (key, nest), names in zip(keyed_nests, names_of):
            renamed = tuple(map(new_name, names)) if names else names
            done = self._done.get((key, renamed))
            if done is None:
                # a nest already in canonical form (its intermediates keep their names, its
                # indices are in declaration order: most nests of successors of a canonical
                # program) is its own canonical form, not rebuilt
                new = (nest if renamed == names and _canonical_indices(nest)
                       else _rename_nest(nest, {}, dict(zip(names, renamed))))
                done = self._done[key, renamed] = (new, to_text(new))
            nests.append(done[0])
            texts.append(done[1])
        out = program.with_leir(Leir(tuple(nests)))
        vars(out)["text"] = "".join(texts)   # Program.text, a cached property: made here
        return out


def _canonical_indices(nest: LoopNest, taken: frozenset = frozenset()) -> bool:
    """Whether renaming ``nest``'s loop indices canonically would leave every one as it is
    (then the nest needs no rebuilding)."""
    for loop in nest.loops:
        if _new_index(loop.index, taken) != loop.index:
            return False
        taken = taken | {loop.index}
    return all(_canonical_indices(item, taken) for item in nest.body
               if isinstance(item, LoopNest))


def canonical_kernel(nest: LoopNest) -> LoopNest:
    """A top-level nest with its loop indices renamed canonically and its tensors kept: the
    kernel's part of ``canonical_leir`` when the program's tensors are already canonical."""
    return nest if _canonical_indices(nest) else _rename_nest(nest, {}, {})


def canonical(program: Program) -> Program:
    """The canonical representative of ``program`` up to renaming (same signature and values)."""
    return program.with_leir(canonical_leir(program.leir, program.signature.names))


def canonical_text(program: Program) -> str:
    """The canonical LEIR text: equal for two programs exactly when one is a renaming of the
    other (module docstring)."""
    return to_text(canonical_leir(program.leir, program.signature.names))


def _exact(node):
    """One bottom-up step of :func:`exact_normal_form` (children are already normal)."""
    if isinstance(node, IBin) and node.op == "+" and isinstance(node.rhs, IBin) \
            and node.rhs.op == "+":
        # integer index sums associate exactly: a+(b+c) is a+b+c
        inner = IBin("+", node.lhs, node.rhs.lhs)
        return IBin("+", _exact(inner) or inner, node.rhs.rhs)
    if isinstance(node, Num) and any(c in node.text for c in ".eE"):
        text = repr(float(node.text))
        return Num(text) if text != node.text else None
    if isinstance(node, Neg) and isinstance(node.operand, Neg):
        return node.operand.operand
    if not isinstance(node, Bin):
        return None
    lhs, rhs = node.lhs, node.rhs
    if node.op == "-":
        negated = Neg(rhs)
        added = Bin("+", lhs, _exact(negated) or negated)
        return _exact(added) or added
    if node.op in ("*", "/") and (isinstance(lhs, Neg) or isinstance(rhs, Neg)):
        sign = isinstance(lhs, Neg) != isinstance(rhs, Neg)
        inner = Bin(node.op, lhs.operand if isinstance(lhs, Neg) else lhs,
                    rhs.operand if isinstance(rhs, Neg) else rhs)
        inner = _exact(inner) or inner
        return Neg(inner) if sign else inner
    if node.op in ("+", "*") and to_text(rhs) < to_text(lhs):
        return Bin(node.op, rhs, lhs)
    return None


def _is_one(node) -> bool:
    return isinstance(node, Num) and float(node.text) == 1.0


def _exact_float(node):
    """:func:`_exact` in a float equation's value, where every literal is cast to the float
    dtype (docs/LEIR.md): integer literals become the float they are, and a product with or a
    quotient by one is its other operand."""
    if isinstance(node, Num):
        text = repr(float(node.text))
        return Num(text) if text != node.text else None
    if isinstance(node, Bin) and node.op in ("*", "/") and _is_one(node.rhs):
        return node.lhs
    if isinstance(node, Bin) and node.op == "*" and _is_one(node.lhs):
        return node.rhs
    return _exact(node)


def exact_normal_form(leir: Leir) -> Leir:
    """``leir`` with every expression rewritten by the exact identities of the module
    docstring into one representative (subtractions as additions of negations, signs pulled
    out of products and quotients, operands of ``+`` and ``*`` ordered by their text, decimal
    literals written as Python's ``repr`` of their value; in float equations integer literals
    too, and no product with or quotient by one)."""
    def equation(node):
        if isinstance(node, Equation) and node.target.dtype.startswith("f"):
            value = rebuild(node.value, _exact_float)
            return replace(node, value=value) if value is not node.value else None
        return None

    return rebuild(rebuild(leir, _exact), equation)


def exact_canonical_text(program: Program) -> str:
    """The canonical text (:func:`canonical_text`) of ``program``'s exact normal form: equal
    for two programs that are renamings of each other up to expressions that agree bit for
    bit on every input.

    >>> from leir_egraph.leir.program import Program
    >>> sig = {"inputs": [{"name": "A", "dtype": "float32", "shape": [4]},
    ...                   {"name": "C", "dtype": "float32", "shape": [4]}],
    ...        "outputs": [{"name": "E", "dtype": "float32", "shape": [4]}]}
    >>> one = Program.parse("L^{4}_{a=0}[E^{f32,g}_{a}=1-(A^{f32,g}_{a}*C^{f32,g}_{a});];", sig)
    >>> two = Program.parse("L^{4}_{c=0}[E^{f32,g}_{c}=-A^{f32,g}_{c}*C^{f32,g}_{c}+1;];", sig)
    >>> exact_canonical_text(one) == exact_canonical_text(two)
    True
    >>> three = Program.parse("L^{4}_{c=0}[E^{f32,g}_{c}=1-A^{f32,g}_{c}+C^{f32,g}_{c};];", sig)
    >>> exact_canonical_text(one) == exact_canonical_text(three)
    False
    """
    keep = program.signature.names
    leir = canonical_leir(program.leir, keep)
    for _ in range(4):   # operand order follows names and names follow first appearance
        again = canonical_leir(exact_normal_form(leir), keep)
        if again == leir:
            break
        leir = again
    return to_text(leir)


__all__ = ["canonical", "canonical_kernel", "canonical_leir", "canonical_renaming", "canonical_text",
           "exact_canonical_text", "exact_normal_form", "is_hardware_index"]
