"""Errors of the PyTorch frontend."""

from __future__ import annotations


class UnsupportedOp(ValueError):
    """A PyTorch operation the translator cannot express in LEIR.

    ``op`` names the operation (``torch.nn.functional.unfold``, ``Tensor.scatter_``,
    ``nn.LSTM``), ``node`` the torch.fx node and ``module_path`` the dotted path of the module
    that called it (``''`` for the top-level ``forward``); ``reason`` says why, when the op is
    known but one of its arguments is not supported (``ceil_mode`` on an adaptive pool, ...).
    """

    def __init__(self, op: str, node: str = "", module_path: str = "", reason: str = ""):
        self.op, self.node, self.module_path, self.reason = op, node, module_path, reason
        where = []
        if node:
            where.append(f"fx node '{node}'")
        where.append(f"module '{module_path}'" if module_path else "the top-level forward")
        text = f"unsupported op {op} at {', '.join(where)}"
        super().__init__(text + (f": {reason}" if reason else ""))


class TranslationError(RuntimeError):
    """The translator produced a program that fails validation: a bug in the frontend, not in
    the user's module. The message carries the validation problems and the op being emitted."""
