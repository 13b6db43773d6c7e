"""A CPU cost model of LEIR programs (docs/COST.md): rank candidates without building them.

    cost(program) -> Cost          estimated seconds + per-nest breakdown (pure Python, no TVM)
    costs(programs) -> [Cost]      the same for many programs (exploration, search ranking)
    kernel_cost(program) -> f      f(nest): one top-level nest's seconds in program's shapes
    SharedSeconds(machine)(p)      cost(p).seconds of many programs sharing nests, each nest once
"""

from .model import (CPU, Cost, Machine, NestCost, SharedSeconds, cost, costs, kernel_cost,
                    with_params)

__all__ = ["cost", "costs", "kernel_cost", "Cost", "NestCost", "Machine", "CPU", "SharedSeconds",
           "with_params"]
