"""Recurrent layers: ``nn.RNN`` (tanh, relu), ``nn.LSTM`` and ``nn.GRU``, any number of layers,
one or two directions, batch-first or not, batched or not, with or without initial states.

Per layer and direction, the input projection of every time step is one nest (parallel over
batch and time); the recurrence is one top-level nest: a loop over the batch (bound to GPU
threads: batch elements are independent) around a serial loop over time that carries the
state in a tensor indexed by the step, ``H_{n,a+1,c}`` computed from ``H_{n,a,k}``:

    nn.LSTM(I, H), input (N, T, I):
      GI_{n,t,c} = GI_{n,t,c} + X_{n,t,d}*Wih_{c,d}                       c < 4H, all t at once
      B^{N}_{tx=0}[L^{H}_{c}[H_{tx,0,c}=h0; C_{tx,0,c}=c0;];
                   L^{T}_{a}[L^{4H}_{c}L^{H}_{d}[GH_{tx,a,c}=GH_{tx,a,c}+H_{tx,a,d}*Whh_{c,d};];
                             L^{H}_{c}[i, f, o = sigmoid(GI+bih+GH+bhh) of rows c, H+c, 3H+c;
                                       C_{tx,a+1,c}=f*C_{tx,a,c}+i*tanh(g row 2H+c);
                                       H_{tx,a+1,c}=o*tanh(C_{tx,a+1,c});
                                       Y_{tx,a,c}=H_{tx,a+1,c};];];
                   L^{H}_{c}[Hn_{0,tx,c}=H_{tx,T,c}; Cn_{0,tx,c}=C_{tx,T,c};];]

The reverse direction runs step ``a`` on time ``T-1-a``. Gate formulas are PyTorch's
(docs of ``nn.LSTM``/``nn.GRU``); sigmoid and tanh are written as in ``pointwise.py`` (tanh
through ``e = exp(-2|v|)``, never inf/inf). Layer outputs are the next layer's input; dropout
between layers is an identity in eval mode and unsupported in training mode (random).
"""

from __future__ import annotations

from ..builder import Loops, Nest, Tensor
from ..context import Ctx, accumulation_dtype
from ..expr import I, vmax
from .pointwise import sigmoid_of, tanh_exp, tanh_from
from .registry import op

GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


@op("recurrent")
def recurrent(ctx: Ctx, x, hx=None, *, mode: str, num_layers: int, bidirectional: bool,
              batch_first: bool, hidden_size: int, weights: dict, has_bias: bool,
              dropout: float = 0.0, training: bool = False, proj_size: int = 0):
    """``(output, h_n)`` or, for an LSTM, ``(output, (h_n, c_n))``: the module's results."""
    if proj_size:
        raise ctx.unsupported("proj_size > 0 (LSTM projections)")
    if training and dropout > 0 and num_layers > 1:
        raise ctx.unsupported("dropout between layers in training mode is random; call "
                              "module.eval()")
    x = ctx.tensor(x)
    if x.rank not in (2, 3):
        raise ctx.unsupported(f"input of rank {x.rank} (expected 2 or 3)")
    batched = x.rank == 3
    steps = x.shape[1 if batch_first and batched else 0]
    batch = x.shape[0 if batch_first else 1] if batched else 1
    dirs = 2 if bidirectional else 1
    h0 = c0 = None
    if hx is not None:
        h0, c0 = (hx if mode == "LSTM" else (hx, None))
        h0 = ctx.tensor(h0)
        c0 = ctx.tensor(c0) if c0 is not None else None
    dtype = x.dtype
    width = dirs * hidden_size

    def layout(n, t, col):
        """Subscripts of (batch n, time t, column col) in the module's own layout."""
        if not batched:
            return (t, col)
        return (n, t, col) if batch_first else (t, n, col)

    if batched:
        out_shape = (batch, steps, width) if batch_first else (steps, batch, width)
    else:
        out_shape = (steps, width)
    state_shape = (num_layers * dirs, batch, hidden_size) if batched else \
        (num_layers * dirs, hidden_size)
    output = ctx.b.tensor(out_shape, dtype, "node", f"{ctx.node.name}.output")
    h_n = ctx.b.tensor(state_shape, dtype, "node", f"{ctx.node.name}.h_n")
    c_n = ctx.b.tensor(state_shape, dtype, "node", f"{ctx.node.name}.c_n") \
        if mode == "LSTM" else None

    def state_at(t: Tensor, row, n, c):
        return t.at(row, n, c) if batched else t.at(row, c)

    layer_in = (x, layout)
    for layer in range(num_layers):
        last = layer == num_layers - 1
        y = output if last else ctx.temp((batch, steps, width), dtype)
        y_layout = layout if last else (lambda n, t, col: (n, t, col))
        for d in range(dirs):
            suffix = "_reverse" if d else ""
            w = {k: weights.get(f"{k}_l{layer}{suffix}") for k in
                 ("weight_ih", "weight_hh", "bias_ih", "bias_hh")}
            _direction(ctx, mode, layer_in, (y, y_layout), w, has_bias, d, layer * dirs + d,
                       steps, batch, hidden_size, (h0, c0), (h_n, c_n), state_at, dtype)
        layer_in = (y, y_layout)
    if mode == "LSTM":
        return output, (h_n, c_n)
    return output, h_n


def _direction(ctx: Ctx, mode, layer_in, layer_out, w, has_bias, reverse, row, steps, batch,
               hidden, initial, finals, state_at, dtype):
    """The nests of one layer and direction (module doc)."""
    src, src_layout = layer_in
    y, y_layout = layer_out
    h0, c0 = initial
    h_n, c_n = finals
    gates = GATES[mode] * hidden
    w_ih, w_hh = ctx.tensor(w["weight_ih"]), ctx.tensor(w["weight_hh"])
    b_ih = ctx.tensor(w["bias_ih"]) if has_bias else None
    b_hh = ctx.tensor(w["bias_hh"]) if has_bias else None
    features = w_ih.shape[1]

    # the input projection of all time steps at once
    gi = ctx.temp((batch, steps, gates), accumulation_dtype(dtype))  # f32 for f16 (PyTorch's GEMM)
    lp = Loops((batch, steps, gates, features))
    n, t, c, k = lp
    target = gi.at(n, t, c)
    ctx.b.emit(lp, (target, target + src.at(*src_layout(n, t, k)) * w_ih.at(c, k)))

    # the recurrence: state tensors indexed by the step, 0 = initial state
    h = ctx.temp((batch, steps + 1, hidden), dtype)
    cell = ctx.temp((batch, steps + 1, hidden), dtype) if mode == "LSTM" else None
    gh = ctx.temp((batch, steps, gates), accumulation_dtype(dtype))
    outer = Loops((batch,))
    n = outer[0]

    init = Loops((hidden,))
    c = init[0]
    start = [(h.at(n, 0, c), state_at(h0, row, n, c) if h0 is not None else 0)]
    if cell is not None:
        start.append((cell.at(n, 0, c), state_at(c0, row, n, c) if c0 is not None else 0))

    time = Loops((steps,))
    a = time[0]
    s = (steps - 1) - a if reverse else a  # the time step processed at iteration a
    hidden_lp = Loops((gates, hidden))
    c, k = hidden_lp
    product = gh.at(n, a, c)
    recur = Nest(hidden_lp, (product, product + h.at(n, a, k) * w_hh.at(c, k)))

    cell_lp = Loops((hidden,))
    c = cell_lp[0]

    def pre(gate: int, part: str):
        """Row ``gate*H+c`` of the input (``i``) or hidden (``h``) projection, with its bias."""
        r = gate * hidden + c
        v = gi.at(n, s, r) if part == "i" else gh.at(n, a, r)
        bias = b_ih if part == "i" else b_hh
        return v + bias.at(r) if bias is not None else v

    new_h = h.at(n, a + 1, c)
    eqs = _cell_equations(ctx, mode, pre, h.at(n, a, c), new_h, cell, n, a, c, batch, steps,
                          hidden, dtype)
    eqs.append((y.at(*y_layout(n, s, reverse * hidden + c)), new_h))
    step = Nest(time, recur, Nest(cell_lp, *eqs))

    final = Loops((hidden,))
    c = final[0]
    ends = [(state_at(h_n, row, n, c), h.at(n, steps, c))]
    if cell is not None:
        ends.append((state_at(c_n, row, n, c), cell.at(n, steps, c)))
    ctx.b.emit(outer, Nest(init, *start), step, Nest(final, *ends))


def _cell_equations(ctx: Ctx, mode, pre, h_prev, h_new, cell, n, a, c, batch, steps, hidden,
                    dtype) -> list:
    """The equations of one step of one cell (element ``c`` of the hidden state)."""
    def temp():
        t = ctx.temp((batch, steps, hidden), dtype)
        return t.at(n, a, c)

    eqs: list = []

    def let(value):
        target = temp()
        eqs.append((target, value))
        return target

    def tanh(value):
        v = let(value)
        return tanh_from(v, let(tanh_exp(v)))

    if mode == "LSTM":
        i = let(sigmoid_of(pre(0, "i") + pre(0, "h")))
        f = let(sigmoid_of(pre(1, "i") + pre(1, "h")))
        g = let(tanh(pre(2, "i") + pre(2, "h")))
        o = let(sigmoid_of(pre(3, "i") + pre(3, "h")))
        c_new = cell.at(n, I.of(a) + 1, c)
        eqs.append((c_new, f * cell.at(n, a, c) + i * g))
        eqs.append((h_new, o * tanh(c_new)))
    elif mode == "GRU":
        r = let(sigmoid_of(pre(0, "i") + pre(0, "h")))
        z = let(sigmoid_of(pre(1, "i") + pre(1, "h")))
        cand = let(tanh(pre(2, "i") + r * pre(2, "h")))
        eqs.append((h_new, (1 - z) * cand + z * h_prev))
    elif mode == "RNN_TANH":
        eqs.append((h_new, tanh(pre(0, "i") + pre(0, "h"))))
    else:
        eqs.append((h_new, vmax(pre(0, "i") + pre(0, "h"), 0)))
    return eqs
