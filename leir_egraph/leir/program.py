"""A Program is LEIR text (as an AST) plus its Signature, and optionally the values of the
constants and parameters among its inputs.

Equality and hashing are structural over the AST and the signature; ``name`` and ``values``
are carried along but do not take part. Two programs are equal only if they are spelled alike
too: an access written ``A_{}`` equals one written ``A`` in the AST, but it prints and encodes
differently, and memos keyed by a program (fact providers, analyses) answer in its own terms.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping

from .analysis import empty_subscripts
from .ast import Leir
from .parser import parse
from .printer import to_text
from .signature import Signature

if TYPE_CHECKING:  # numpy only names the values' type: importing LEIR does not load it
    import numpy as np


_set = object.__setattr__   # a field of a new frozen Program (``with_leir``)


@dataclass(frozen=True)
class Program:
    """LEIR AST + Signature (+ constant/parameter values by tensor name)."""
    leir: Leir
    signature: Signature
    name: str = field(default="", compare=False)
    values: Mapping[str, np.ndarray] = field(default_factory=dict, compare=False, hash=False,
                                             repr=False)

    def __post_init__(self):
        object.__setattr__(self, "values", MappingProxyType(dict(self.values)))

    def __eq__(self, other) -> bool:
        # the dataclass's equality, then the spelling (module docstring), walked only for
        # programs equal otherwise; the hash stays the dataclass's
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self is other or (self.leir == other.leir and self.signature == other.signature
                                 and empty_subscripts(self.leir) == empty_subscripts(other.leir))

    @staticmethod
    def parse(text: str, signature: Signature | Mapping[str, Any], name: str = "",
              values: Mapping[str, np.ndarray] | None = None) -> "Program":
        """Parse text and attach a signature (a Signature or its dict form)."""
        if not isinstance(signature, Signature):
            signature = Signature.from_dict(signature)
        return Program(parse(text), signature, name, values or {})

    @cached_property
    def text(self) -> str:
        """Canonical LEIR text."""
        return to_text(self.leir)

    def with_leir(self, leir: Leir) -> "Program":
        """The same signature, name and values around a different AST (a transformed program)."""
        if leir is self.leir:
            return self
        # ``replace(self, leir=leir)`` without its introspection and without copying the
        # values again (placing makes one program per successor): the fields but ``leir``
        # are this program's, ``values`` the read-only view __post_init__ made of a private
        # copy, which nothing writes. Set as attributes, not through ``vars(out)``: asking for
        # the ``__dict__`` makes one, an object more per program for the garbage collector
        out = object.__new__(Program)
        _set(out, "leir", leir)
        _set(out, "signature", self.signature)
        _set(out, "name", self.name)
        _set(out, "values", self.values)
        return out

    @property
    def forward_inputs(self) -> tuple[str, ...]:
        """Input names the caller supplies (those without a stored value)."""
        return tuple(n for n in self.signature.input_names if n not in self.values)

    def __str__(self) -> str:
        return self.text
