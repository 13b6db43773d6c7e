"""LEIR names as the reference translator hands them out (REFERENCE_NOTES section 1.3/1.4).

Tensors: ``A C D E F G H I J K M N O Q R S W X Y Z`` (no ``L P V B U T``), then two letters,
first capital: ``Aa Ac ... Az Ca ...`` -- bijective base 20.  Loop indices:
``a c d f g h i j k l m n o p q r s u w`` (no ``t b v x y z e``), then ``aa ac ...`` --
bijective base 19.  ``tensor_name(20) == 'Aa'``, ``index_name(2) == 'd'``.
"""

from __future__ import annotations

from ..leir.ast import KEYWORDS

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


def index_names(count: int) -> list[str]:
    """The first ``count`` ordinary index names, skipping LEIR keywords (``log``, ``min``,
    ``inf`` are spelled with index letters but can only appear after 380 names)."""
    out, n = [], 0
    while len(out) < count:
        name = _bijective(n, INDEX_ALPHABET)
        n += 1
        if name not in KEYWORDS:
            out.append(name)
    return out
