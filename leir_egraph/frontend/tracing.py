"""Tracing a module with torch.fx the way a user would, with three tracers in turn:

1. plain symbolic tracing;
2. the same with the non-tensor forward arguments fixed (``concrete_args``);
3. torch.fx's MetaTracer, whose proxies carry the example inputs' shapes, so that Python code
   over shapes (``if x.size(0) > 1``, ``for t in range(x.size(1))``, ``math.sqrt(k.size(-1))``)
   runs with real numbers and loops over time unroll.

All three record through :class:`Decomposing`, which adds two things to torch.fx:

* ``nn`` modules with an entry in ``decompositions.py`` (``nn.MultiheadAttention``,
  ``nn.TransformerEncoderLayer``, the RNN cells, ...) are traced *through* a decomposition
  written in plain torch operations instead of being kept as one ``call_module``; their
  parameters are read as ``get_attr`` nodes, so slices of them stay parameters;
* ``x[key] = value`` on a traced tensor is recorded (as a ``__setitem__`` call, which the
  translator treats as an in-place update); torch.fx's own proxies refuse item assignment.

    >>> gm = trace(torch.nn.MultiheadAttention(8, 2), (q, q, q))        # doctest: +SKIP
    >>> {n.target for n in gm.graph.nodes if n.op == "call_function"}    # doctest: +SKIP
    {<built-in function linear>, <built-in method softmax ...>, ...}

A root module that is itself a leaf with an emitter (``nn.LSTM`` given alone) or has a
decomposition is traced as one call of it (its own ``forward`` may not trace, or take a fused
fast path).
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import types
import warnings

import torch
import torch.fx
from torch.fx.experimental.meta_tracer import MetaProxy, MetaTracer

from .decompositions import DECOMPOSITIONS
from .errors import UnsupportedOp
from .modules import has_emitter


class TraceFailure(ValueError):
    """torch.fx could not trace the module (data-dependent control flow and the like)."""


def trace(module, example_inputs: tuple) -> torch.fx.GraphModule:
    """A GraphModule of ``module``: plain symbolic tracing first; then with the non-tensor
    arguments fixed to their values (``concrete_args``); then with shapes made concrete from
    the example inputs, so that Python code like ``if x.size(0) > 1`` or
    ``math.sqrt(k.size(-1))`` traces. ``UnsupportedOp`` (a decomposition refusing an option)
    is raised as is: no other tracer would do better."""
    with _attributes_kept(module) as restore:
        return _trace(module, example_inputs, restore)


@contextlib.contextmanager
def _attributes_kept(module):
    """Tracing runs ``forward`` on proxies: a forward that assigns a module attribute
    (``self.hidden = torch.tanh(...)``, an ``h0`` left ``None`` until the first call) leaves a
    proxy there, which the next tracer or the translation would read. Every submodule's plain
    attributes are put back as they were after each tracing attempt."""
    modules = list(module.modules()) if isinstance(module, torch.nn.Module) else []
    saved = [(m, dict(m.__dict__)) for m in modules]

    def restore():
        for m, attributes in saved:
            for name in [n for n in m.__dict__ if n not in attributes]:
                del m.__dict__[name]
            m.__dict__.update(attributes)

    try:
        yield restore
    finally:
        restore()


def _trace(module, example_inputs: tuple, restore) -> torch.fx.GraphModule:
    errors = []
    if isinstance(module, torch.nn.Module) and type(module) in DECOMPOSITIONS:
        # its own forward is never traced (nn.MultiheadAttention's has a fused fast path):
        # a call of it is, and the call goes through its decomposition
        module = _one_call(module, len(example_inputs))
    try:
        return _symbolic(module, restore=restore)
    except UnsupportedOp:
        raise
    except Exception as err:  # noqa: BLE001 -- any tracing failure moves on to the next tracer
        errors.append(err)
        restore()
    if isinstance(module, torch.nn.Module) and has_emitter(module):
        # a torch.nn module whose own forward does not trace (nn.LSTM checks input.dim()):
        # one call of it, as it appears inside a model
        return _one_call(module, len(example_inputs))
    params = _forward_parameters(module)
    concrete = {p: v for p, v in zip(params, example_inputs) if not isinstance(v, torch.Tensor)}
    if concrete:
        try:
            return _symbolic(module, concrete, restore)
        except UnsupportedOp:
            raise
        except Exception as err:  # noqa: BLE001
            errors.append(err)
            restore()
    try:
        return _meta_trace(module, params, example_inputs, concrete)
    except UnsupportedOp:
        raise
    except Exception as err:  # noqa: BLE001
        errors.append(err)
    first, last = (_first_line(e) for e in (errors[0], errors[-1]))
    detail = first if last == first else f"{first}; with concrete shapes: {last}"
    raise TraceFailure(f"torch.fx cannot trace {type(module).__name__}: {detail}") from errors[-1]


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else repr(err)


def _meta_trace(module, params, example_inputs, concrete) -> torch.fx.GraphModule:
    """torch.fx's MetaTracer: proxies carry the example inputs' shapes, so ``x.size()``,
    ``x.dim()`` and ``x.shape`` are concrete during tracing. It traces a meta copy of the
    module on meta copies of the inputs (nothing is computed; real and meta values never mix,
    whatever MetaTracer computes itself), and the graph is then attached to the real module's
    parameters."""
    root = module if isinstance(module, torch.nn.Module) else _FunctionModule(module)
    tensors = {p: v.to("meta") for p, v in zip(params, example_inputs)
               if isinstance(v, torch.Tensor)}
    traced_root = _meta_copy(root)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # MetaTracer warns for every op it cannot run
        graph = _MetaTracer().trace(traced_root, meta_args=tensors,
                                    concrete_args=concrete or None)
    # parameters and buffers from the real module, constants the tracer added
    owner: dict = {}
    for node in graph.nodes:
        if node.op == "call_module":
            owner[node.target] = root.get_submodule(node.target)
        elif node.op == "get_attr":
            owner[node.target] = _attribute(root, node.target, _attribute(
                traced_root, node.target, None))
    gm = torch.fx.GraphModule(owner, graph, type(root).__name__)
    # shape queries answered during tracing leave dead nodes; in-place calls have no users
    gm.graph.eliminate_dead_code(_impure)
    gm.recompile()
    return gm


def _meta_copy(root: torch.nn.Module) -> torch.nn.Module:
    """A copy whose parameters (and the buffers of torch.nn leaf modules, which run on meta
    inputs) live on the meta device. Other buffers stay real: torch.fx folds computations on
    them (``self.mask[:, :, :T, :T] == 0``) into constants whose values must be real."""
    memo: dict = {}
    dup = copy.deepcopy(root, memo)
    _rebind_closures(dup, memo)
    for sub in dup.modules():
        for name, p in list(sub._parameters.items()):
            if p is not None:
                sub._parameters[name] = torch.nn.Parameter(p.to("meta"), p.requires_grad)
        if type(sub).__module__.startswith("torch.nn"):
            for name, b in list(sub._buffers.items()):
                if b is not None:
                    sub._buffers[name] = b.to("meta")
    return dup


def _rebind_closures(dup: torch.nn.Module, memo: dict) -> None:
    """A module may keep a function over its own submodules as a plain attribute
    (KernelBench's MiniGPTBlock: ``m = self.mlp; self.mlpf = lambda x: m.c_proj(...)``).
    ``deepcopy`` copies functions by reference, so the copy's function would still call the
    original's submodules, which the tracer does not find in the copy. Each such function is
    remade over the copies of what its closure holds (``memo``: the deepcopy's own map)."""
    for sub in dup.modules():
        for name, value in list(sub.__dict__.items()):
            if isinstance(value, types.FunctionType) and value.__closure__:
                cells = tuple(types.CellType(memo.get(id(c.cell_contents), c.cell_contents))
                              for c in value.__closure__)
                fn = types.FunctionType(value.__code__, value.__globals__, value.__name__,
                                        value.__defaults__, cells)
                fn.__kwdefaults__ = value.__kwdefaults__
                sub.__dict__[name] = fn


def _attribute(module, dotted: str, default):
    value = module
    for part in dotted.split("."):
        if not hasattr(value, part):
            return default
        value = getattr(value, part)
    return value


def _one_call(module: torch.nn.Module, n_inputs: int) -> torch.fx.GraphModule:
    """A graph with one ``call_module`` of ``module`` on ``n_inputs`` placeholders named after
    its forward's parameters."""
    root = torch.nn.Module()
    root.module = module
    graph = torch.fx.Graph()
    names = _forward_parameters(module)[:n_inputs]
    names += [f"input_{k}" for k in range(len(names), n_inputs)]
    out = graph.call_module("module", tuple(graph.placeholder(n) for n in names))
    graph.output(out)
    return torch.fx.GraphModule(root, graph, type(module).__name__)


class _FunctionModule(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def _forward_parameters(module) -> list[str]:
    fn = module.forward if isinstance(module, torch.nn.Module) else module
    return [p.name for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


# ---------------------------------------------------------------- the tracers

class _SetItem:
    """Item assignment on a traced tensor, recorded as a ``__setitem__`` call."""

    def __setitem__(self, key, value):
        self.tracer.create_proxy("call_method", "__setitem__", (self, key, value), {})


class _Proxy(_SetItem, torch.fx.Proxy):
    pass


class _MetaProxyWithSetItem(_SetItem, MetaProxy):
    @property
    def device(self):
        # the traced values stand for the caller's CPU tensors (their meta copies are on
        # "meta"): ``if x.device != self.clusters.device: raise ...`` (NetVLAD) is a branch on
        # where the tensors live, decided for the example inputs as other shape-only branches
        return torch.device("cpu")

    def size(self, dim=None):
        # MetaProxy.size(0) answers the whole size (it tests ``if dim``), so x.size(0) broke
        meta = getattr(self, "_tensor_meta", None)
        if meta is not None and dim is not None:
            return meta.size(dim)
        return super().size(dim)


class _ModuleView:
    """What a decomposition sees of a module: parameters and buffers as traced ``get_attr``
    values (an op on them is recorded, not computed), everything else as is."""

    def __init__(self, tracer, module: torch.nn.Module, path: str):
        self._tracer, self._module, self._path = tracer, module, path

    def __getattr__(self, name):
        module = self._module
        tensor = module._parameters.get(name, module._buffers.get(name))
        if tensor is not None:
            target = f"{self._path}.{name}" if self._path else name
            return self._tracer.create_proxy("get_attr", target, (), {})
        return getattr(module, name)


class Decomposing:
    """Tracer mix-in: decompositions and item assignment (module doc)."""

    def is_leaf_module(self, m: torch.nn.Module, qualified_name: str) -> bool:
        if type(m) in DECOMPOSITIONS:
            return False
        return super().is_leaf_module(m, qualified_name)

    def call_module(self, m, forward, args, kwargs):
        decomposition = DECOMPOSITIONS.get(type(m))
        if decomposition is not None:
            view = _ModuleView(self, m, self.path_of_module(m))

            def forward(*a, **k):
                return decomposition(view, *a, **k)
        return super().call_module(m, forward, args, kwargs)


class _Tracer(Decomposing, torch.fx.Tracer):
    def proxy(self, node):
        return _Proxy(node, self)


class _MetaTracer(Decomposing, MetaTracer):
    def proxy(self, node):
        return _MetaProxyWithSetItem(node, self)

    def create_proxy(self, kind, target, args, kwargs, *rest, **options):
        proxy = super().create_proxy(kind, target, args, kwargs, *rest, **options)
        if kind in ("call_function", "call_method") and \
                getattr(proxy, "_tensor_meta", None) is None:
            # MetaTracer could not mix meta values with a real tensor (a real buffer kept for
            # folding, ``att.masked_fill(self.mask[..., :T, :T] == 0, -inf)``): again on meta
            def meta(v):
                if isinstance(v, torch.fx.Proxy):
                    return getattr(v, "_tensor_meta", v)
                return v.to("meta") if isinstance(v, torch.Tensor) else v
            a = torch.fx.node.map_aggregate(args, meta)
            k = torch.fx.node.map_aggregate(kwargs, meta)
            leaves: list = []
            torch.fx.node.map_aggregate((a, k), leaves.append)
            if not any(isinstance(v, torch.fx.Proxy) for v in leaves):  # every shape known
                try:
                    fn = target if kind == "call_function" else getattr(a[0], target)
                    out = fn(*a, **k) if kind == "call_function" else fn(*a[1:], **k)
                    proxy.install_tensor_meta(out)
                except Exception:  # noqa: BLE001 -- no shape then, as MetaTracer itself
                    pass
        return proxy


def _symbolic(module, concrete_args=None, restore=lambda: None) -> torch.fx.GraphModule:
    """``torch.fx.symbolic_trace`` with the decomposing tracer; ``restore`` runs between the
    trace and the GraphModule, which copies the attributes the graph reads from the module."""
    tracer = _Tracer()
    graph = tracer.trace(module, concrete_args)
    restore()
    name = type(module).__name__ if isinstance(module, torch.nn.Module) else module.__name__
    return torch.fx.GraphModule(tracer.root, graph, name)


def _impure(node: torch.fx.Node) -> bool:
    """Nodes dead-code elimination keeps: torch.fx's own notion, and in-place method calls
    (``y.copy_(x)``, ``x[k] = v``), whose effect is on their first argument."""
    return node.is_impure() or (node.op == "call_method" and node.target.endswith("_"))
