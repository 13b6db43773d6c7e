"""Op emitters by family; importing this package registers all of them."""

from . import (attention, conv, linalg, losses, norms, pointwise, pooling,  # noqa: F401
               recurrent, reductions, shape)
from .registry import FUNCTIONS, HANDLERS, METHODS, op

__all__ = ["FUNCTIONS", "HANDLERS", "METHODS", "op"]
