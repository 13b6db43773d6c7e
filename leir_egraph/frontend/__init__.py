"""PyTorch -> LEIR.

    >>> import torch
    >>> from leir_egraph.frontend import from_torch
    >>> from_torch(torch.nn.Softmax(dim=1), (torch.randn(16, 256),)).text
    'B^{16}_{tx=0}L^{256}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,a});];B^{16}_{tx=0}L^{256}_{a=0}[E^{f32,g}_{tx}=E^{f32,g}_{tx}+exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx});];B^{16}_{tx=0}L^{256}_{a=0}[C^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx})/E^{f32,g}_{tx};];'

``from_torch(module, example_inputs)`` traces with torch.fx, propagates shapes and emits one
loop nest per elementary step; ``UnsupportedOp`` names what cannot be translated.

torch is imported on first use of ``from_torch`` or ``TraceFailure``, not with this package:
``leir --help`` and ``leir fmt`` must not pay for it.
"""

from __future__ import annotations

from ..lazy import lazy_exports

__getattr__, __all__ = lazy_exports(__name__, {
    "TranslationError": "errors", "UnsupportedOp": "errors",
    "from_torch": "translate", "TraceFailure": "translate",
})
