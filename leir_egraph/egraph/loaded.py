"""A program loaded into egglog: its term, ``let`` names for every nest and program suffix, and
the egglog text that declares them. Guards, parameters and providers state facts about its
terms (``term_nests``, ``top_nests``, ``suffix_terms``); the engine sends a term that has a
``let`` name by that name.

    $n0_, $n1_, ...   every loop nest (top-level and nested), in pre-order
    $s0_, $s1_, ...   the top-level program suffix starting at nest k ($s0_ is the whole program)

Every ``let`` name the engine makes ends in ``_``, never in a digit. egglog 13.2 reads a global
inside a command through a fresh variable named after it plus a counter (``$f13`` -> ``$f131``),
so a global named ``$f13`` and one named ``$f131`` in the same command could swap values: a fact
was stored with the wrong subterm (docs/ARCHITECTURE.md, "egglog's global names"). A name ending
in ``_`` plus digits is never another name the engine makes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from ..leir.ast import LoopNest
from ..leir.program import Program
from .encoding import Term, encode, to_egglog


@dataclass
class LoadedProgram:
    """The let-bound egglog view of a program, shared by all fact producers."""
    program: Program
    nests: list[LoopNest] = field(default_factory=list)        # pre-order, incl. nested
    top_level: list[int] = field(default_factory=list)         # positions of top-level nests

    def __post_init__(self):
        def visit(nest: LoopNest):
            self.nests.append(nest)
            for item in nest.body:
                if isinstance(item, LoopNest):
                    visit(item)

        for nest in self.program.leir.nests:
            self.top_level.append(len(self.nests))
            visit(nest)

    @cached_property
    def term(self) -> Term:
        return encode(self.program.leir)

    def nest_name(self, k: int) -> str:
        return f"$n{k}_"

    def top_nest_name(self, i: int) -> str:
        """Let name of top-level nest number ``i``."""
        return self.nest_name(self.top_level[i])

    def suffix_name(self, i: int) -> str:
        return f"$s{i}_"

    def term_nests(self):
        """``(term, nest)`` of every nest, nested ones included, in pre-order: the term is what
        a fact's ``Nest`` column takes (encoded once, sent as the nest's let name)."""
        return zip(self.nest_terms, self.nests)

    def top_nests(self):
        """``(position, term, nest)`` of every top-level nest."""
        for i, nest in enumerate(self.program.leir.nests):
            yield i, self.nest_terms[self.top_level[i]], nest

    def top_nest_term(self, i: int) -> Term:
        """The term of top-level nest number ``i``."""
        return self.nest_terms[self.top_level[i]]

    @cached_property
    def suffix_terms(self) -> list[Term]:
        """The term of every top-level program suffix: ``suffix_terms[i]`` starts at nest ``i``
        (``[0]`` is the whole program, the last one the empty program)."""
        out: list[Term] = [("PNil",)]
        for i in reversed(range(len(self.program.leir.nests))):
            out.append(("PCons", self.top_nest_term(i), out[-1]))
        return out[::-1]

    def distinct_nests(self) -> list[tuple[Term, LoopNest, list[LoopNest]]]:
        """Each distinct nest with its term and the top-level nest -- the GPU kernel -- around
        every one of its occurrences. A fact about a nest term holds wherever the term occurs,
        so a fact that depends on the surroundings must hold in all of them."""
        found: dict[LoopNest, tuple[Term, list[LoopNest]]] = {}
        for k, nest in enumerate(self.nests):
            kernel = self.nests[max(s for s in self.top_level if s <= k)]
            found.setdefault(nest, (self.nest_terms[k], []))[1].append(kernel)
        return [(term, nest, kernels) for nest, (term, kernels) in found.items()]

    @cached_property
    def nest_terms(self) -> list[Term]:
        """The encoded term of every nest, in the order of ``nests`` (encoded once)."""
        return [encode(nest) for nest in self.nests]

    def names(self) -> dict[Term, str]:
        """Term -> let name of every distinct nest (the first name where a nest repeats)."""
        out: dict[Term, str] = {}
        for k, term in enumerate(self.nest_terms):
            out.setdefault(term, self.nest_name(k))
        return out

    def named_terms(self) -> dict[Term, str]:
        """``names()`` plus the term of every top-level program suffix but the empty one
        (``$sK_``, as ``declarations`` binds them)."""
        out = self.names()
        for i, suffix in enumerate(self.suffix_terms[:-1]):
            out.setdefault(suffix, self.suffix_name(i))
        return out

    def declarations(self) -> str:
        """egglog ``let`` commands binding every nest and suffix; the program is ``$s0_``."""
        lines = [f"(let {self.nest_name(k)} {to_egglog(term)})"
                 for k, term in enumerate(self.nest_terms)]
        n = len(self.program.leir.nests)
        lines.append(f"(let {self.suffix_name(n)} (PNil))")
        for i in reversed(range(n)):
            lines.append(f"(let {self.suffix_name(i)} (PCons {self.top_nest_name(i)} "
                         f"{self.suffix_name(i + 1)}))")
        return "\n".join(lines)
