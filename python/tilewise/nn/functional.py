"""``tw.nn.functional``: the layers as functions on graph tensors (PyTorch names and argument order).

    >>> import tilewise as tw
    >>> import tilewise.nn.functional as F
    >>> g = tw.Graph()
    >>> x = g.input("x", (2, 3, 8, 8))
    >>> w = g.parameter("w", (4, 3, 3, 3))
    >>> F.relu(F.conv2d(x, w, padding=1)).shape
    (2, 4, 8, 8)

Each function adds TDL ops from ``tdl_ops``; attributes the ops need (pads, window sizes,
flattened extents) are computed here from the tensors' shapes. Bad arguments raise
``tw.ShapeError`` (shapes) or ``tw.GraphError`` (anything else) naming the function.
"""

from __future__ import annotations

from collections.abc import Sequence

import tdl_ops

from .._core import GraphError, ShapeError
from ..graph.graph import GTensor

__all__ = [
    "adaptive_avg_pool2d", "add", "avg_pool2d", "batch_norm", "cat", "conv2d", "cross_entropy", "dropout",
    "embedding", "flatten", "gelu", "layer_norm", "linear", "log_softmax", "max_pool2d", "mse_loss", "mul",
    "relu", "select", "sigmoid", "softmax", "stack", "tanh",
]


def _tensor(fn: str, x, what: str = "input") -> GTensor:
    if not isinstance(x, GTensor):
        raise GraphError(f"{fn}: {what} must be a graph tensor (tw.GTensor), got {type(x).__name__}")
    return x


def _rank(fn: str, x: GTensor, ranks, what: str = "input") -> None:
    if x.ndim not in ranks:
        want = " or ".join(str(r) for r in ranks)
        raise ShapeError(f"{fn}: {what} must have {want} dimensions, got shape {x.shape}")


def _pair(fn: str, name: str, v) -> tuple[int, int]:
    if isinstance(v, int):
        return v, v
    try:
        a, b = (int(e) for e in v)
    except (TypeError, ValueError):
        raise GraphError(f"{fn}: {name} must be an int or a pair of ints, got {v!r}") from None
    return a, b


def _square(fn: str, name: str, v) -> int:
    a, b = _pair(fn, name, v)
    if a != b:
        raise GraphError(f"{fn}: {name} {v!r} differs between height and width; only equal values are supported")
    return a


# ---------------------------------------------------------------- linear, convolution


def linear(input: GTensor, weight: GTensor, bias: GTensor | None = None) -> GTensor:
    """input @ weight^T + bias; weight (out, in) as in PyTorch; input of any rank (..., in)."""
    x, w = _tensor("linear", input), _tensor("linear", weight, "weight")
    if w.ndim != 2 or x.shape[-1] != w.shape[1]:
        raise ShapeError(f"linear: input {x.shape} and weight {w.shape} do not match ((..., in) and (out, in))")
    if bias is None:
        return tdl_ops.linear_nobias(x, w)
    if bias.shape != (w.shape[0],):
        raise ShapeError(f"linear: bias {bias.shape} must be ({w.shape[0]},)")
    return tdl_ops.linear(x, w, bias)


def conv2d(input: GTensor, weight: GTensor, bias: GTensor | None = None, stride=1, padding=0, dilation=1,
           groups: int = 1) -> GTensor:
    """2-D convolution, NCHW, weight (out, in/groups, kh, kw).

    groups is 1 or the channel count (depthwise, weight (c, 1, kh, kw)). Unequal height/width
    padding becomes an explicit ``pad`` op before the convolution.
    """
    x, w = _tensor("conv2d", input), _tensor("conv2d", weight, "weight")
    _rank("conv2d", x, (4,))
    _rank("conv2d", w, (4,), "weight")
    s, d = _square("conv2d", "stride", stride), _square("conv2d", "dilation", dilation)
    ph, pw = _pair("conv2d", "padding", padding)
    c = x.shape[1]
    if groups == 1:
        if w.shape[1] != c:
            raise ShapeError(f"conv2d: input has {c} channels but weight {w.shape} expects {w.shape[1]}")
    elif groups == c and w.shape[0] == c and w.shape[1] == 1:
        pass
    else:
        raise GraphError(f"conv2d: groups={groups} is not supported (1, or the channel count {c} with weight "
                         f"({c}, 1, kh, kw) for a depthwise convolution)")
    p = ph
    if ph != pw:
        x = tdl_ops.pad(x, pads=((0, 0), (0, 0), (ph, ph), (pw, pw)))
        p = 0
    for a, k in ((2, w.shape[2]), (3, w.shape[3])):
        if x.shape[a] + 2 * p < d * (k - 1) + 1:
            raise ShapeError(f"conv2d: input {input.shape} is smaller than the kernel {w.shape[2:]} "
                             f"(padding {padding})")
    conv = tdl_ops.conv2d if groups == 1 else tdl_ops.depthwise_conv2d
    y = conv(x, w, stride=s, padding=p, dilation=d)
    if bias is not None:
        if bias.shape != (w.shape[0],):
            raise ShapeError(f"conv2d: bias {bias.shape} must be ({w.shape[0]},)")
        y = tdl_ops.bias_add_channel(y, bias)
    return y


# ---------------------------------------------------------------- normalization


def batch_norm(input: GTensor, running_mean: GTensor | None, running_var: GTensor | None,
               weight: GTensor | None = None, bias: GTensor | None = None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5) -> GTensor:
    """Batch norm over NCHW channels. Training: batch statistics (running stats are not part of
    the graph; pass None). Inference: running_mean / running_var tensors."""
    x = _tensor("batch_norm", input)
    _rank("batch_norm", x, (4,))
    if weight is None or bias is None:
        raise GraphError("batch_norm: weight and bias are required (affine=False is not supported)")
    if training:
        return tdl_ops.batch_norm_train(x, weight, bias, eps=eps)
    if running_mean is None or running_var is None:
        raise GraphError("batch_norm: inference mode needs running_mean and running_var tensors")
    return tdl_ops.batch_norm_inference(x, running_mean, running_var, weight, bias, eps=eps)


def layer_norm(input: GTensor, normalized_shape, weight: GTensor, bias: GTensor, eps: float = 1e-5) -> GTensor:
    """Layer norm over the last axis (normalized_shape must be that one extent)."""
    x = _tensor("layer_norm", input)
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if len(shape) != 1 or x.shape[-1:] != shape:
        raise ShapeError(f"layer_norm: normalized_shape {shape} must be the last extent of input {x.shape}")
    return tdl_ops.layer_norm(x, weight, bias, eps=eps)


# ---------------------------------------------------------------- activations


def relu(input: GTensor) -> GTensor:
    return tdl_ops.relu(_tensor("relu", input))


def gelu(input: GTensor, approximate: str = "none") -> GTensor:
    """GELU: exact erf form (approximate="none") or the tanh approximation ("tanh")."""
    if approximate not in ("none", "tanh"):
        raise GraphError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    x = _tensor("gelu", input)
    return tdl_ops.gelu(x) if approximate == "none" else tdl_ops.gelu_tanh(x)


def tanh(input: GTensor) -> GTensor:
    return tdl_ops.tanh(_tensor("tanh", input))


def sigmoid(input: GTensor) -> GTensor:
    return tdl_ops.sigmoid(_tensor("sigmoid", input))


def _last_dim(fn: str, x: GTensor, dim: int) -> None:
    if dim not in (-1, x.ndim - 1):
        raise GraphError(f"{fn}: only the last dimension is supported (dim=-1), got dim={dim}")


def softmax(input: GTensor, dim: int = -1) -> GTensor:
    x = _tensor("softmax", input)
    _last_dim("softmax", x, dim)
    return tdl_ops.softmax(x)


def log_softmax(input: GTensor, dim: int = -1) -> GTensor:
    x = _tensor("log_softmax", input)
    _last_dim("log_softmax", x, dim)
    return tdl_ops.log_softmax(x)


# ---------------------------------------------------------------- pooling


def _pool_args(fn: str, x: GTensor, kernel_size, stride, padding) -> tuple[int, int, int]:
    _rank(fn, x, (4,))
    k = _square(fn, "kernel_size", kernel_size)
    s = k if stride is None else _square(fn, "stride", stride)
    p = _square(fn, "padding", padding)
    if 2 * p > k:
        raise GraphError(f"{fn}: padding {p} must be at most half the kernel size {k}")
    if min(x.shape[2:]) + 2 * p < k:
        raise ShapeError(f"{fn}: input {x.shape} is smaller than the window {k} (padding {p})")
    return k, s, p


def max_pool2d(input: GTensor, kernel_size, stride=None, padding=0) -> GTensor:
    """Max pooling over square windows (stride defaults to the kernel size)."""
    x = _tensor("max_pool2d", input)
    k, s, p = _pool_args("max_pool2d", x, kernel_size, stride, padding)
    return tdl_ops.max_pool2d(x, kernel=k, stride=s, padding=p)


def avg_pool2d(input: GTensor, kernel_size, stride=None, padding=0, count_include_pad: bool = True) -> GTensor:
    """Average pooling over square windows; padded zeros count (count_include_pad=True only)."""
    x = _tensor("avg_pool2d", input)
    if not count_include_pad:
        raise GraphError("avg_pool2d: count_include_pad=False is not supported")
    k, s, p = _pool_args("avg_pool2d", x, kernel_size, stride, padding)
    return tdl_ops.avg_pool2d(x, kernel=k, stride=s, padding=p)


def adaptive_avg_pool2d(input: GTensor, output_size) -> GTensor:
    """Average to an (oh, ow) output; the input extents must be multiples of it (1x1 always is)."""
    x = _tensor("adaptive_avg_pool2d", input)
    _rank("adaptive_avg_pool2d", x, (4,))
    oh, ow = _pair("adaptive_avg_pool2d", "output_size", output_size)
    h, w = x.shape[2:]
    if oh <= 0 or ow <= 0 or h % oh or w % ow:
        raise ShapeError(f"adaptive_avg_pool2d: input {h}x{w} is not a multiple of the output size {oh}x{ow}")
    if (oh, ow) == (h, w):
        return x  # windows of one element: the identity, no op
    return tdl_ops.adaptive_avg_pool2d(x, kernel_h=h // oh, kernel_w=w // ow)


# ---------------------------------------------------------------- dropout, embedding, shapes


def _fresh_input(graph, base: str, shape) -> GTensor:
    """A new graph input named ``base`` (or ``base_1``, ... when taken) in the current scope."""
    name, k = base, 0
    while True:
        try:
            graph.tensor(graph.scoped(name))
        except KeyError:
            return graph.input(name, shape)
        k += 1
        name = f"{base}_{k}"


def dropout(input: GTensor, p: float = 0.5, training: bool = True, name: str = "mask") -> GTensor:
    """x * mask / (1 - p); the 0/1 mask is a new graph input (role "input") named ``name`` in the
    current scope (``<module path>.mask`` inside a module): the runtime feeds a fresh one each step."""
    x = _tensor("dropout", input)
    if not 0.0 <= p < 1.0:
        raise GraphError(f"dropout: p must be in [0, 1), got {p}")
    if not training or p == 0.0:
        return x
    mask = _fresh_input(x.graph, name, x.shape)
    return tdl_ops.dropout(x, mask, p=p)


def embedding(input: GTensor, weight: GTensor) -> GTensor:
    """Rows of weight (num, dim) at integer ids: ids (b,) -> (b, dim), (b, t) -> (b, t, dim)."""
    ids, w = _tensor("embedding", input, "ids"), _tensor("embedding", weight, "weight")
    _rank("embedding", ids, (1, 2), "ids")
    return tdl_ops.embedding(w, ids) if ids.ndim == 1 else tdl_ops.embedding_seq(w, ids)


def flatten(input: GTensor, start_dim: int = 1, end_dim: int = -1) -> GTensor:
    """Flatten all but the batch axis: (n, c, h, w) -> (n, c*h*w); a 2-D input is returned as is."""
    x = _tensor("flatten", input)
    if start_dim != 1 or end_dim not in (-1, x.ndim - 1):
        raise GraphError(f"flatten: only start_dim=1, end_dim=-1 is supported, got {start_dim}, {end_dim}")
    if x.ndim == 2:
        return x
    _rank("flatten", x, (2, 4))
    _, c, h, w = x.shape
    return tdl_ops.flatten(x, c=c, h=h, w=w)


def add(a: GTensor, b: GTensor) -> GTensor:
    """a + b (same shapes; a residual connection)."""
    _tensor("add", a), _tensor("add", b)
    if a.shape != b.shape:
        raise ShapeError(f"add: shapes {a.shape} and {b.shape} differ")
    return tdl_ops.add(a, b)


def mul(a: GTensor, b: GTensor) -> GTensor:
    """a * b (same shapes)."""
    _tensor("mul", a), _tensor("mul", b)
    if a.shape != b.shape:
        raise ShapeError(f"mul: shapes {a.shape} and {b.shape} differ")
    return tdl_ops.mul(a, b)


def _norm_dim(fn: str, dim: int, ndim: int) -> int:
    if not -ndim <= dim < ndim:
        raise GraphError(f"{fn}: dim {dim} is out of range for {ndim} dimensions")
    return dim % ndim


def cat(tensors: Sequence[GTensor], dim: int = 0) -> GTensor:
    """Concatenate along ``dim`` (one op for any number of tensors)."""
    xs = [_tensor("cat", t, f"tensor {i}") for i, t in enumerate(tensors)]
    if not xs:
        raise GraphError("cat: needs at least one tensor")
    if len(xs) == 1:
        return xs[0]
    ax = _norm_dim("cat", dim, xs[0].ndim)
    return tdl_ops.models.concat_op(len(xs))(*xs, axis=ax)


def stack(tensors: Sequence[GTensor], dim: int = 0) -> GTensor:
    """Stack same-shape tensors along a new axis ``dim`` (one op)."""
    xs = [_tensor("stack", t, f"tensor {i}") for i, t in enumerate(tensors)]
    if not xs:
        raise GraphError("stack: needs at least one tensor")
    if xs[0].ndim == 0:
        raise ShapeError("stack: 0-d tensors cannot be stacked")
    ax = _norm_dim("stack", dim, xs[0].ndim + 1)
    return tdl_ops.models.stack_op(len(xs))(*xs, axis=ax, inner=xs[0].shape[-1])


def select(input: GTensor, dim: int, index: int) -> GTensor:
    """input[..., index, ...] along ``dim`` (the dimension disappears), as ``torch.select``."""
    x = _tensor("select", input)
    ax = _norm_dim("select", dim, x.ndim)
    if not 0 <= index < x.shape[ax]:
        raise ShapeError(f"select: index {index} is out of range for dimension {dim} of {x.shape}")
    return tdl_ops.select(x, axis=ax, index=index)


# ---------------------------------------------------------------- losses


def cross_entropy(input: GTensor, target: GTensor) -> GTensor:
    """Mean over the batch of -sum(target * log_softmax(input)); target dense (one-hot or probabilities)
    of the same (batch, classes) shape. Returns a 0-d tensor."""
    x, t = _tensor("cross_entropy", input), _tensor("cross_entropy", target, "target")
    _rank("cross_entropy", x, (2,))
    if t.shape != x.shape:
        raise ShapeError(f"cross_entropy: target {t.shape} must have the input's shape {x.shape} "
                         f"(dense one-hot or probability targets)")
    return tdl_ops.cross_entropy(x, t)


def mse_loss(input: GTensor, target: GTensor) -> GTensor:
    """Mean over all elements of (input - target)**2; a 0-d tensor."""
    x, t = _tensor("mse_loss", input), _tensor("mse_loss", target, "target")
    if t.shape != x.shape:
        raise ShapeError(f"mse_loss: target {t.shape} must have the input's shape {x.shape}")
    return tdl_ops.mse_loss(x, t)
