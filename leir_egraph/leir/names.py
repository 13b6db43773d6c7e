"""LEIR names as the reference hands them out (docs/REFERENCE.md §1), in one place.

Tensors: ``A C D E F G H I J K M N O Q R S W X Y Z`` (no ``L P V B U T``), then two letters,
first capital: ``Aa Ac ... Az Ca ...`` -- bijective base 20.  Loop indices:
``a c d f g h i j k l m n o p q r s u w`` (no ``t b v x y z e``), then ``aa ac ...`` --
bijective base 19, skipping LEIR keywords (``log``, ``min``, ``inf`` are spelled with index
letters but only appear after 380 names).

>>> tensor_name(0), tensor_name(19), tensor_name(20), tensor_name(40)
('A', 'Z', 'Aa', 'Ca')
>>> index_names(4)
['a', 'c', 'd', 'f']
"""

from __future__ import annotations

from itertools import count
from typing import Iterable, Iterator

from .ast import KEYWORDS

TENSOR_ALPHABET = "ACDEFGHIJKMNOQRSWXYZ"
INDEX_ALPHABET = "acdfghijklmnopqrsuw"


def _bijective(n: int, alphabet: str) -> str:
    if n < 0:
        raise ValueError("names are numbered from 0")
    n += 1
    digits = []
    while n:
        n, r = divmod(n - 1, len(alphabet))
        digits.append(alphabet[r])
    return "".join(reversed(digits))


def tensor_name(n: int) -> str:
    """The ``n``-th tensor name (0 -> ``A``, 19 -> ``Z``, 20 -> ``Aa``, 40 -> ``Ca``)."""
    s = _bijective(n, TENSOR_ALPHABET)
    return s[0] + s[1:].lower()


def tensor_name_supply() -> Iterator[str]:
    """A, C, D, ..., Z, Aa, Ac, ..."""
    return (tensor_name(n) for n in count())


def index_name_supply() -> Iterator[str]:
    """a, c, d, ..., w, aa, ac, ... (LEIR keywords skipped)."""
    for n in count():
        name = _bijective(n, INDEX_ALPHABET)
        if name not in KEYWORDS:
            yield name


def index_names(count_: int) -> list[str]:
    """The first ``count_`` ordinary index names."""
    supply = index_name_supply()
    return [next(supply) for _ in range(count_)]


def fresh(used: Iterable[str], supply: Iterator[str], k: int) -> list[str]:
    """The first ``k`` names of ``supply`` that are not in ``used``."""
    used = set(used)
    out = []
    if k <= 0:
        return out
    for name in supply:
        if name not in used:
            out.append(name)
            if len(out) == k:
                return out
    return out
