"""A CPU cost model of LEIR programs (docs/COST.md): rank candidates without building them.

    cost(program) -> Cost          estimated seconds + per-nest breakdown (pure Python, no TVM)
    costs(programs) -> [Cost]      the same for many programs (exploration, search ranking)
"""

from .model import CPU, Cost, Machine, NestCost, cost, costs, with_params

__all__ = ["cost", "costs", "Cost", "NestCost", "Machine", "CPU", "with_params"]
