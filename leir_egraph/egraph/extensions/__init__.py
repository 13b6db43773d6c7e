"""Shared vocabulary modules: guard relations and parameters that strategies of more than one
family read (today the value-range guards of the algebraic math rules). A relation only one
strategy or family reads belongs in a fact provider beside its rule files (vocabulary.py,
docs/RULES.md §5).

Every module in this package may define

* ``GUARD_EXTENSIONS``: a sequence of :class:`~leir_egraph.egraph.guards.GuardExtension`
  (more relations/facts/egglog rules for one of the guards, or a new extra guard);
* ``PARAMETER_SETS``: a sequence of :class:`~leir_egraph.egraph.parameters.ParameterSet`.

Modules are discovered in name order; nothing needs registering by hand.
"""

from __future__ import annotations

import importlib
import pkgutil


def _modules():
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        yield importlib.import_module(f"{__name__}.{info.name}")


def guard_extensions() -> list:
    return [e for m in _modules() for e in getattr(m, "GUARD_EXTENSIONS", ())]


def parameter_sets() -> list:
    return [p for m in _modules() for p in getattr(m, "PARAMETER_SETS", ())]
