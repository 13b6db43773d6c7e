"""``nn.Module`` leaves -> the functional call they perform.

torch.fx keeps standard ``torch.nn`` modules as ``call_module`` nodes; each is translated by the
emitter of its functional form (``nn.Conv2d`` -> ``conv2d(x, weight, bias, stride, ...)``), with
the module's parameters as parameter inputs and its buffers as constants.
"""

from __future__ import annotations

import torch.nn as nn

from .errors import UnsupportedOp


def module_call(translator, module: nn.Module, path: str, node_name: str, args, kwargs):
    """``(op name, args, kwargs, inplace)`` for a call of ``module`` (at ``path``, fx node
    ``node_name``) with ``args``."""
    for cls in type(module).__mro__:
        mapper = _MODULES.get(cls)
        if mapper is not None:
            break
    else:
        raise UnsupportedOp(f"nn.{type(module).__name__}", node_name, path,
                            "no LEIR emitter for this module (see docs/COVERAGE.md)")

    def param(attr):
        value = getattr(module, attr, None)
        if value is None:
            return None
        if isinstance(value, nn.Parameter):
            return translator.parameter(value, f"{path}.{attr}")
        return value  # a buffer: a known tensor, made a constant where it is read

    try:
        name, new_args, new_kwargs = mapper(module, param, list(args), dict(kwargs))
    except UnsupportedOp as err:  # a mapper refusing an argument: say where
        raise UnsupportedOp(err.op, node_name, path, err.reason) from None
    inplace = bool(getattr(module, "inplace", False))
    return name, tuple(new_args), new_kwargs, inplace


_MODULES: dict[type, object] = {}


def has_emitter(module: nn.Module) -> bool:
    """Is ``module`` a leaf this table translates (so that it may be traced as one call)?"""
    return any(cls in _MODULES for cls in type(module).__mro__)


def _maps(*classes):
    def register(fn):
        for cls in classes:
            _MODULES[cls] = fn
        return fn
    return register


def _simple(name, **attrs):
    """A module that is its functional op with some attributes passed as keywords."""
    def mapper(m, param, args, kwargs):
        extra = {k: getattr(m, a) for k, a in attrs.items()}
        return name, args, {**extra, **kwargs}
    return mapper


for _cls, _name in [(nn.ReLU, "relu"), (nn.ReLU6, "relu6"), (nn.Sigmoid, "sigmoid"),
                    (nn.Tanh, "tanh"), (nn.SiLU, "silu"), (nn.Mish, "mish"),
                    (nn.Hardswish, "hardswish"), (nn.Hardsigmoid, "hardsigmoid"),
                    (nn.Softsign, "softsign"), (nn.SELU, "selu"), (nn.LogSigmoid, "logsigmoid"),
                    (nn.Tanhshrink, "tanhshrink"), (nn.Identity, "identity")]:
    _MODULES[_cls] = _simple(_name)
_MODULES[nn.LeakyReLU] = _simple("leaky_relu", negative_slope="negative_slope")
_MODULES[nn.ELU] = _simple("elu", alpha="alpha")
_MODULES[nn.CELU] = _simple("celu", alpha="alpha")
_MODULES[nn.GELU] = _simple("gelu", approximate="approximate")
_MODULES[nn.Softplus] = _simple("softplus", beta="beta", threshold="threshold")
_MODULES[nn.Hardtanh] = _simple("hardtanh", min_val="min_val", max_val="max_val")
_MODULES[nn.Threshold] = _simple("threshold", threshold="threshold", value="value")
_MODULES[nn.Hardshrink] = _simple("hardshrink", lambd="lambd")
_MODULES[nn.Softshrink] = _simple("softshrink", lambd="lambd")
_MODULES[nn.Softmax] = _simple("softmax", dim="dim")
_MODULES[nn.LogSoftmax] = _simple("log_softmax", dim="dim")
_MODULES[nn.Softmin] = _simple("softmin", dim="dim")
_MODULES[nn.GLU] = _simple("glu", dim="dim")
_MODULES[nn.Flatten] = _simple("flatten", start_dim="start_dim", end_dim="end_dim")
_MODULES[nn.Unflatten] = _simple("unflatten", dim="dim", sizes="unflattened_size")
_MODULES[nn.CosineSimilarity] = _simple("cosine_similarity", dim="dim", eps="eps")
_MODULES[nn.PairwiseDistance] = _simple("pairwise_distance", p="norm", eps="eps",
                                        keepdim="keepdim")


@_maps(nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout)
def _dropout(m, param, args, kwargs):
    return "dropout", args, {"p": m.p, "training": m.training}


@_maps(nn.Linear)
def _linear(m, param, args, kwargs):
    return "linear", [args[0], param("weight"), param("bias")], {}


@_maps(nn.Bilinear)
def _bilinear(m, param, args, kwargs):
    return "bilinear", [args[0], args[1], param("weight"), param("bias")], {}


def _conv(name):
    def mapper(m, param, args, kwargs):
        if m.padding_mode != "zeros":
            raise UnsupportedOp(f"nn.{type(m).__name__}", "", "",
                                f"padding_mode='{m.padding_mode}' (only zero padding)")
        return name, [args[0], param("weight"), param("bias")], {
            "stride": m.stride, "padding": m.padding, "dilation": m.dilation,
            "groups": m.groups}
    return mapper


_MODULES[nn.Conv1d] = _conv("conv1d")
_MODULES[nn.Conv2d] = _conv("conv2d")
_MODULES[nn.Conv3d] = _conv("conv3d")


def _conv_transpose(name):
    def mapper(m, param, args, kwargs):
        if len(args) > 1 or kwargs.get("output_size") is not None:
            raise UnsupportedOp(f"nn.{type(m).__name__}", "", "", "an explicit output_size")
        return name, [args[0], param("weight"), param("bias")], {
            "stride": m.stride, "padding": m.padding, "output_padding": m.output_padding,
            "groups": m.groups, "dilation": m.dilation}
    return mapper


_MODULES[nn.ConvTranspose1d] = _conv_transpose("conv_transpose1d")
_MODULES[nn.ConvTranspose2d] = _conv_transpose("conv_transpose2d")
_MODULES[nn.ConvTranspose3d] = _conv_transpose("conv_transpose3d")


@_maps(nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)
def _batch_norm(m, param, args, kwargs):
    # The module uses batch statistics in training mode and when it keeps no running ones.
    use_batch = m.training or m.running_mean is None
    return "batch_norm", [args[0], param("running_mean"), param("running_var"),
                          param("weight"), param("bias"), use_batch, m.momentum or 0.0,
                          m.eps], {}


@_maps(nn.InstanceNorm1d, nn.InstanceNorm2d, nn.InstanceNorm3d)
def _instance_norm(m, param, args, kwargs):
    use_input_stats = m.training or not m.track_running_stats
    return "instance_norm", [args[0], param("running_mean"), param("running_var"),
                             param("weight"), param("bias"), use_input_stats,
                             m.momentum or 0.0, m.eps], {}


@_maps(nn.GroupNorm)
def _group_norm(m, param, args, kwargs):
    return "group_norm", [args[0], m.num_groups, param("weight"), param("bias"), m.eps], {}


@_maps(nn.LayerNorm)
def _layer_norm(m, param, args, kwargs):
    return "layer_norm", [args[0], m.normalized_shape, param("weight"), param("bias"),
                          m.eps], {}


@_maps(nn.RMSNorm)
def _rms_norm(m, param, args, kwargs):
    return "rms_norm", [args[0], m.normalized_shape, param("weight"), m.eps], {}


def _pool(name, *attrs):
    def mapper(m, param, args, kwargs):
        return name, args, {a: getattr(m, a) for a in attrs}
    return mapper


_MAX_POOL = ("kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices")
_AVG_POOL = ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad")
_MODULES[nn.MaxPool1d] = _pool("max_pool1d", *_MAX_POOL)
_MODULES[nn.MaxPool2d] = _pool("max_pool2d", *_MAX_POOL)
_MODULES[nn.MaxPool3d] = _pool("max_pool3d", *_MAX_POOL)
_MODULES[nn.AvgPool1d] = _pool("avg_pool1d", *_AVG_POOL)
_MODULES[nn.AvgPool2d] = _pool("avg_pool2d", *_AVG_POOL, "divisor_override")
_MODULES[nn.AvgPool3d] = _pool("avg_pool3d", *_AVG_POOL, "divisor_override")
_MODULES[nn.AdaptiveAvgPool1d] = _pool("adaptive_avg_pool1d", "output_size")
_MODULES[nn.AdaptiveAvgPool2d] = _pool("adaptive_avg_pool2d", "output_size")
_MODULES[nn.AdaptiveAvgPool3d] = _pool("adaptive_avg_pool3d", "output_size")
_MODULES[nn.AdaptiveMaxPool1d] = _pool("adaptive_max_pool1d", "output_size", "return_indices")
_MODULES[nn.AdaptiveMaxPool2d] = _pool("adaptive_max_pool2d", "output_size", "return_indices")
_MODULES[nn.AdaptiveMaxPool3d] = _pool("adaptive_max_pool3d", "output_size", "return_indices")


def _loss(name, *attrs):
    def mapper(m, param, args, kwargs):
        extra = {a: getattr(m, a) for a in attrs}
        if getattr(m, "weight", None) is not None:
            extra["weight"] = param("weight")
        return name, args, {**extra, **kwargs}
    return mapper


_MODULES[nn.MSELoss] = _loss("mse_loss", "reduction")
_MODULES[nn.L1Loss] = _loss("l1_loss", "reduction")
_MODULES[nn.SmoothL1Loss] = _loss("smooth_l1_loss", "reduction", "beta")
_MODULES[nn.HuberLoss] = _loss("huber_loss", "reduction", "delta")
_MODULES[nn.CrossEntropyLoss] = _loss("cross_entropy", "reduction", "ignore_index",
                                      "label_smoothing")
_MODULES[nn.NLLLoss] = _loss("nll_loss", "reduction", "ignore_index")
_MODULES[nn.KLDivLoss] = _loss("kl_div", "reduction", "log_target")
_MODULES[nn.TripletMarginLoss] = _loss("triplet_margin_loss", "margin", "p", "eps", "swap",
                                       "reduction")
_MODULES[nn.BCELoss] = _loss("binary_cross_entropy", "reduction")
_MODULES[nn.BCEWithLogitsLoss] = _loss("binary_cross_entropy_with_logits", "reduction")
_MODULES[nn.HingeEmbeddingLoss] = _loss("hinge_embedding_loss", "margin", "reduction")
_MODULES[nn.MarginRankingLoss] = _loss("margin_ranking_loss", "margin", "reduction")


@_maps(nn.BCEWithLogitsLoss)
def _bce_logits(m, param, args, kwargs):
    if m.pos_weight is not None:
        raise UnsupportedOp("nn.BCEWithLogitsLoss", "", "", "pos_weight")
    extra = {"reduction": m.reduction}
    if m.weight is not None:
        extra["weight"] = param("weight")
    return "binary_cross_entropy_with_logits", args, {**extra, **kwargs}


@_maps(nn.Embedding)
def _embedding(m, param, args, kwargs):
    return "embedding", [args[0], param("weight")], {"max_norm": m.max_norm}


@_maps(nn.RNN, nn.LSTM, nn.GRU)
def _recurrent(m, param, args, kwargs):
    hx = args[1] if len(args) > 1 else kwargs.get("hx")
    return "recurrent", [args[0], hx], {
        "mode": m.mode, "num_layers": m.num_layers, "bidirectional": m.bidirectional,
        "batch_first": m.batch_first, "hidden_size": m.hidden_size, "has_bias": m.bias,
        "weights": {name: param(name) for name in m._flat_weights_names},
        "dropout": m.dropout, "training": m.training, "proj_size": getattr(m, "proj_size", 0)}


@_maps(nn.Upsample, nn.UpsamplingNearest2d)
def _upsample(m, param, args, kwargs):
    return "interpolate", args, {"size": m.size, "scale_factor": m.scale_factor,
                                 "mode": m.mode}


@_maps(nn.ZeroPad1d, nn.ZeroPad2d, nn.ZeroPad3d, nn.ConstantPad1d, nn.ConstantPad2d,
       nn.ConstantPad3d)
def _constant_pad(m, param, args, kwargs):
    return "pad", [args[0], list(m.padding)], {"value": float(m.value)}


_MODULES[nn.PixelShuffle] = _simple("pixel_shuffle", upscale_factor="upscale_factor")
_MODULES[nn.PixelUnshuffle] = _simple("pixel_unshuffle", downscale_factor="downscale_factor")
_MODULES[nn.ChannelShuffle] = _simple("channel_shuffle", groups="groups")
_MODULES[nn.Unfold] = _simple("im2col", kernel_size="kernel_size", dilation="dilation",
                              padding="padding", stride="stride")
