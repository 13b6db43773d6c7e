"""The table of supported PyTorch operations.

Every emitter is registered once under a canonical name together with the torch functions and
Tensor method names that mean the same thing; ``nn.Module`` leaves are mapped to the same
emitters in ``modules.py``. An emitter is called as ``emit(ctx, *args, **kwargs)`` with the
arguments of the PyTorch call, fx nodes replaced by ``Tensor`` handles or Python values.
"""

from __future__ import annotations

from typing import Callable

HANDLERS: dict[str, Callable] = {}
FUNCTIONS: dict[object, str] = {}
METHODS: dict[str, str] = {}


def op(name: str, *functions, methods: tuple[str, ...] = ()):
    """Register an emitter as ``name`` for ``functions`` (callables such as ``torch.relu``,
    ``F.relu``) and Tensor ``methods`` (``"relu"``); in-place spellings (``relu_``,
    ``torch.relu_``) are derived automatically by the translator."""
    def register(fn: Callable) -> Callable:
        if name in HANDLERS:
            raise ValueError(f"op {name} registered twice")
        HANDLERS[name] = fn
        for f in functions:
            if f is not None:
                FUNCTIONS[f] = name
        for m in methods:
            METHODS[m] = name
        return fn
    return register
