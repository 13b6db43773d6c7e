"""Fact provider of the three value splits: additive_split, multiplicative_split and
exponential_split name this package in their rule files.

``splits`` holds the ``finite_operand`` guard and the split sites and values a rule may use;
``neighbours`` more splitting values (the neighbouring element, an earlier nest's result).
"""

from .neighbours import GUARD_EXTENSIONS as _NEIGHBOURS, PARAMETER_SETS as _NEIGHBOUR_VALUES
from .splits import GUARD_EXTENSIONS as _SPLITS, PARAMETER_SETS as _SPLIT_VALUES

# the guard first: the neighbour facts extend it
GUARD_EXTENSIONS = _SPLITS + _NEIGHBOURS
PARAMETER_SETS = _SPLIT_VALUES + _NEIGHBOUR_VALUES
