"""Conversion rules for layers: convolution, pooling, normalization, softmax (registered into
``_rules.RULES``; see ``_rules`` for how a rule works)."""

from __future__ import annotations

import math

import numpy as np

import tdl_ops as T

from ._convert import Known, Unsupported
from ._rules import axis, binary, expand_to, rule

# ---------------------------------------------------------------- windows (convolution, pooling)


def _pads(ctx, n, x, kernel, strides, dilations):
    """(begin, end) padding per spatial axis from ``pads`` or ``auto_pad``."""
    spatial = ctx.shape(x)[2:]
    k = len(spatial)
    auto = n.attr("auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        pads = list(n.attr("pads", [0] * (2 * k)))
        pairs = [(int(pads[d]), int(pads[d + k])) for d in range(k)]
    elif auto == "VALID":
        pairs = [(0, 0)] * k
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        pairs = []
        for size, kk, s, d in zip(spatial, kernel, strides, dilations, strict=True):
            total = max((math.ceil(size / s) - 1) * s + (kk - 1) * d + 1 - size, 0)
            small, big = total // 2, total - total // 2
            pairs.append((small, big) if auto == "SAME_UPPER" else (big, small))
    else:
        raise Unsupported(f"auto_pad='{auto}'")
    if any(p < 0 for pair in pairs for p in pair):
        raise Unsupported(f"negative pads {pairs}")
    return pairs


def _one(values, what):
    """One int for all spatial axes (TDL's windows take equal height and width values)."""
    values = [int(v) for v in values]
    if len(set(values)) > 1:
        raise Unsupported(f"{what}={values}: only equal values along every spatial axis")
    return values[0] if values else 1


def _window(ctx, n, x, kernel):
    k = len(kernel)
    strides = [int(s) for s in n.attr("strides", [1] * k)]
    dilations = [int(d) for d in n.attr("dilations", [1] * k)]
    return strides, dilations, _pads(ctx, n, x, kernel, strides, dilations)


def _explicit_pad(ctx, x, pairs):
    """x padded with zeros on the spatial axes (asymmetric or unequal padding, before a window op)."""
    if all(p == (0, 0) for p in pairs):
        return x
    return ctx.emit(T.pad, x, pads=((0, 0), (0, 0)) + tuple(tuple(p) for p in pairs))


@rule("Conv")
def _conv(ctx, n):
    """conv1d / conv2d / depthwise_conv2d (asymmetric or unequal pads: a zero pad op first), bias_add_channel"""
    x, w = n.inputs[0], n.inputs[1]
    b = n.input(2)
    xs, ws = ctx.shape(x), ctx.shape(w)
    if len(xs) not in (3, 4):
        raise Unsupported(f"{len(xs) - 2}-D convolution (only 1-D and 2-D)")
    kernel = [int(v) for v in n.attr("kernel_shape", ws[2:])]
    if tuple(kernel) != tuple(ws[2:]):
        raise Unsupported(f"kernel_shape {kernel} differs from the weight's {ws[2:]}")
    strides, dilations, pairs = _window(ctx, n, x, kernel)
    s, d = _one(strides, "strides"), _one(dilations, "dilations")
    group = int(n.attr("group", 1))
    if len({p for pair in pairs for p in pair}) == 1:
        p = pairs[0][0]
    else:
        x, p = _explicit_pad(ctx, x, pairs), 0
    attrs = {"stride": s, "padding": p, "dilation": d}
    if group == 1:
        y = ctx.emit(T.conv2d if len(xs) == 4 else T.conv1d, x, w, **attrs)
    elif len(xs) == 4 and group == xs[1] == ws[0] and ws[1] == 1:
        y = ctx.emit(T.depthwise_conv2d, x, w, **attrs)
    else:
        raise Unsupported(f"grouped convolution (group={group}; only 1 and depthwise 2-D)")
    if b is not None:
        y = ctx.emit(T.bias_add_channel, y, b)
    return y


@rule("ConvTranspose")
def _conv_transpose(ctx, n):
    """conv2d_backward_data / conv1d_backward_data (the transposed convolution) at full size, slice_axis
    for the pads, bias_add_channel"""
    x, w = n.inputs[0], n.inputs[1]
    b = n.input(2)
    xs, ws = ctx.shape(x), ctx.shape(w)
    k = len(xs) - 2
    if k not in (1, 2):
        raise Unsupported(f"{k}-D transposed convolution (only 1-D and 2-D)")
    if int(n.attr("group", 1)) != 1:
        raise Unsupported(f"grouped transposed convolution (group={n.attr('group')})")
    kernel = [int(v) for v in n.attr("kernel_shape", ws[2:])]
    if tuple(kernel) != tuple(ws[2:]):
        raise Unsupported(f"kernel_shape {kernel} differs from the weight's {ws[2:]}")
    strides = [int(v) for v in n.attr("strides", [1] * k)]
    dilations = [int(v) for v in n.attr("dilations", [1] * k)]
    out_pad = [int(v) for v in n.attr("output_padding", [0] * k)]
    s, d = _one(strides, "strides"), _one(dilations, "dilations")
    full = [s * (i - 1) + op + (kk - 1) * d + 1 for i, op, kk in zip(xs[2:], out_pad, kernel, strict=True)]
    auto, shape = n.attr("auto_pad", "NOTSET"), n.attr("output_shape")
    if shape or auto in ("SAME_UPPER", "SAME_LOWER"):
        want = [int(v) for v in shape][-k:] if shape else [i * s for i in xs[2:]]
        pairs = []
        for f, o in zip(full, want, strict=True):
            total = f - o
            half = total // 2
            pairs.append((half, total - half) if auto == "SAME_UPPER" or (shape and auto != "SAME_LOWER")
                         else (total - half, half))
    elif auto in ("NOTSET", "", "VALID"):
        pads = [int(v) for v in n.attr("pads", [0] * (2 * k))] if auto != "VALID" else [0] * (2 * k)
        pairs = [(pads[j], pads[j + k]) for j in range(k)]
    else:
        raise Unsupported(f"auto_pad='{auto}'")
    if any(p < 0 for pair in pairs for p in pair):
        raise Unsupported(f"negative pads {pairs}")
    attrs = {"stride": s, "padding": 0, "dilation": d}
    if k == 2:
        y = ctx.emit(T.conv2d_backward_data, x, w, in_h=full[0], in_w=full[1], **attrs)
    else:
        y = ctx.emit(T.conv1d_backward_data, x, w, in_w=full[0], **attrs)
    for j, (lo, hi) in enumerate(pairs):
        if lo or hi:
            y = ctx.emit(T.slice_axis, y, axis=2 + j, start=lo, stop=full[j] - hi)
    if b is not None:
        y = ctx.emit(T.bias_add_channel, y, b)
    return y


def _pool_common(ctx, n, what):
    x = n.inputs[0]
    xs = ctx.shape(x)
    if len(xs) != 4:
        raise Unsupported(f"{what} of a rank-{len(xs)} input (2-D pooling only)")
    kernel = [int(v) for v in n.attr("kernel_shape")]
    strides, dilations, pairs = _window(ctx, n, x, kernel)
    if any(d != 1 for d in dilations):
        raise Unsupported(f"{what} with dilations {dilations}")
    if n.attr("storage_order", 0):
        raise Unsupported("storage_order=1")
    return x, _one(kernel, "kernel_shape"), _one(strides, "strides"), pairs


def _floor_or_same(ctx, n, shape_out, what):
    if n.attr("ceil_mode", 0) and n.out_shapes[0] is not None and tuple(n.out_shapes[0]) != tuple(shape_out):
        raise Unsupported(f"{what} with ceil_mode=1 where it changes the output size")


@rule("MaxPool")
def _max_pool(ctx, n):
    """max_pool2d (square kernel, equal strides, symmetric equal pads, dilation 1)"""
    if n.wants(1):
        raise Unsupported("the Indices output")
    x, k, s, pairs = _pool_common(ctx, n, "max pooling")
    if len({p for pair in pairs for p in pair}) != 1:
        raise Unsupported(f"max pooling with unequal pads {pairs} (only the same padding on every side)")
    p = pairs[0][0]
    y = ctx.emit(T.max_pool2d, x, kernel=k, stride=s, padding=p)
    _floor_or_same(ctx, n, ctx.shape(y), "max pooling")
    return y


@rule("AveragePool")
def _avg_pool(ctx, n):
    """avg_pool2d (square kernel, equal strides; pads only with count_include_pad=1, then a zero pad op)"""
    x, k, s, pairs = _pool_common(ctx, n, "average pooling")
    y = ctx.emit(T.avg_pool2d, _explicit_pad(ctx, x, pairs), kernel=k, stride=s, padding=0)
    _floor_or_same(ctx, n, ctx.shape(y), "average pooling")
    if any(p for pair in pairs for p in pair) and not n.attr("count_include_pad", 0):
        # The window's mean over the real elements only: the mean over k*k (padding counted as
        # zeros) times k*k / (the real elements in the window), a per-position constant.
        inside = np.pad(np.ones(ctx.shape(x)[2:]), pairs)
        oh, ow = ctx.shape(y)[2:]
        count = np.array([[inside[s * i:s * i + k, s * j:s * j + k].sum() for j in range(ow)] for i in range(oh)])
        y = binary(ctx, "mul", y, _const(ctx, (k * k / count)[None, None], "count_scale"))
    return y


@rule("GlobalAveragePool")
def _global_avg_pool(ctx, n):
    """global_avg_pool2d, viewed as (N, C, 1, 1)"""
    x = n.inputs[0]
    xs = ctx.shape(x)
    if len(xs) != 4:
        raise Unsupported(f"global pooling of a rank-{len(xs)} input (2-D only)")
    return ctx.view(ctx.emit(T.global_avg_pool2d, x), xs[:2] + (1, 1))


@rule("GlobalMaxPool")
def _global_max_pool(ctx, n):
    """global_max_pool2d, viewed as (N, C, 1, 1)"""
    x = n.inputs[0]
    xs = ctx.shape(x)
    if len(xs) != 4:
        raise Unsupported(f"global pooling of a rank-{len(xs)} input (2-D only)")
    return ctx.view(ctx.emit(T.global_max_pool2d, x), xs[:2] + (1, 1))


# ---------------------------------------------------------------- normalization


def _const(ctx, value, what):
    return Known(np.asarray(value, np.float32), f"{ctx.node.name}.{what}")


@rule("BatchNormalization")
def _batch_norm(ctx, n):
    """batch_norm_inference (running statistics as constants; inputs of rank 2-4 viewed as 4-D)"""
    if int(n.attr("training_mode", 0)) or any(n.wants(k) for k in range(1, 5)):
        raise Unsupported("training mode (batch statistics and running-statistics outputs)")
    if n.opset < 9 and not int(n.attr("spatial", 1)):
        raise Unsupported("spatial=0")
    x, scale, bias, mean, var = n.inputs
    shape = ctx.shape(x)
    if len(shape) not in (2, 3, 4):
        raise Unsupported(f"batch normalization of a rank-{len(shape)} input")
    x4 = ctx.view(x, tuple(shape) + (1,) * (4 - len(shape)))
    y = ctx.emit(T.batch_norm_inference, x4, ctx.tensor(mean, role="constant"), ctx.tensor(var, role="constant"),
                 scale, bias, eps=float(n.attr("epsilon", 1e-5)))
    return ctx.view(y, shape)


def _trailing(ctx, n, x, param, ns, what):
    """A scale or bias of the normalized trailing axes as one vector."""
    count = int(np.prod(ns))
    ps = ctx.shape(param)
    if tuple(ps) != tuple(ns):
        if len(ps) > len(ns) or T.torch_extra.broadcast_shape(ps, ns) != tuple(ns):
            raise Unsupported(f"a {what} of shape {ps} for normalized axes {ns}")
        param = expand_to(ctx, param, ns)
    return ctx.view(param, (count,))


def _last_axes(ctx, n, x):
    shape = ctx.shape(x)
    a = axis(n.attr("axis", -1), len(shape))
    ns = tuple(shape[a:])
    return shape, a, ns, ctx.view(x, (int(np.prod(shape[:a])), int(np.prod(ns))))


@rule("LayerNormalization")
def _layer_norm(ctx, n):
    """layer_norm over the axes from ``axis`` on (merged into one); Mean, InvStdDev by reduce_mean, reduce_var, rsqrt"""
    x, scale = n.inputs[0], n.inputs[1]
    bias = n.input(2)
    eps = float(n.attr("epsilon", 1e-5))
    shape, a, ns, x2 = _last_axes(ctx, n, x)
    count = int(np.prod(ns))
    gamma = _trailing(ctx, n, x, scale, ns, "scale")
    beta = _trailing(ctx, n, x, bias, ns, "bias") if bias is not None else _const(ctx, np.zeros(count), "zeros")
    y = ctx.view(ctx.emit(T.layer_norm, x2, gamma, beta, eps=eps), shape)
    stat_shape = tuple(shape[:a]) + (1,) * len(ns)
    mean = inv = None
    if n.wants(1):
        total = ctx.emit(T.sum_axes, x2, axes=(1,))
        mean = ctx.view(ctx.emit(T.scale, total, alpha=1.0 / count, beta=0.0), stat_shape)
    if n.wants(2):
        var = ctx.emit(T.scale, ctx.emit(T.reduce_var, x2, axis=1), alpha=1.0, beta=eps)
        inv = ctx.view(ctx.emit(T.rsqrt, var), stat_shape)
    return (y, mean, inv)


@rule("RMSNormalization")
def _rms_norm(ctx, n):
    """rms_norm over the axes from ``axis`` on (merged into one)"""
    x, scale = n.inputs[0], n.inputs[1]
    shape, a, ns, x2 = _last_axes(ctx, n, x)
    gamma = _trailing(ctx, n, x, scale, ns, "scale")
    return ctx.view(ctx.emit(T.rms_norm, x2, gamma, eps=float(n.attr("epsilon", 1e-5))), shape)


@rule("InstanceNormalization")
def _instance_norm(ctx, n):
    """layer_norm (no affine) over each channel's spatial axes, then the channel scale and bias"""
    x, scale, bias = n.inputs
    shape = ctx.shape(x)
    if len(shape) < 3:
        raise Unsupported(f"instance normalization of a rank-{len(shape)} input")
    c, rest = shape[1], int(np.prod(shape[2:]))
    y = ctx.emit(T.layer_norm, ctx.view(x, (shape[0], c, rest)), _const(ctx, np.ones(rest), "ones"),
                 _const(ctx, np.zeros(rest), "zeros"), eps=float(n.attr("epsilon", 1e-5)))
    y = ctx.view(y, shape)
    per_channel = (c,) + (1,) * (len(shape) - 2)
    y = binary(ctx, "mul", y, ctx.view(scale, per_channel))
    if len(shape) == 4:
        return ctx.emit(T.bias_add_channel, y, bias)
    return binary(ctx, "add", y, ctx.view(bias, per_channel))


# ---------------------------------------------------------------- softmax


def _along(ctx, n, op):
    """op along ``axis`` (opset >= 13: that axis, through permutes when not the last); before 13 ONNX
    flattens the input to 2-D at ``axis`` (default 1) and normalizes each row."""
    x = n.inputs[0]
    shape = ctx.shape(x)
    if n.opset < 13:
        a = axis(n.attr("axis", 1), len(shape))
        rows = int(np.prod(shape[:a]))
        y = ctx.emit(op, ctx.view(x, (rows, int(np.prod(shape[a:])))))
        return ctx.view(y, shape)
    a = axis(n.attr("axis", -1), len(shape))
    if a == len(shape) - 1:
        return ctx.emit(op, x)
    perm = tuple(k for k in range(len(shape)) if k != a) + (a,)
    inv = tuple(perm.index(k) for k in range(len(shape)))
    y = ctx.emit(op, ctx.emit(T.permute, x, perm=perm))
    return ctx.emit(T.permute, y, perm=inv)


@rule("Softmax")
def _softmax(ctx, n):
    """softmax (any axis; the 2-D coercion of opsets before 13)"""
    return _along(ctx, n, T.softmax)


@rule("LogSoftmax")
def _log_softmax(ctx, n):
    """log_softmax (any axis; the 2-D coercion of opsets before 13)"""
    return _along(ctx, n, T.log_softmax)


# ---------------------------------------------------------------- resizing


def _probe(ctx, n):
    """The node as a function of its first input alone (the others known), by onnx's reference evaluator."""
    import onnx
    from onnx.reference import ReferenceEvaluator

    h = onnx.helper
    proto = n.proto
    inits = []
    for k, name in enumerate(proto.input[1:], 1):
        if name:
            inits.append(onnx.numpy_helper.from_array(np.asarray(ctx.known(n.inputs[k], f"input {k} ({name})")),
                                                      name))
    g = h.make_graph([proto], "probe", [h.make_tensor_value_info(proto.input[0], onnx.TensorProto.FLOAT, None)],
                     [h.make_empty_tensor_value_info(proto.output[0])], initializer=inits)
    evaluator = ReferenceEvaluator(h.make_model(g, opset_imports=[h.make_opsetid("", n.opset)]))
    return lambda x: np.asarray(evaluator.run(None, {proto.input[0]: x.astype(np.float32)})[0], np.float64)


def _axis_matrices(run, shape, spatial_axes):
    """The (out, in) interpolation matrix of each spatial axis, from one-hot inputs: with the other
    spatial axes all ones, output position i along axis d is sum_k A_d[i, k] x_k (their rows sum to 1)."""
    slots = shape[0] * shape[1]
    mats = []
    for d in spatial_axes:
        cols = []
        for first in range(0, shape[d], slots):
            x = np.zeros(shape)
            ks = list(range(first, min(first + slots, shape[d])))
            for j, k in enumerate(ks):
                idx = [j // shape[1], j % shape[1]] + [slice(None)] * (len(shape) - 2)
                idx[d] = k
                x[tuple(idx)] = 1.0
            y = run(x)
            for j in range(len(ks)):
                line = [j // shape[1], j % shape[1]] + [0] * (len(shape) - 2)
                line[d] = slice(None)
                cols.append(y[tuple(line)])
        mats.append(np.stack(cols, axis=1))
    return mats


def _separable(x, mats, spatial_axes):
    for a, m in zip(spatial_axes, mats, strict=True):
        x = np.moveaxis(np.tensordot(m, x, axes=([1], [a])), 0, a)
    return x


def _repeat(m):
    """s when m (out, in) repeats each input s times (nearest upsampling by an integer), else None."""
    o, i = m.shape
    if o % i:
        return None
    s = o // i
    return s if np.array_equal(m, np.repeat(np.eye(i), s, axis=0)) else None


@rule("Resize", "Upsample")
def _resize(ctx, n):
    """upsample_nearest2d(_hw) for integer nearest upsampling, else matmul_nd per spatial axis with the
    interpolation weights ONNX's reference computes (any mode; checked to be separable)"""
    x = n.inputs[0]
    shape = ctx.shape(x)
    run = _probe(ctx, n)
    out = run(np.zeros(shape)).shape
    if tuple(out[:2]) != tuple(shape[:2]):
        raise Unsupported(f"resizing the batch or channel axes ({shape} to {out})")
    spatial = list(range(2, len(shape)))
    mats = _axis_matrices(run, shape, spatial)
    probe = np.random.default_rng(0).standard_normal(shape).astype(np.float32).astype(np.float64)
    if not np.allclose(_separable(probe, mats, spatial), run(probe), rtol=1e-5, atol=1e-6):
        raise Unsupported("a resize that is not one interpolation per axis (e.g. an extrapolation value)")
    factors = [_repeat(m) for m in mats]
    if all(f == 1 for f in factors):
        return x
    if len(shape) == 4 and all(f is not None for f in factors):
        return ctx.emit(T.upsample_nearest2d_hw, x, sh=factors[0], sw=factors[1])
    y = x
    for a, m in zip(reversed(spatial), reversed(mats), strict=True):
        weights = _const(ctx, m.T, f"interp{a}")  # (in, out)
        if a == len(shape) - 1:
            y = ctx.emit(T.matmul_nd, y, weights)
        else:
            perm = tuple(k for k in range(len(shape)) if k != a) + (a,)
            inv = tuple(perm.index(k) for k in range(len(shape)))
            y = ctx.emit(T.permute, ctx.emit(T.matmul_nd, ctx.emit(T.permute, y, perm=perm), weights), perm=inv)
    return y
