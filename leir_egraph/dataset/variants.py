"""Dataset variants: what the chat sets are written in, and whether they are balanced.

A variant changes only how the verified transitions of one run become chat examples:

* ``representation``: ``leir`` (prompts and answers in LEIR) or ``tir`` (in the TVMScript
  text of the TensorIR that the records already hold, ``before_tir``/``after_tir``: the
  paper's TIR variant);
* ``cot``: the answer opens with the chain of thought (``<think>...</think>``) or is the
  ``<answer>`` alone;
* ``filter``: difficulty balancing (``balance.py``) or every verified transition.

``--variants paper`` writes the four datasets of the paper's Tables 5-6 side by side from the
one enumeration and verification of the run (nothing is recomputed per variant)::

    tir-nocot     TIR, no CoT, filtered
    leir-nocot    LEIR, no CoT, filtered
    leir-nofilter LEIR, CoT, not filtered
    full          LEIR, CoT, filtered (what a plain run writes)

The three filtered variants hold exactly the same transitions (the balancing draws depend on
the records and the seed only), so they differ in representation and CoT alone.

With CoT in the TIR representation the chain of thought still describes the LEIR step (it is
derived from the rule, the site and the nests it changes), which is why the paper's TIR variant
has none; the option is allowed and says so in docs/DATASET.md.
"""

from __future__ import annotations

from dataclasses import dataclass

REPRESENTATIONS = ("leir", "tir")


@dataclass(frozen=True)
class Variant:
    name: str                 # folder name under variants/ ("" for a single-variant run)
    representation: str = "leir"
    cot: bool = True
    filter: bool = True

    def __post_init__(self):
        if self.representation not in REPRESENTATIONS:
            raise ValueError(f"representation must be leir or tir, not {self.representation!r}")

    def describe(self) -> str:
        return (f"{self.representation.upper()}, {'with' if self.cot else 'without'} CoT, "
                f"{'with' if self.filter else 'without'} filtering")


PAPER = (Variant("tir-nocot", "tir", cot=False, filter=True),
         Variant("leir-nocot", "leir", cot=False, filter=True),
         Variant("leir-nofilter", "leir", cot=True, filter=False),
         Variant("full", "leir", cot=True, filter=True))
VARIANT_SETS = {"paper": PAPER}


def variants_of(variants: str | None, representation: str = "leir", cot: bool = True,
                filter: bool = True) -> tuple[Variant, ...]:
    """The variants a run writes: a named set, or the one its options describe."""
    if variants is not None:
        if variants not in VARIANT_SETS:
            raise ValueError(f"unknown variant set {variants!r}; use one of "
                             f"{', '.join(VARIANT_SETS)}")
        return VARIANT_SETS[variants]
    return (Variant("", representation, cot, filter),)
