"""Lazy package exports: a package's ``__init__`` names what it exports and from which of its
modules, and each is imported on first use. ``leir --help``, ``leir fmt`` and ``import
leir_egraph`` must not pay for TVM, egglog, torch, polars or networkx, which the layers' modules
import; a package that imported its modules eagerly would make every command that touches it
(if only to register its subcommand) pay for all of them.

    __getattr__, __all__ = lazy_exports(__name__, {"verify": "verifier", ...})
"""

from __future__ import annotations

import importlib
import sys
from typing import Callable


def lazy_exports(package: str, exports: dict[str, str]) -> tuple[Callable[[str], object], list]:
    """A module ``__getattr__`` for ``package`` that imports ``name`` from the submodule
    ``exports[name]`` on first access (and caches it in the package), and the ``__all__``.

    A name that is also the name of its submodule (``lower.build``'s ``build``) is imported at
    once: importing a submodule sets the package attribute of that name to the module, which
    would otherwise hide the function from ``from package import name``."""
    for name, module in exports.items():
        if name == module:
            setattr(sys.modules[package], name,
                    getattr(importlib.import_module(f"{package}.{module}"), name))

    def __getattr__(name: str):
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{exports[name]}"), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__, list(exports)
