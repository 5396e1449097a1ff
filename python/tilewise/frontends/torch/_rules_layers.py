"""Conversion rules for layers: convolution, normalization, softmax, pooling, dropout, embedding,
attention (registered into ``_rules.RULES``; see ``_rules`` for how a rule works)."""

from __future__ import annotations

import math

import torch

import tdl_ops as T

from ._convert import Const, Unsupported, prod
from ._rules import _axis, _fill, _not, _opt, _pair, aten, binary, rule

# ---------------------------------------------------------------- convolution


def _conv(ctx, x, w, bias, stride, padding, dilation, groups, ndim):
    if ndim not in (1, 2):
        raise Unsupported(f"{ndim}-D convolution (only 1-D and 2-D)")
    s, d = _pair(stride, "stride"), _pair(dilation, "dilation")
    ws = ctx.shape(w)
    if isinstance(padding, str):
        if padding == "valid":
            p = 0
        elif s == 1 and all(d * (k - 1) % 2 == 0 for k in ws[2:]) and len(set(ws[2:])) == 1:
            p = d * (ws[2] - 1) // 2
        else:
            raise Unsupported(f"padding='{padding}' with stride {s} and kernel {tuple(ws[2:])}")
    else:
        p = _pair(padding, "padding")
    cin = ctx.shape(x)[1]
    attrs = {"stride": s, "padding": p, "dilation": d}
    if groups == 1:
        y = ctx.emit(T.conv2d if ndim == 2 else T.conv1d, x, w, **attrs)
    elif ndim == 2 and groups == cin == ws[0] and ws[1] == 1:
        y = ctx.emit(T.depthwise_conv2d, x, w, **attrs)
    else:
        raise Unsupported(f"grouped convolution (groups={groups}; only 1 and depthwise)")
    if bias is not None:
        y = ctx.emit(T.bias_add_channel, y, bias)
    return y


@rule(aten.conv2d.default, aten.conv2d.padding)
def _conv2d(ctx, a):
    """conv2d / depthwise_conv2d (equal h/w stride, padding, dilation), bias_add_channel"""
    return _conv(ctx, a.input, a.weight, a.bias, a.stride, a.padding, a.dilation, a.groups, 2)


@rule(aten.conv1d.default, aten.conv1d.padding)
def _conv1d(ctx, a):
    """conv1d, bias_add_channel"""
    return _conv(ctx, a.input, a.weight, a.bias, a.stride, a.padding, a.dilation, a.groups, 1)


@rule(aten.convolution.default)
def _convolution(ctx, a):
    """conv1d / conv2d / depthwise_conv2d (not transposed)"""
    if a.transposed:
        raise Unsupported("transposed convolution")
    return _conv(ctx, a.input, a.weight, a.bias, a.stride, a.padding, a.dilation, a.groups, len(a.stride))


# ---------------------------------------------------------------- normalization


def _ones(ctx, n, dtype=torch.float32):
    return Const(torch.ones(n, dtype=dtype), (n,), dtype, ctx.scoped(f"{ctx.node.name}.ones"))


def _zeros(ctx, n, dtype=torch.float32):
    return Const(torch.zeros(n, dtype=dtype), (n,), dtype, ctx.scoped(f"{ctx.node.name}.zeros"))


def _batch_norm(ctx, x, weight, bias, mean, var, training, eps):
    shape = ctx.shape(x)
    if len(shape) not in (2, 3, 4):
        raise Unsupported(f"batch norm of a rank-{len(shape)} input (BatchNorm1d/2d only)")
    c = shape[1]
    x4 = ctx.view(x, tuple(shape) + (1,) * (4 - len(shape)))
    weight = _ones(ctx, c) if weight is None else weight
    bias = _zeros(ctx, c) if bias is None else bias
    if training or mean is None or var is None:
        y = ctx.emit(T.batch_norm_train, x4, weight, bias, eps=float(eps))
    else:
        y = ctx.emit(T.batch_norm_inference, x4, mean, var, weight, bias, eps=float(eps))
    return ctx.view(y, shape)


@rule(aten.batch_norm.default)
def _batch_norm_rule(ctx, a):
    """batch_norm_train (training: batch statistics) / batch_norm_inference (eval: running statistics)"""
    return _batch_norm(ctx, a.input, a.weight, a.bias, a.running_mean, a.running_var, a.training, a.eps)


@rule(_opt("_native_batch_norm_legit_no_training", "default"))
def _bn_no_training(ctx, a):
    """batch_norm_inference (output 0 only)"""
    y = _batch_norm(ctx, a.input, a.weight, a.bias, a.running_mean, a.running_var, False, a.eps)
    return (y, None, None)


@rule(_opt("_native_batch_norm_legit_functional", "default"), _opt("_native_batch_norm_legit", "default"))
def _bn_functional(ctx, a):
    """batch_norm_train / batch_norm_inference (output 0 only; running-statistics updates are dropped)"""
    y = _batch_norm(ctx, a.input, a.weight, a.bias, getattr(a, "running_mean", None),
                    getattr(a, "running_var", None), a.training, a.eps)
    return (y, None, None, None, None)


def _last_axes_norm(ctx, x, normalized_shape, weight, bias, eps, op):
    shape = ctx.shape(x)
    ns = tuple(int(n) for n in normalized_shape)
    if tuple(shape[len(shape) - len(ns):]) != ns:
        raise Unsupported(f"normalized_shape {ns} does not match the input's trailing axes {shape}")
    n = prod(ns)
    x2 = ctx.view(x, tuple(shape[:len(shape) - len(ns)]) + (n,))
    weight = _ones(ctx, n) if weight is None else ctx.view(weight, (n,))
    if op is T.rms_norm:
        y = ctx.emit(T.rms_norm, x2, weight, eps=float(eps))
    else:
        bias = _zeros(ctx, n) if bias is None else ctx.view(bias, (n,))
        y = ctx.emit(T.layer_norm, x2, weight, bias, eps=float(eps))
    return ctx.view(y, shape)


@rule(aten.layer_norm.default)
def _layer_norm(ctx, a):
    """layer_norm over the trailing normalized_shape (merged into one axis)"""
    return _last_axes_norm(ctx, a.input, a.normalized_shape, a.weight, a.bias, a.eps, T.layer_norm)


@rule(aten.native_layer_norm.default)
def _native_layer_norm(ctx, a):
    """layer_norm (output 0 only)"""
    return (_last_axes_norm(ctx, a.input, a.normalized_shape, a.weight, a.bias, a.eps, T.layer_norm), None, None)


@rule(_opt("rms_norm", "default"))
def _rms_norm(ctx, a):
    """rms_norm over the trailing normalized_shape"""
    eps = a.eps if a.eps is not None else torch.finfo(ctx.out_dtype).eps
    return _last_axes_norm(ctx, a.input, a.normalized_shape, a.weight, None, eps, T.rms_norm)


# ---------------------------------------------------------------- softmax


def _along_last(ctx, x, dim, op):
    """op over the last axis, with the axis dim moved there and back by permutes."""
    shape = ctx.shape(x)
    d = _axis(dim, len(shape))
    if d == len(shape) - 1:
        return ctx.emit(op, x)
    perm = tuple(k for k in range(len(shape)) if k != d) + (d,)
    inv = tuple(perm.index(k) for k in range(len(shape)))
    y = ctx.emit(op, ctx.emit(T.permute, x, perm=perm))
    return ctx.emit(T.permute, y, perm=inv)


@rule(aten.softmax.int, aten._softmax.default)
def _softmax(ctx, a):
    """softmax (any axis, through permutes when not the last)"""
    return _along_last(ctx, a.self, a.dim, T.softmax)


@rule(aten.log_softmax.int, aten._log_softmax.default)
def _log_softmax(ctx, a):
    """log_softmax (any axis)"""
    return _along_last(ctx, a.self, a.dim, T.log_softmax)


# ---------------------------------------------------------------- pooling


def _pool_args(ctx, a, what):
    x = a.self
    shape = ctx.shape(x)
    if len(shape) not in (3, 4):
        raise Unsupported(f"{what} of a rank-{len(shape)} input")
    k = _pair(a.kernel_size, "kernel_size")
    s = _pair(a.stride, "stride") if a.stride not in (None, [], ()) else k
    p = _pair(a.padding, "padding")
    x4 = ctx.view(x, (1,) + tuple(shape)) if len(shape) == 3 else x
    h, w = ctx.shape(x4)[2:]
    floor = ((h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1)
    if tuple(ctx.out_shape[-2:]) != floor:
        raise Unsupported(f"{what} with ceil_mode=True where it changes the output size")
    return x4, k, s, p


@rule(aten.max_pool2d.default)
def _max_pool2d(ctx, a):
    """max_pool2d (square kernel, equal strides and padding, dilation 1)"""
    if _pair(a.dilation, "dilation") != 1:
        raise Unsupported(f"max pooling with dilation {a.dilation}")
    x, k, s, p = _pool_args(ctx, a, "max pooling")
    return ctx.view(ctx.emit(T.max_pool2d, x, kernel=k, stride=s, padding=p), ctx.out_shape)


@rule(aten.max_pool2d_with_indices.default)
def _max_pool2d_with_indices(ctx, a):
    """max_pool2d (the values; indices are not available)"""
    return (_max_pool2d(ctx, a), None)


@rule(aten.avg_pool2d.default)
def _avg_pool2d(ctx, a):
    """avg_pool2d (zero padding counted, as count_include_pad=True)"""
    if a.divisor_override is not None:
        raise Unsupported("avg_pool2d with divisor_override")
    x, k, s, p = _pool_args(ctx, a, "average pooling")
    if p and not a.count_include_pad:
        raise Unsupported("avg_pool2d with padding and count_include_pad=False")
    return ctx.view(ctx.emit(T.avg_pool2d, x, kernel=k, stride=s, padding=p), ctx.out_shape)


@rule(aten.adaptive_avg_pool2d.default, aten._adaptive_avg_pool2d.default)
def _adaptive_avg_pool2d(ctx, a):
    """global_avg_pool2d for (1, 1); window averages when the input divides into the output size"""
    x = a.self
    shape = ctx.shape(x)
    if len(shape) != 4:
        raise Unsupported(f"adaptive average pooling of a rank-{len(shape)} input")
    oh, ow = ctx.out_shape[2:]
    h, w = shape[2:]
    if (oh, ow) == (1, 1):
        return ctx.view(ctx.emit(T.global_avg_pool2d, x), ctx.out_shape)
    if (oh, ow) == (h, w):
        return x
    if h % oh or w % ow:
        raise Unsupported(f"adaptive average pooling from {h}x{w} to {oh}x{ow} (sizes must divide)")
    kh, kw = h // oh, w // ow
    if hasattr(T, "adaptive_avg_pool2d"):
        return ctx.emit(T.adaptive_avg_pool2d, x, kernel_h=kh, kernel_w=kw)
    if kh != kw:
        raise Unsupported(f"adaptive average pooling with {kh}x{kw} windows")
    return ctx.emit(T.avg_pool2d, x, kernel=kh, stride=kh, padding=0)


# ---------------------------------------------------------------- dropout


def _dropout(ctx, x, p):
    """x * mask / (1 - p) with the 0/1 mask a graph input (TorchImport.dropout_masks lists them)."""
    mask = ctx.input(f"{ctx.node.name}.mask", ctx.shape(x))
    if ctx.info is not None:
        ctx.info.dropout_masks[mask.name] = float(p)
    return ctx.emit(T.dropout, x, mask, p=float(p))


@rule(aten.dropout.default)
def _dropout_rule(ctx, a):
    """the input in eval mode; in training mode dropout with a mask input"""
    if not a.train or a.p == 0:
        return a.input
    return _dropout(ctx, a.input, a.p)


@rule(aten.native_dropout.default)
def _native_dropout(ctx, a):
    """as dropout (the mask output is not available)"""
    if a.train is False or a.p == 0:
        return (a.input, None)
    return (_dropout(ctx, a.input, a.p), None)


@rule(aten.feature_dropout.default, aten.alpha_dropout.default, aten.feature_alpha_dropout.default)
def _other_dropout(ctx, a):
    """the input in eval mode"""
    if a.train and a.p:
        raise Unsupported("channel / alpha dropout in training mode")
    return a.input


# ---------------------------------------------------------------- embedding


@rule(aten.embedding.default)
def _embedding(ctx, a):
    """embedding / embedding_seq (padding_idx: that row gets no gradient); constant ids 0..n-1 -> slice_axis,
    constant equal ids -> select + expand"""
    table, ids = a.weight, a.indices
    out = ctx.out_shape
    padding = int(getattr(a, "padding_idx", -1))
    if getattr(a, "scale_grad_by_freq", False):
        raise Unsupported("scale_grad_by_freq=True (gradients scaled by id counts) is not supported")
    if padding < 0 and padding != -1:
        padding += ctx.shape(table)[0]
    if isinstance(ids, Const) and ids.value is not None:
        flat = ids.value.reshape(-1).to(torch.int64)
        n, v = flat.numel(), ctx.shape(table)[0]
        holds_padding = padding >= 0 and bool((flat == padding).any())
        if n and not holds_padding and bool((flat == torch.arange(int(flat[0]), int(flat[0]) + n)).all()):
            start = int(flat[0])
            rows = ctx.emit(T.slice_axis, table, axis=0, start=start, stop=start + n)
            return ctx.view(rows, out)
        if n and not holds_padding and bool((flat == flat[0]).all()) and 0 <= int(flat[0]) < v:
            row = ctx.emit(T.select, table, axis=0, index=int(flat[0]))
            return ctx.emit(T.expand, row, shape=out, bcast=())
    attrs = {"padding_idx": padding} if padding >= 0 else {}
    rank = len(ctx.shape(ids))
    if rank == 1:
        return ctx.emit(T.embedding, table, ids, **attrs)
    if rank == 2:
        return ctx.emit(T.embedding_seq, table, ids, **attrs)
    flat_ids = ctx.view(ids, (prod(ctx.shape(ids)),))
    return ctx.view(ctx.emit(T.embedding, table, flat_ids, **attrs), out)


# ---------------------------------------------------------------- attention


@rule(aten.scaled_dot_product_attention.default)
def _sdpa(ctx, a):
    """bmatmul_nt, scale, + mask, softmax, (dropout), bmatmul"""
    q, k, v = a.query, a.key, a.value
    sq, sk, sv = ctx.shape(q), ctx.shape(k), ctx.shape(v)
    if len(sq) < 3 or sq[:-2] != sk[:-2] or sq[:-2] != sv[:-2]:
        raise Unsupported(f"attention with query {sq}, key {sk}, value {sv} (equal batch and head axes only)")
    three = len(sq) == 3
    scores = ctx.emit(T.batch_matmul_nt if three else T.bmatmul_nt, q, k)
    scale = a.scale if a.scale is not None else 1.0 / math.sqrt(sq[-1])
    scores = ctx.emit(T.scale, scores, alpha=float(scale), beta=0.0)
    sshape = ctx.shape(scores)
    mask = a.attn_mask
    if a.is_causal:
        if mask is not None:
            raise Unsupported("is_causal together with attn_mask")
        L, S = sq[-2], sk[-2]
        mask = Const(torch.ones(L, S, dtype=torch.bool).tril(), (L, S), torch.bool,
                     ctx.scoped(f"{ctx.node.name}.causal_mask"))
    if mask is not None:
        if _arg_dtype(ctx, mask, 3) == torch.bool:
            # A boolean mask says where to attend: the others get -inf (nothing to do when all attend).
            scores = _fill(ctx, scores, _not(ctx, mask), float("-inf"))
        else:
            scores = binary(ctx, "add", scores, mask, out=sshape)
    p = ctx.emit(T.softmax, scores)
    if a.dropout_p:
        p = _dropout(ctx, p, a.dropout_p)
    return ctx.emit(T.batch_matmul if three else T.bmatmul, p, v)


def _arg_dtype(ctx, value, index):
    """The torch dtype of a node's argument (constants know theirs; tensors from the fx node)."""
    if isinstance(value, Const):
        return value.dtype
    args = ctx.node.args
    m = args[index] if len(args) > index else ctx.node.kwargs.get("attn_mask")
    return getattr(getattr(m, "meta", {}).get("val"), "dtype", None)


# ---------------------------------------------------------------- recurrent


def _unrolled(ctx, a, kind, states, cell, fold_hh_bias=False):
    """A multi-layer recurrent layer unrolled over time (tagged for coarsening), shared by LSTM and GRU.

    ``states``: the initial states, (layers * directions, batch, hidden) each (h first);
    ``cell(layer, p, states, w_hh, b_hh)`` returns the new states of one time step from ``p``, the
    step's input projection x W_ih^T + b_ih. As PyTorch does, a layer projects its whole input
    sequence in one ``linear`` (one GEMM with batch * steps rows, and so are its input and weight
    gradients) and each step selects its rows. ``fold_hh_bias`` (a cell that only adds b_hh to the
    projection, the LSTM's): the projection's bias is b_ih + b_hh and ``cell`` gets b_hh None, so the
    steps add no bias and its gradient is one sum over the sequence's rows, not one per step. A
    bidirectional layer runs a second chain over the reversed sequence; its outputs are concatenated
    with the forward ones at each time step. Returns the output sequence and the final states, each
    stacked.
    """
    dirs = 2 if a.bidirectional else 1
    layers = int(a.num_layers)
    params = list(a.params)
    if not a.has_biases or len(params) != 4 * layers * dirs:
        raise Unsupported(f"{kind} without biases" + (" or with projections (proj_size)" if kind == "LSTM" else ""))
    drop = a.dropout and a.train and layers > 1
    if drop and dirs == 2:
        raise Unsupported(f"dropout between the layers of a bidirectional {kind} in training mode")
    x = a.input
    time_axis = 1 if a.batch_first else 0
    steps = ctx.shape(x)[time_axis]
    hidden = ctx.shape(states[0])[-1]
    width = hidden * dirs
    seq, xs = x, None  # a layer's input sequence; its time steps (after the first layer)
    finals = [[] for _ in states]
    for layer in range(layers):
        if xs is not None:
            seq = _stack(ctx, xs, time_axis, width)
        per_dir = []
        for d in range(dirs):
            k = layer * dirs + d
            w_ih, w_hh, b_ih, b_hh = params[4 * k: 4 * k + 4]
            s = [ctx.emit(T.select, s0, axis=0, index=k) for s0 in states]
            outs = [None] * steps
            suffix = "_reverse" if d else ""
            if fold_hh_bias:
                b_ih = ctx.emit(T.add, b_ih, b_hh, name=f"l{layer}{suffix}.bias")
                b_hh = None
            proj = ctx.emit(T.linear, seq, w_ih, b_ih, name=f"l{layer}{suffix}.input_projection")
            with ctx.g.unroll(ctx.scoped(f"{ctx.node.name}.l{layer}{suffix}")) as u:
                for n in range(steps):
                    t = steps - 1 - n if d else n
                    with u.step(n):
                        p = ctx.emit(T.select, proj, axis=time_axis, index=t, name=f"l{layer}{suffix}.step_input")
                        s = cell(f"{layer}{suffix}", p, s, w_hh, b_hh)
                        outs[t] = _dropout(ctx, s[0], a.dropout) if drop and layer < layers - 1 else s[0]
            per_dir.append(outs)
            for final, v in zip(finals, s):
                final.append(v)
        xs = per_dir[0] if dirs == 1 else [ctx.emit(T.models.concat_op(2), f, b, axis=1)
                                           for f, b in zip(*per_dir)]
    return (_stack(ctx, xs, time_axis, width),) + tuple(_stack(ctx, f, 0, hidden) for f in finals)


@rule(aten.lstm.input)
def _lstm(ctx, a):
    """one input projection per layer (onto b_ih + b_hh); unrolled gates (projection + linear_nobias of
    h), lstm_cell, lstm_hidden per layer and time step (tagged for coarsening), stacked"""
    def cell(layer, p, states, w_hh, b_hh):  # layer: its number, "_reverse" added for the reverse direction
        h, c = states
        gh = ctx.emit(T.linear_nobias, h, w_hh, name=f"l{layer}.lstm_hidden_projection")
        gates = ctx.emit(T.add, p, gh, name=f"l{layer}.lstm_gates")
        c = ctx.emit(T.lstm_cell, gates, c, name=f"l{layer}.lstm_cell")
        return ctx.emit(T.lstm_hidden, gates, c, name=f"l{layer}.lstm_hidden"), c
    return _unrolled(ctx, a, "LSTM", list(a.hx), cell, fold_hh_bias=True)


@rule(aten.gru.input)
def _gru(ctx, a):
    """one input projection per layer; unrolled linear (hidden pre-activations) and gru_cell per layer and
    time step, stacked"""
    def cell(layer, gi, states, w_hh, b_hh):
        (h,) = states
        gh = ctx.emit(T.linear, h, w_hh, b_hh, name=f"l{layer}.gru_hidden")
        return (ctx.emit(T.gru_cell, gi, gh, h, name=f"l{layer}.gru_cell"),)
    return _unrolled(ctx, a, "GRU", [a.hx], cell)


def _stack(ctx, ts, axis, inner):
    """Same-shape tensors stacked along a new axis: one n-input op (a view for one tensor)."""
    if len(ts) == 1:
        shape = ctx.shape(ts[0])
        return ctx.view(ts[0], tuple(shape[:axis]) + (1,) + tuple(shape[axis:]))
    return ctx.emit(T.models.stack_op(len(ts)), *ts, axis=axis, inner=inner)


# ---------------------------------------------------------------- group norm


def _group_norm(ctx, x, groups, weight, bias, eps):
    """layer_norm (no affine) over each group of channels and the spatial axes, then the channel affine."""
    shape = ctx.shape(x)
    n, c = shape[0], shape[1]
    groups = int(groups)
    if c % groups:
        raise Unsupported(f"group norm of {c} channels in {groups} groups")
    rest = prod(shape[1:]) // groups
    y = _last_axes_norm(ctx, ctx.view(x, (n, groups, rest)), (rest,), None, None, eps, T.layer_norm)
    y = ctx.view(y, shape)
    per_channel = (c,) + (1,) * (len(shape) - 2)
    bcast = (0,) + tuple(range(2, len(shape)))  # of the (1, c, 1, ...) view: every axis but the channels
    if weight is not None:
        y = ctx.emit(T.broadcast_mul, y, ctx.view(weight, (1,) + per_channel), b_bcast=bcast)
    if bias is not None:
        if len(shape) == 4:
            y = ctx.emit(T.bias_add_channel, y, bias)
        else:
            y = ctx.emit(T.broadcast_add, y, ctx.view(bias, (1,) + per_channel), b_bcast=bcast)
    return y


@rule(aten.group_norm.default)
def _group_norm_rule(ctx, a):
    """layer_norm over each group (a view), broadcast_mul by the weight, bias_add_channel"""
    return _group_norm(ctx, a.input, a.num_groups, a.weight, a.bias, a.eps)


@rule(aten.native_group_norm.default)
def _native_group_norm(ctx, a):
    """as group_norm (output 0 only)"""
    return (_group_norm(ctx, a.input, a.group, a.weight, a.bias, a.eps), None, None)


# ---------------------------------------------------------------- upsampling


def _interp_matrices(ctx, a, spatial):
    """The interpolation matrix of each spatial axis, (out, in), as torch computes it: the same ATen
    op applied to one-hot inputs (interpolation is separable, and each row of weights sums to 1)."""
    mats = []
    target = ctx.node.target
    args, kwargs = ctx.node.args, ctx.node.kwargs
    for d, n in enumerate(spatial):
        probe_shape = (n, 1) + tuple(spatial)
        probe = torch.zeros(probe_shape, dtype=torch.float64)
        for k in range(n):
            idx = (k, 0) + tuple(k if e == d else slice(None) for e in range(len(spatial)))
            probe[idx] = 1.0
        with torch.no_grad():
            out = target(probe, *args[1:], **kwargs)
        first = (slice(None), 0) + tuple(slice(None) if e == d else 0 for e in range(len(spatial)))
        mats.append(out[first].T.contiguous())  # (out extent, in extent)
    return mats


def _repeat_factor(m) -> int | None:
    """s when the matrix m (out, in) repeats each input s times (nearest upsampling by an integer), else None."""
    o, i = m.shape
    if o % i:
        return None
    s = o // i
    want = torch.eye(i, dtype=m.dtype).repeat_interleave(s, dim=0)
    return s if torch.equal(m, want) else None


def _upsample(ctx, a):
    x = _first_arg(a)
    shape = ctx.shape(x)
    spatial = tuple(shape[2:])
    if len(spatial) not in (1, 2):
        raise Unsupported(f"upsampling of a rank-{len(shape)} input (1-D and 2-D only)")
    mats = _interp_matrices(ctx, a, spatial)
    factors = [_repeat_factor(m) for m in mats]
    if all(f is not None for f in factors):
        if all(f == 1 for f in factors):
            return x
        if len(spatial) == 2 and factors[0] == factors[1]:
            return ctx.emit(T.upsample_nearest2d, x, scale=factors[0])
        x4 = x if len(spatial) == 2 else ctx.view(x, tuple(shape[:2]) + (1, spatial[0]))
        sh, sw = (factors[0], factors[1]) if len(spatial) == 2 else (1, factors[0])
        return ctx.view(ctx.emit(T.upsample_nearest2d_hw, x4, sh=sh, sw=sw), ctx.out_shape)
    # Any other size or mode: one matrix product per spatial axis with torch's own weights.
    ndim = len(shape)
    y = x
    for d in reversed(range(len(spatial))):
        axis = 2 + d
        mt = mats[d].T.to(torch.float32).contiguous()  # (in, out)
        const = Const(mt, tuple(mt.shape), torch.float32, ctx.scoped(f"{ctx.node.name}.interp{d}"))
        if axis == ndim - 1:
            y = ctx.emit(T.matmul_nd, y, const)
        else:
            perm = tuple(k for k in range(ndim) if k != axis) + (axis,)
            inv = tuple(perm.index(k) for k in range(ndim))
            y = ctx.emit(T.permute, ctx.emit(T.matmul_nd, ctx.emit(T.permute, y, perm=perm), const), perm=inv)
    return y


def _first_arg(a):
    return a[0] if a._positional else a.input


@rule(aten.upsample_nearest2d.vec, aten.upsample_nearest2d.default, aten.upsample_nearest1d.vec,
      aten.upsample_nearest1d.default, aten.upsample_bilinear2d.vec, aten.upsample_bilinear2d.default,
      aten.upsample_linear1d.vec, aten.upsample_linear1d.default)
def _upsample_rule(ctx, a):
    """upsample_nearest2d / upsample_nearest2d_hw (integer factors), else matmul_nd per axis by torch's weights"""
    return _upsample(ctx, a)


# ---------------------------------------------------------------- adaptive max pooling


@rule(aten.adaptive_max_pool1d.default)
def _adaptive_max_pool1d(ctx, a):
    """max_pool1d (non-overlapping windows: the input length a multiple of the output's; the values only)"""
    from ._rules import LazyOutputs

    x = a.self
    shape = ctx.shape(x)
    if len(shape) not in (2, 3):
        raise Unsupported(f"adaptive max pooling of a rank-{len(shape)} input")
    length, out = shape[-1], ctx.node.meta["val"][0].shape[-1]
    if length % out:
        raise Unsupported(f"adaptive max pooling from {length} to {out} (the sizes must divide)")
    vshape = tuple(ctx.node.meta["val"][0].shape)

    def values(c):
        if out == length:
            return x
        x3 = c.view(x, (1,) + tuple(shape)) if len(shape) == 2 else x
        return c.view(c.emit(T.max_pool1d, x3, kernel=length // out), vshape)

    def indices(c):
        raise Unsupported("the indices of adaptive max pooling")
    return LazyOutputs(values, indices)


@rule(aten.adaptive_max_pool2d.default)
def _adaptive_max_pool2d(ctx, a):
    """global_max_pool2d for (1, 1); max_pool2d when the input divides into square windows (the values only)"""
    from ._rules import LazyOutputs

    x = a.self
    shape = ctx.shape(x)
    if len(shape) != 4:
        raise Unsupported(f"adaptive max pooling of a rank-{len(shape)} input")
    vshape = tuple(ctx.node.meta["val"][0].shape)
    (h, w), (oh, ow) = shape[2:], vshape[2:]
    if h % oh or w % ow or (h // oh != w // ow and (oh, ow) != (1, 1)):
        raise Unsupported(f"adaptive max pooling from {h}x{w} to {oh}x{ow} (only square windows that divide)")

    def values(c):
        if (oh, ow) == (h, w):
            return x
        if (oh, ow) == (1, 1):
            return c.view(c.emit(T.global_max_pool2d, x), vshape)
        k = h // oh
        return c.emit(T.max_pool2d, x, kernel=k, stride=k, padding=0)

    def indices(c):
        raise Unsupported("the indices of adaptive max pooling")
    return LazyOutputs(values, indices)
