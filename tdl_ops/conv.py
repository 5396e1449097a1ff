"""Convolutions (PyTorch layouts: NCW / NCHW data, (co, ci, k...) weights), their gradient ops and rules.

The data gradient of a convolution is a transposed convolution of dy and the filter gradient a
correlation of the data with dy; both take the forward stride, padding and dilation and the
forward extents (in_h/in_w, kernel_h/kernel_w) because a strided convolution may ignore the
last rows of its input."""

from __future__ import annotations

import numpy as np

import tilewise.tdl as tw

from ._cases import Case


def _out(n, k, s, p, d):
    """Output extent of a convolution / pooling window."""
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def _divides(expr, s):
    """1.0 where s divides the index expression (always 1 when s == 1)."""
    return 1.0 if s == 1 else (tw.index_value(expr % s) == 0)


# ---------------------------------------------------------------- NumPy references


def _pad(x, p, axes, value=0.0):
    width = [(0, 0)] * x.ndim
    for a in axes:
        width[a] = (p, p)
    return np.pad(x, width, constant_values=value)


def _conv1d_ref(x, w, stride=1, padding=0, dilation=1):
    s, p, d = stride, padding, dilation
    ow = _out(x.shape[2], w.shape[2], s, p, d)
    xp = _pad(x, p, (2,))
    out = np.zeros((x.shape[0], w.shape[0], ow))
    for k in range(w.shape[2]):
        out += np.einsum("bcx,oc->box", xp[:, :, d * k: d * k + s * (ow - 1) + 1: s], w[:, :, k])
    return out


def _conv2d_ref(x, w, stride=1, padding=0, dilation=1):
    s, p, d = stride, padding, dilation
    oh, ow = _out(x.shape[2], w.shape[2], s, p, d), _out(x.shape[3], w.shape[3], s, p, d)
    xp = _pad(x, p, (2, 3))
    out = np.zeros((x.shape[0], w.shape[0], oh, ow))
    for i in range(w.shape[2]):
        for j in range(w.shape[3]):
            patch = xp[:, :, d * i: d * i + s * (oh - 1) + 1: s, d * j: d * j + s * (ow - 1) + 1: s]
            out += np.einsum("bchw,oc->bohw", patch, w[:, :, i, j])
    return out


def _depthwise_ref(x, w, stride=1, padding=0, dilation=1):
    s, p, d = stride, padding, dilation
    oh, ow = _out(x.shape[2], w.shape[2], s, p, d), _out(x.shape[3], w.shape[3], s, p, d)
    xp = _pad(x, p, (2, 3))
    out = np.zeros((x.shape[0], x.shape[1], oh, ow))
    for i in range(w.shape[2]):
        for j in range(w.shape[3]):
            patch = xp[:, :, d * i: d * i + s * (oh - 1) + 1: s, d * j: d * j + s * (ow - 1) + 1: s]
            out += patch * w[:, 0, i, j][None, :, None, None]
    return out


def _natural_in(o, k, s, p, d):
    return (o - 1) * s - 2 * p + d * (k - 1) + 1


def _conv2d_bwd_data_shape(dy, w, stride=1, padding=0, dilation=1, in_h=0, in_w=0):
    h = in_h or _natural_in(dy[2], w[2], stride, padding, dilation)
    ww = in_w or _natural_in(dy[3], w[3], stride, padding, dilation)
    return (dy[0], w[1], h, ww)


def _conv2d_bwd_data_ref(dy, w, stride=1, padding=0, dilation=1, in_h=0, in_w=0):
    s, p, d = stride, padding, dilation
    n, _, h, wd = _conv2d_bwd_data_shape(dy.shape, w.shape, s, p, d, in_h, in_w)
    oh, ow = dy.shape[2], dy.shape[3]
    big_h = max(h + 2 * p, d * (w.shape[2] - 1) + s * (oh - 1) + 1)
    big_w = max(wd + 2 * p, d * (w.shape[3] - 1) + s * (ow - 1) + 1)
    dxp = np.zeros((n, w.shape[1], big_h, big_w))
    for i in range(w.shape[2]):
        for j in range(w.shape[3]):
            dxp[:, :, d * i: d * i + s * (oh - 1) + 1: s, d * j: d * j + s * (ow - 1) + 1: s] += \
                np.einsum("bohw,oc->bchw", dy, w[:, :, i, j])
    return dxp[:, :, p: p + h, p: p + wd]


def _natural_k(n, o, s, p, d):
    return (n + 2 * p - s * (o - 1) - 1) // d + 1


def _conv2d_bwd_filter_shape(x, dy, stride=1, padding=0, dilation=1, kernel_h=0, kernel_w=0):
    kh = kernel_h or _natural_k(x[2], dy[2], stride, padding, dilation)
    kw = kernel_w or _natural_k(x[3], dy[3], stride, padding, dilation)
    return (dy[1], x[1], kh, kw)


def _conv2d_bwd_filter_ref(x, dy, stride=1, padding=0, dilation=1, kernel_h=0, kernel_w=0):
    s, p, d = stride, padding, dilation
    co, ci, kh, kw = _conv2d_bwd_filter_shape(x.shape, dy.shape, s, p, d, kernel_h, kernel_w)
    oh, ow = dy.shape[2], dy.shape[3]
    xp = _pad(x, p, (2, 3))
    dw = np.zeros((co, ci, kh, kw))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, d * i: d * i + s * (oh - 1) + 1: s, d * j: d * j + s * (ow - 1) + 1: s]
            dw[:, :, i, j] = np.einsum("bohw,bchw->oc", dy, patch)
    return dw


def _conv1d_bwd_data_shape(dy, w, stride=1, padding=0, dilation=1, in_w=0):
    return (dy[0], w[1], in_w or _natural_in(dy[2], w[2], stride, padding, dilation))


def _conv1d_bwd_data_ref(dy, w, stride=1, padding=0, dilation=1, in_w=0):
    s, p, d = stride, padding, dilation
    n, ci, wd = _conv1d_bwd_data_shape(dy.shape, w.shape, s, p, d, in_w)
    ow = dy.shape[2]
    dxp = np.zeros((n, ci, max(wd + 2 * p, d * (w.shape[2] - 1) + s * (ow - 1) + 1)))
    for k in range(w.shape[2]):
        dxp[:, :, d * k: d * k + s * (ow - 1) + 1: s] += np.einsum("box,oc->bcx", dy, w[:, :, k])
    return dxp[:, :, p: p + wd]


def _conv1d_bwd_filter_shape(x, dy, stride=1, padding=0, dilation=1, kernel=0):
    return (dy[1], x[1], kernel or _natural_k(x[2], dy[2], stride, padding, dilation))


def _conv1d_bwd_filter_ref(x, dy, stride=1, padding=0, dilation=1, kernel=0):
    s, p, d = stride, padding, dilation
    co, ci, kw = _conv1d_bwd_filter_shape(x.shape, dy.shape, s, p, d, kernel)
    ow = dy.shape[2]
    xp = _pad(x, p, (2,))
    dw = np.zeros((co, ci, kw))
    for k in range(kw):
        dw[:, :, k] = np.einsum("box,bcx->oc", dy, xp[:, :, d * k: d * k + s * (ow - 1) + 1: s])
    return dw


def _depthwise_bwd_data_shape(dy, w, stride=1, padding=0, dilation=1, in_h=0, in_w=0):
    return _conv2d_bwd_data_shape(dy, (w[0], w[0]) + tuple(w[2:]), stride, padding, dilation, in_h, in_w)


def _depthwise_bwd_data_ref(dy, w, stride=1, padding=0, dilation=1, in_h=0, in_w=0):
    s, p, d = stride, padding, dilation
    n, c, h, wd = _depthwise_bwd_data_shape(dy.shape, w.shape, s, p, d, in_h, in_w)
    oh, ow = dy.shape[2], dy.shape[3]
    big_h = max(h + 2 * p, d * (w.shape[2] - 1) + s * (oh - 1) + 1)
    big_w = max(wd + 2 * p, d * (w.shape[3] - 1) + s * (ow - 1) + 1)
    dxp = np.zeros((n, c, big_h, big_w))
    for i in range(w.shape[2]):
        for j in range(w.shape[3]):
            dxp[:, :, d * i: d * i + s * (oh - 1) + 1: s, d * j: d * j + s * (ow - 1) + 1: s] += \
                dy * w[:, 0, i, j][None, :, None, None]
    return dxp[:, :, p: p + h, p: p + wd]


def _depthwise_bwd_filter_shape(x, dy, stride=1, padding=0, dilation=1, kernel_h=0, kernel_w=0):
    _, _, kh, kw = _conv2d_bwd_filter_shape(x, dy, stride, padding, dilation, kernel_h, kernel_w)
    return (x[1], 1, kh, kw)


def _depthwise_bwd_filter_ref(x, dy, stride=1, padding=0, dilation=1, kernel_h=0, kernel_w=0):
    s, p, d = stride, padding, dilation
    c, _, kh, kw = _depthwise_bwd_filter_shape(x.shape, dy.shape, s, p, d, kernel_h, kernel_w)
    oh, ow = dy.shape[2], dy.shape[3]
    xp = _pad(x, p, (2, 3))
    dw = np.zeros((c, 1, kh, kw))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, d * i: d * i + s * (oh - 1) + 1: s, d * j: d * j + s * (ow - 1) + 1: s]
            dw[:, 0, i, j] = np.einsum("bchw,bchw->c", dy, patch)
    return dw


# ---------------------------------------------------------------- TDL


@tw.op(reference=_conv1d_ref,
       out_shape=lambda x, w, stride=1, padding=0, dilation=1:
       (x[0], w[0], _out(x[2], w[2], stride, padding, dilation)), kernel="conv1d")
def conv1d(data, filters, stride=1, padding=0, dilation=1):
    """1-D convolution, data (n, ci, w), filters (co, ci, k)."""
    return lambda b, co, x: tw.Sum(lambda ci, dx: data[b, ci, stride * x + dilation * dx - padding]
                                   * filters[co, ci, dx])


@conv1d.def_grad
def _(g, data, filters, out, stride, padding, dilation):
    a = {"stride": stride, "padding": padding, "dilation": dilation}
    return (conv1d_backward_data(g, filters, in_w=data.shape[2], **a),
            conv1d_backward_filter(data, g, kernel=filters.shape[2], **a))


@tw.op(reference=_conv2d_ref,
       out_shape=lambda x, w, stride=1, padding=0, dilation=1:
       (x[0], w[0], _out(x[2], w[2], stride, padding, dilation), _out(x[3], w[3], stride, padding, dilation)),
       kernel="conv2d")
def conv2d(data, filters, stride=1, padding=0, dilation=1):
    """2-D convolution, data (n, ci, h, w), filters (co, ci, kh, kw)."""
    s, p, d = stride, padding, dilation
    return lambda b, co, y, x: tw.Sum(lambda ci, dy, dx: data[b, ci, s * y + d * dy - p, s * x + d * dx - p]
                                      * filters[co, ci, dy, dx])


@conv2d.def_grad
def _(g, data, filters, out, stride, padding, dilation):
    a = {"stride": stride, "padding": padding, "dilation": dilation}
    return (conv2d_backward_data(g, filters, in_h=data.shape[2], in_w=data.shape[3], **a),
            conv2d_backward_filter(data, g, kernel_h=filters.shape[2], kernel_w=filters.shape[3], **a))


@tw.op(reference=_depthwise_ref,
       out_shape=lambda x, w, stride=1, padding=0, dilation=1:
       (x[0], x[1], _out(x[2], w[2], stride, padding, dilation), _out(x[3], w[3], stride, padding, dilation)),
       kernel="depthwise_conv2d")
def depthwise_conv2d(data, filters, stride=1, padding=0, dilation=1):
    """Depthwise 2-D convolution (groups = channels), filters (c, 1, kh, kw)."""
    s, p, d = stride, padding, dilation
    return lambda b, c, y, x: tw.Sum(lambda dy, dx: data[b, c, s * y + d * dy - p, s * x + d * dx - p]
                                     * filters[c, 0, dy, dx])


@depthwise_conv2d.def_grad
def _(g, data, filters, out, stride, padding, dilation):
    a = {"stride": stride, "padding": padding, "dilation": dilation}
    return (depthwise_conv2d_backward_data(g, filters, in_h=data.shape[2], in_w=data.shape[3], **a),
            depthwise_conv2d_backward_filter(data, g, kernel_h=filters.shape[2], kernel_w=filters.shape[3], **a))


@tw.op(reference=_conv2d_bwd_data_ref, out_shape=_conv2d_bwd_data_shape, kernel="conv2d_backward_data")
def conv2d_backward_data(dy, filters, stride=1, padding=0, dilation=1, in_h=0, in_w=0):
    """Data gradient of conv2d (a transposed conv); in_h/in_w = 0: the smallest input size."""
    s, p, d = stride, padding, dilation

    def term(b, ci, h, w, co, kh, kw):
        return (_divides(h + p - d * kh, s) * _divides(w + p - d * kw, s)
                * dy[b, co, (h + p - d * kh) // s, (w + p - d * kw) // s] * filters[co, ci, kh, kw])
    return lambda b, ci, h, w: tw.Sum(lambda co, kh, kw: term(b, ci, h, w, co, kh, kw))


@tw.op(reference=_conv2d_bwd_filter_ref, out_shape=_conv2d_bwd_filter_shape, kernel="conv2d_backward_filter")
def conv2d_backward_filter(data, dy, stride=1, padding=0, dilation=1, kernel_h=0, kernel_w=0):
    """Filter gradient of conv2d; kernel_h/kernel_w = 0: derived from the shapes."""
    s, p, d = stride, padding, dilation
    return lambda co, ci, kh, kw: tw.Sum(lambda b, y, x: dy[b, co, y, x]
                                         * data[b, ci, s * y + d * kh - p, s * x + d * kw - p])


@tw.op(reference=lambda dy: dy.sum(axis=(0, 2, 3)), kernel="conv2d_bias_grad")
def conv2d_bias_grad(dy):
    """Bias gradient of conv2d: sum of dy over n, h, w."""
    return lambda co: tw.Sum(lambda b, y, x: dy[b, co, y, x])


@tw.op(reference=_conv1d_bwd_data_ref, out_shape=_conv1d_bwd_data_shape, kernel="conv1d_backward_data")
def conv1d_backward_data(dy, filters, stride=1, padding=0, dilation=1, in_w=0):
    """Data gradient of conv1d (a transposed conv); in_w = 0: the smallest input size."""
    s, p, d = stride, padding, dilation
    return lambda b, ci, x: tw.Sum(lambda co, k: _divides(x + p - d * k, s) * dy[b, co, (x + p - d * k) // s]
                                   * filters[co, ci, k])


@tw.op(reference=_conv1d_bwd_filter_ref, out_shape=_conv1d_bwd_filter_shape, kernel="conv1d_backward_filter")
def conv1d_backward_filter(data, dy, stride=1, padding=0, dilation=1, kernel=0):
    """Filter gradient of conv1d; kernel = 0: derived from the shapes."""
    s, p, d = stride, padding, dilation
    return lambda co, ci, k: tw.Sum(lambda b, x: dy[b, co, x] * data[b, ci, s * x + d * k - p])


@tw.op(reference=_depthwise_bwd_data_ref, out_shape=_depthwise_bwd_data_shape, kernel="depthwise_conv2d_backward_data")
def depthwise_conv2d_backward_data(dy, filters, stride=1, padding=0, dilation=1, in_h=0, in_w=0):
    """Data gradient of depthwise_conv2d; in_h/in_w = 0: the smallest input size."""
    s, p, d = stride, padding, dilation

    def term(b, c, h, w, kh, kw):
        return (_divides(h + p - d * kh, s) * _divides(w + p - d * kw, s)
                * dy[b, c, (h + p - d * kh) // s, (w + p - d * kw) // s] * filters[c, 0, kh, kw])
    return lambda b, c, h, w: tw.Sum(lambda kh, kw: term(b, c, h, w, kh, kw))


@tw.op(reference=_depthwise_bwd_filter_ref, out_shape=_depthwise_bwd_filter_shape,
       kernel="depthwise_conv2d_backward_filter")
def depthwise_conv2d_backward_filter(data, dy, stride=1, padding=0, dilation=1, kernel_h=0, kernel_w=0):
    """Filter gradient of depthwise_conv2d, shape (c, 1, kh, kw); kernel_h/kernel_w = 0: from the shapes."""
    s, p, d = stride, padding, dilation
    return lambda c, one, kh, kw: tw.Sum(lambda b, y, x: dy[b, c, y, x]
                                         * data[b, c, s * y + d * kh - p, s * x + d * kw - p])


_SPATIAL = [  # (name suffix, data shape, filter shape, attrs)
    ("", (2, 3, 7, 7), (4, 3, 3, 3), {}),
    ("_s2_p1", (2, 3, 7, 8), (4, 3, 3, 3), {"stride": 2, "padding": 1}),
    ("_p2_d2", (1, 2, 7, 6), (3, 2, 3, 2), {"padding": 2, "dilation": 2}),
    ("_s2_p1_d2", (2, 2, 9, 8), (3, 2, 3, 3), {"stride": 2, "padding": 1, "dilation": 2}),
    ("_s3_p0", (1, 2, 10, 11), (2, 2, 2, 3), {"stride": 3}),
]

_SPATIAL_1D = [
    ("", (2, 3, 9), (4, 3, 3), {}),
    ("_s2_p1_d2", (2, 3, 11), (4, 3, 3), {"stride": 2, "padding": 1, "dilation": 2}),
    ("_s3_p2", (1, 2, 12), (3, 2, 2), {"stride": 3, "padding": 2}),
]
_DEPTHWISE = [
    ("", (2, 3, 6, 7), (3, 1, 3, 3), {}),
    ("_s2_p1_d2", (2, 3, 8, 7), (3, 1, 3, 2), {"stride": 2, "padding": 1, "dilation": 2}),
]


def _conv_cases():
    cases = [Case("conv2d_bias_grad", [(2, 3, 4, 5)])]
    for suf, xs, ws, attrs in _SPATIAL_1D:
        out = (xs[0], ws[0], _out(xs[2], ws[2], attrs.get("stride", 1), attrs.get("padding", 0),
                                  attrs.get("dilation", 1)))
        cases.append(Case("conv1d", [xs, ws], attrs, name="conv1d" + suf))
        cases.append(Case("conv1d_backward_data", [out, ws], dict(attrs, in_w=xs[2]),
                          name="conv1d_backward_data" + suf))
        cases.append(Case("conv1d_backward_filter", [xs, out], dict(attrs, kernel=ws[2]),
                          name="conv1d_backward_filter" + suf))
    for suf, xs, ws, attrs in _SPATIAL:
        out = (xs[0], ws[0]) + tuple(_out(xs[a], ws[a], attrs.get("stride", 1), attrs.get("padding", 0),
                                          attrs.get("dilation", 1)) for a in (2, 3))
        cases.append(Case("conv2d", [xs, ws], attrs, name="conv2d" + suf))
        cases.append(Case("conv2d_backward_data", [out, ws], dict(attrs, in_h=xs[2], in_w=xs[3]),
                          name="conv2d_backward_data" + suf))
        cases.append(Case("conv2d_backward_filter", [xs, out], dict(attrs, kernel_h=ws[2], kernel_w=ws[3]),
                          name="conv2d_backward_filter" + suf))
    cases.append(Case("conv2d_backward_data", [(1, 2, 3, 3), (2, 3, 3, 3)], {"stride": 2, "padding": 1},
                      name="conv2d_backward_data_natural_size"))
    for suf, xs, ws, attrs in _DEPTHWISE:
        out = xs[:2] + tuple(_out(xs[a], ws[a], attrs.get("stride", 1), attrs.get("padding", 0),
                                  attrs.get("dilation", 1)) for a in (2, 3))
        cases.append(Case("depthwise_conv2d", [xs, ws], attrs, name="depthwise_conv2d" + suf))
        cases.append(Case("depthwise_conv2d_backward_data", [out, ws], dict(attrs, in_h=xs[2], in_w=xs[3]),
                          name="depthwise_conv2d_backward_data" + suf))
        cases.append(Case("depthwise_conv2d_backward_filter", [xs, out],
                          dict(attrs, kernel_h=ws[2], kernel_w=ws[3]), name="depthwise_conv2d_backward_filter" + suf))
    return cases


CASES = _conv_cases()
