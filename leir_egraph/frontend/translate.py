"""PyTorch -> LEIR: trace a module with torch.fx, propagate shapes, translate node by node.

    >>> class M(torch.nn.Module):
    ...     def forward(self, x):
    ...         return torch.relu(x)
    >>> from_torch(M(), (torch.randn(16, 256),)).text
    'B^{16}_{tx=0}L^{256}_{a=0}[C^{f32,g}_{tx,a}=max(A^{f32,g}_{tx,a},0);];'

Pipeline: ``torch.fx.symbolic_trace`` (falling back to tracing with the non-tensor arguments
fixed, then to a tracer that makes shapes concrete, for modules whose Python code inspects
shapes); ``ShapeProp`` on the example inputs for every node's shape and dtype; then each node:

* placeholders are the forward inputs, in ``forward``'s order;
* ``get_attr`` of an ``nn.Parameter`` is a parameter input, of any other tensor a constant;
* a node whose arguments are all known values (constants, Python numbers, shapes) is computed
  right away ("folded") -- e.g. ``self.mask[:, :, :T, :T] == 0`` becomes one bool constant and
  ``math.sqrt(x.size(-1))`` a number;
* every other call goes to its emitter (``ops/``); ``nn`` modules are mapped to the same
  emitters (``modules.py``); in-place calls rebind the mutated value.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import logging
import operator
from typing import Any, Sequence

import numpy as np
import torch
import torch.fx
from torch.fx.passes.shape_prop import ShapeProp

from ..leir.program import Program
from . import ops  # noqa: F401  (registers every emitter)
from .builder import Builder, Tensor
from .context import Ctx, copy_into, leir_dtype
from .errors import TranslationError, UnsupportedOp
from .modules import module_call
from .ops.registry import FUNCTIONS, HANDLERS, METHODS
from .tracing import TraceFailure, trace

# Ops whose result shares storage with their input: an in-place update of their result would
# also change the input, which a value-by-value translation cannot follow.
_VIEW_OPS = {"view", "reshape", "transpose", "permute", "getitem", "select", "narrow",
             "squeeze", "unsqueeze", "expand", "flatten", "unflatten", "t", "getattr",
             "contiguous", "split", "chunk", "unbind", "detach", "alias"}


def output_leaves(value) -> list:
    """The leaves of what ``forward`` returns, in order: tuples and lists element by element,
    dicts by their values. The translation's outputs and the oracle's PyTorch outputs are both
    this order, so output ``i`` of the program is output ``i`` of the module."""
    flat: list = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, (tuple, list)):
            stack.extend(reversed(v))
        elif isinstance(v, dict):
            stack.extend(reversed(list(v.values())))
        else:
            flat.append(v)
    return flat


def from_torch(module, example_inputs: Sequence[Any] | Any, *, name: str | None = None) -> Program:
    """Translate ``module`` (an ``nn.Module`` or a function of tensors), called on
    ``example_inputs``, into a validated LEIR ``Program``.

    The signature lists the tensor inputs of ``forward`` in order, then constants, then
    parameters; ``program.values`` holds the constant and parameter arrays, so only the
    forward inputs need to be supplied to run it. Raises ``UnsupportedOp`` naming the op, the
    fx node and the module path when something cannot be expressed in LEIR.
    """
    if not isinstance(example_inputs, (tuple, list)):
        example_inputs = (example_inputs,)
    example_inputs = tuple(example_inputs)
    root = module if isinstance(module, torch.nn.Module) else None
    gm = trace(module, example_inputs)
    propagate_shapes(gm, example_inputs)
    label = name or (type(module).__name__ if root is not None else
                     getattr(module, "__name__", "function"))
    return Translator(gm).run(example_inputs, label)


# ---------------------------------------------------------------- shapes

def propagate_shapes(gm: torch.fx.GraphModule, example_inputs: tuple) -> None:
    """``ShapeProp`` on the example inputs (``node.meta['tensor_meta']``), leaving the module's
    buffers as they were (a BatchNorm in train mode would otherwise update its running
    statistics). Meta-device inputs are propagated in fake mode, without computing anything;
    so is a module PyTorch cannot run on the CPU (``avg_pool3d`` has no float16 kernel)."""
    n_placeholders = sum(1 for n in gm.graph.nodes if n.op == "placeholder")
    args = list(example_inputs[:n_placeholders])
    fake = any(isinstance(a, torch.Tensor) and a.device.type == "meta" for a in args)
    if not fake:
        try:
            _shape_prop(gm, args, fake=False)
            return
        except Exception:  # noqa: BLE001 -- retried with fake tensors, which need no kernels
            pass
    try:
        _shape_prop(gm, args, fake=True)
    except Exception as err:  # noqa: BLE001 -- the module itself fails on these inputs
        root = err
        while root.__cause__ is not None:
            root = root.__cause__
        first = (str(root).strip().splitlines() or [""])[0]
        raise TraceFailure(f"running {type(gm).__name__} on the example inputs failed: "
                           f"{type(root).__name__}: {first}") from err


@contextlib.contextmanager
def _quiet(logger_name: str):
    logger = logging.getLogger(logger_name)
    before = logger.disabled
    logger.disabled = True
    try:
        yield
    finally:
        logger.disabled = before


def _shape_prop(gm: torch.fx.GraphModule, args: list, fake: bool) -> None:
    saved = {k: b.detach().clone() for k, b in gm.named_buffers()}
    try:
        # ShapeProp prints a traceback before re-raising and fake tensors log failing ops;
        # the caller reports errors itself, in one line
        with torch.no_grad(), contextlib.redirect_stderr(io.StringIO()), \
                _quiet("torch._subclasses.fake_tensor"):
            if fake:
                from torch._subclasses.fake_tensor import FakeTensorMode
                mode = FakeTensorMode(allow_non_fake_inputs=True)
                with mode:  # fake CPU tensors: shapes only, no storage, same device as params
                    args = [torch.empty(a.shape, dtype=a.dtype, device="cpu")
                            if isinstance(a, torch.Tensor) else a for a in args]
                ShapeProp(gm, fake_mode=mode).propagate(*args)
            else:
                ShapeProp(gm).propagate(*args)
    finally:
        with torch.no_grad():
            for k, b in gm.named_buffers():
                if k in saved and b.shape == saved[k].shape:
                    b.copy_(saved[k])


# ---------------------------------------------------------------- translation

def _contains(value, kind) -> bool:
    if isinstance(value, kind):
        return True
    if isinstance(value, (list, tuple)):
        return any(_contains(v, kind) for v in value)
    if isinstance(value, dict):
        return any(_contains(v, kind) for v in value.values())
    if isinstance(value, slice):
        return any(_contains(v, kind) for v in (value.start, value.stop, value.step))
    return False


def _target_name(target) -> str:
    """How a user would spell the function: ``torch.floor``, ``torch.nn.functional.unfold``,
    ``operator.floordiv``."""
    module = getattr(target, "__module__", None) or ""
    qual = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or str(target)
    if module in ("_operator", "operator"):
        return f"operator.{qual}"
    if qual.startswith("_VariableFunctionsClass.") or module in ("", "torch") or \
            module.startswith("torch._C"):
        return f"torch.{qual.rsplit('.', 1)[-1]}"
    return f"{module}.{qual}"


def as_numpy(t: torch.Tensor) -> np.ndarray:
    """A tensor's values as a NumPy array of its dtype (bfloat16: ``ml_dtypes.bfloat16``, the
    lowering's bf16 arrays; NumPy has no bfloat16 of its own)."""
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        import ml_dtypes
        return t.float().numpy().astype(ml_dtypes.bfloat16)  # exact: bf16 is a prefix of f32
    return t.numpy()


class Translator:
    """Walks a shape-propagated GraphModule and emits LEIR through a Builder."""

    def __init__(self, gm: torch.fx.GraphModule):
        self.gm = gm
        self.builder = Builder()
        self._constants: dict[int, Tensor] = {}
        self._params: dict[int, Tensor] = {}
        self._param_order = {id(p): i for i, (_, p) in
                             enumerate(gm.named_parameters(remove_duplicate=False))}
        self._keepalive: list = []  # folded tensors must outlive their id() keys
        self._order = {node: k for k, node in enumerate(gm.graph.nodes)}

    # ------------------------------------------------------------ known tensors

    def constant(self, value: torch.Tensor, label: str) -> Tensor:
        """A constant input holding ``value`` (a buffer, a plain tensor attribute, a folded
        computation); the same tensor object is one constant."""
        key = id(value)
        if key not in self._constants:
            if isinstance(value, torch.nn.Parameter):
                return self.parameter(value, label)
            dtype = leir_dtype(value.dtype)
            self._keepalive.append(value)
            array = as_numpy(value).copy()
            self._constants[key] = self.builder.tensor(value.shape, dtype, "constant", label,
                                                       array)
        return self._constants[key]

    def parameter(self, value: torch.Tensor, label: str) -> Tensor:
        key = id(value)
        if key not in self._params:
            dtype = leir_dtype(value.dtype)
            array = as_numpy(value).copy()
            self._params[key] = self.builder.tensor(value.shape, dtype, "parameter", label,
                                                    array, self._param_order.get(key, 1 << 30))
        return self._params[key]

    # ------------------------------------------------------------ the walk

    def run(self, example_inputs: tuple, name: str) -> Program:
        env: dict[torch.fx.Node, Any] = {}
        inputs: list[Tensor] = []
        placeholder_index = 0
        for node in self.gm.graph.nodes:
            if node.op == "placeholder":
                if placeholder_index < len(example_inputs):
                    value = example_inputs[placeholder_index]
                elif node.args:
                    value = node.args[0]  # the parameter's default
                else:
                    raise TraceFailure(f"no example input for forward argument '{node.target}'")
                placeholder_index += 1
                if isinstance(value, torch.Tensor):
                    meta = node.meta.get("tensor_meta")
                    shape = tuple(meta.shape) if meta is not None else tuple(value.shape)
                    t = self.builder.tensor(shape, leir_dtype(value.dtype), "input", node.name)
                    inputs.append(t)
                    env[node] = t
                else:
                    env[node] = value
            elif node.op == "get_attr":
                env[node] = self._get_attr(node)
            elif node.op in ("call_function", "call_method", "call_module"):
                env[node] = self._call(node, env)
            elif node.op == "output":
                outputs = self._outputs(node, env)
                return self.builder.finish(outputs, inputs, name)
        raise TranslationError("the traced graph has no output node")

    def _get_attr(self, node):
        value: Any = self.gm
        for part in node.target.split("."):
            value = getattr(value, part)
        if isinstance(value, torch.nn.Parameter):
            return self.parameter(value, node.target)
        return value  # a buffer or plain tensor stays a known value until an op consumes it

    def _outputs(self, node, env) -> list[Tensor]:
        outputs: list[Tensor] = []
        for v in output_leaves(torch.fx.node.map_arg(node.args[0], lambda n: env[n])):
            if isinstance(v, torch.Tensor):
                v = self.constant(v, "output")
            if not isinstance(v, Tensor):
                raise UnsupportedOp(f"a {type(v).__name__} output", "output", "",
                                    "forward must return tensors")
            if v.role in ("input", "constant", "parameter") or any(v is o for o in outputs):
                copy = self.builder.tensor(v.shape, v.dtype, "node", "output")
                self.builder.context = "output copy"
                copy_into(_OutputCtx(self, node), v, copy)
                v = copy
            outputs.append(v)
        if not outputs:
            raise UnsupportedOp("forward without tensor outputs", "output", "")
        return outputs

    def _call(self, node: torch.fx.Node, env):
        args = torch.fx.node.map_arg(node.args, lambda n: env[n])
        kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: env[n])
        if not _contains((args, kwargs), Tensor):
            return self._fold(node, args, kwargs)
        module_path = self._module_path(node)
        inplace_of = None
        if node.op == "call_module":
            sub = self.gm.get_submodule(node.target)
            module_path = node.target
            name, args, kwargs, inplace = module_call(self, sub, node.target, node.name, args,
                                                      kwargs)
            op_label = f"nn.{type(sub).__name__}"
            if inplace:
                inplace_of = node.args[0]
        elif node.op == "call_method":
            name = METHODS.get(node.target)
            op_label = f"Tensor.{node.target}"
            if name is None and node.target.endswith("_") and not node.target.endswith("__"):
                name = METHODS.get(node.target[:-1])
                if name is not None:
                    inplace_of = node.args[0]
            if node.target == "__setitem__":
                inplace_of = node.args[0]
        else:
            target = node.target
            op_label = _target_name(target)
            name = FUNCTIONS.get(target)
            if name is None and target is getattr:
                name = "getattr"
            if name is None:
                base = getattr(target, "__name__", "")
                if base.endswith("_") and not base.endswith("__"):
                    owner = inspect.getmodule(target) or torch
                    plain = getattr(owner, base[:-1], None) or getattr(torch, base[:-1], None)
                    name = FUNCTIONS.get(plain)
                    if name is not None:
                        inplace_of = node.args[0]
            if (kwargs.get("inplace") is True or target is operator.setitem) and node.args:
                inplace_of = node.args[0]
        if name is None or name not in HANDLERS:
            raise UnsupportedOp(op_label, node.name, module_path,
                                "no LEIR emitter for this operation (see docs/COVERAGE.md)")
        ctx = Ctx(self, node, op_label, module_path)
        self.builder.context = f"{op_label} ({node.name})"
        result = HANDLERS[name](ctx, *args, **kwargs)
        if inplace_of is not None and isinstance(inplace_of, torch.fx.Node):
            self._rebind_inplace(inplace_of, result, env, ctx)
        return result

    def _rebind_inplace(self, mutated: torch.fx.Node, result, env, ctx: Ctx) -> None:
        """After ``x.relu_()`` every later use of ``x`` must see the new value."""
        if _is_view(mutated):
            raise ctx.unsupported("in-place update of a view changes the viewed tensor too, "
                                  "which LEIR's value-by-value translation cannot follow")
        if mutated.op == "get_attr" and self._is_state(mutated.target):
            raise ctx.unsupported("in-place update of a parameter or buffer")
        if mutated.op == "get_attr" and self._update_lost(mutated, ctx.node):
            raise ctx.unsupported("in-place update of a tensor torch.fx captured as a constant "
                                  "(made without the traced inputs, e.g. torch.zeros(...) or a "
                                  "slice of it): its later uses were computed while tracing, "
                                  "without the update; build it from the inputs (torch.cat, "
                                  "F.pad) or assign into a tensor derived from them")
        if self._viewed_later(mutated, ctx.node):
            raise ctx.unsupported("in-place update of a tensor whose view is used afterwards: "
                                  "the view would change too, which LEIR's value-by-value "
                                  "translation cannot follow")
        # a tensor the forward created (torch.zeros(...) becomes a tensor constant when
        # traced) is the forward's own value: later uses see the update
        env[mutated] = result

    def _update_lost(self, constant: torch.fx.Node, at: torch.fx.Node) -> bool:
        """Would the in-place update ``at`` of the traced constant ``constant`` be lost? Only
        uses of that very node see it: torch.fx records every other use of the tensor as
        another constant, or computes it while tracing (``buf * 2``), from the value before
        the update. So it is kept only when neither happens after ``at``: the node itself is
        used later and no other node reads the same constant."""
        order = self._order
        later = [n for n in self.gm.graph.nodes if order[n] > order[at]]
        reread = any(n.op == "get_attr" and n.target == constant.target and n is not constant
                     for n in later)
        used = any(order[u] > order[at] for u in constant.users) or bool(at.users)
        return reread or not used

    def _viewed_later(self, base: torch.fx.Node, at: torch.fx.Node) -> bool:
        """Was a view of ``base`` (``y = x[:, :2]``, a view of a view, ...) taken before node
        ``at`` and is it used after it?"""
        order = self._order
        for user in base.users:
            if user is at or order[user] > order[at] or not _is_view(user):
                continue
            if any(order[u] > order[at] for u in user.users) or self._viewed_later(user, at):
                return True
        return False

    def _is_state(self, target: str) -> bool:
        """Is the attribute ``target`` a parameter or a registered buffer of the module?"""
        owner, _, name = target.rpartition(".")
        if name.startswith("_tensor_constant"):
            return False  # torch.fx's own buffer for a tensor the forward created
        module = self.gm.get_submodule(owner) if owner else self.gm
        return name in module._parameters or name in module._buffers

    def _fold(self, node: torch.fx.Node, args, kwargs):
        """Compute a node whose arguments are all known (no program tensor involved)."""
        try:
            with torch.no_grad():
                if node.op == "call_function":
                    value = node.target(*args, **kwargs)
                elif node.op == "call_method":
                    value = getattr(args[0], node.target)(*args[1:], **kwargs)
                else:
                    value = self.gm.get_submodule(node.target)(*args, **kwargs)
        except Exception as err:  # noqa: BLE001
            raise TranslationError(f"folding the constant computation {node.format_node()} "
                                   f"failed: {err}") from err
        if isinstance(value, torch.Tensor) and value.requires_grad:
            value = value.detach()
        return value

    def _module_path(self, node: torch.fx.Node) -> str:
        stack = node.meta.get("nn_module_stack")
        if stack:
            path = list(stack.keys())[-1]
            return path if isinstance(path, str) else str(path)
        return ""


def _is_view(node: torch.fx.Node) -> bool:
    """Does the node's result share storage with its input (``_VIEW_OPS``)?"""
    if node.op not in ("call_method", "call_function"):
        return False
    name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
    return name in _VIEW_OPS


class _OutputCtx(Ctx):
    """Context for the copy nest that gives an output its own tensor."""

    def __init__(self, translator, node):
        super().__init__(translator, node, "output", "")
