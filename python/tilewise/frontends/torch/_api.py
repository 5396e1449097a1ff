"""The ``from_torch`` entry point and ``TorchImport``, what the import recorded (see the package docstring)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..._core import GraphError
from ...graph.graph import Graph


@dataclass
class TorchImport:
    """What ``from_torch`` recorded about the imported module (``graph.torch_import``)."""

    module: str
    training: bool
    inputs: list = field(default_factory=list)  # graph input names of the example inputs, in order
    outputs: list = field(default_factory=list)  # graph tensor names of the flattened outputs (None: not a tensor)
    constants: dict = field(default_factory=dict)  # input name -> value known at import (None: unknown)
    dropout_masks: dict = field(default_factory=dict)  # input name -> drop probability p

    def feeds(self, module, *inputs, dtype=np.float64, **named_inputs) -> dict:
        """Inputs, parameters (by their torch names) and constants as NumPy arrays, ready to feed.

        Inputs as given to ``from_torch``: positionally (tensors, tuples), or by name (keyword
        inputs, or one dict). Dropout masks are not included: feed 0/1 arrays for
        ``dropout_masks`` in training mode.
        """
        feeds = {}
        if len(inputs) == 1 and isinstance(inputs[0], dict):
            named_inputs, inputs = {**inputs[0], **named_inputs}, ()
        tensors = _flatten(inputs)
        for name in self.inputs:
            if name in named_inputs:
                feeds[name] = _array(named_inputs[name], dtype)
            elif tensors:
                feeds[name] = _array(tensors.pop(0), dtype)
            else:
                raise GraphError(f"from_torch feeds: no value for input '{name}' (inputs: {', '.join(self.inputs)})")
        for name, p in module.named_parameters():
            feeds[name] = _array(p, dtype)
        for name, v in self.constants.items():
            if v is None:
                raise GraphError(f"from_torch: the value of constant '{name}' is unknown (a meta tensor)")
            feeds[name] = np.asarray(v, dtype=dtype)
        return feeds


def _array(x, dtype):
    import torch

    if isinstance(x, torch.Tensor):
        return x.detach().cpu().to(torch.float64 if np.dtype(dtype) == np.float64 else x.dtype).numpy()
    return np.asarray(x, dtype=dtype)


def _flatten(inputs):
    out = []
    for x in inputs:
        if isinstance(x, (list, tuple)):
            out.extend(_flatten(x))
        elif isinstance(x, dict):
            out.extend(_flatten(list(x.values())))
        else:
            out.append(x)
    return out


def from_torch(module, example_inputs, *, name: str | None = None, loss=None, optimizer=None,
               label=None) -> Graph:
    """Import a ``torch.nn.Module`` as a ``tw.Graph``.

    ``example_inputs``: a tensor, a tuple of positional inputs or a dict of keyword inputs; their
    shapes become the graph's (only shapes are used, no arithmetic runs). The module's mode
    matters: in training mode BatchNorm uses batch statistics (``batch_norm_train``) and dropout
    takes a mask input; in eval mode BatchNorm uses its running statistics (constants) and
    dropout disappears.

    With ``loss`` (``loss(output, label)`` of graph tensors, e.g. ``tdl_ops.mse_loss``, or one of
    torch's losses: ``F.mse_loss``, ``nn.CrossEntropyLoss()``, ...) and optionally ``optimizer``
    (``tw.optim``, or ``torch.optim.SGD/Adam/AdamW``, mapped with their hyper-parameters), the
    training graph is built by ``tw.trace``: the loss of the first output, a label input, the
    backward pass and the parameter updates. ``label`` (an example tensor, a ``tw.placeholder``
    or a shape; default: the output's shape) gives the label's shape and dtype: class indices
    ``torch.tensor([3, 1, ...])`` for ``cross_entropy``. ``graph.outputs`` maps "output" (and
    "output_1", ... for more outputs, "loss") to tensors.

    Raises ``tw.GraphError`` listing every ATen op that has no TDL mapping (target, count, an
    example node and the model line), or when ``torch.export`` cannot trace the module.

        >>> import torch, tilewise as tw
        >>> g = tw.from_torch(torch.nn.Linear(4, 3), torch.randn(2, 4))
        >>> [t.name for t in g.tensors_with_role("parameter")]
        ['weight', 'bias']
    """
    try:
        import torch  # noqa: F401
    except ImportError:
        raise GraphError("from_torch needs PyTorch: pip install torch") from None
    from . import _capture, _convert, _table

    captured = _capture.capture(module, example_inputs)
    info = TorchImport(type(module).__name__, bool(module.training))
    graph = Graph(name or type(module).__name__)
    conv = _convert.Converter(captured, graph, _table.RULES, info=info)
    outputs = conv.run()
    err = conv.error()
    if err is not None:
        raise err
    info.outputs = [None if t is None else t.name for t in outputs]
    graph.torch_import = info
    tensors = [t for t in outputs if t is not None]
    graph.outputs = {("output" if k == 0 else f"output_{k}"): t for k, t in enumerate(tensors)}
    if loss is None and optimizer is None and label is None:
        return graph
    return _training_graph(graph, captured, info, loss, optimizer, label)


def _label(label):
    """A torch tensor as a placeholder of its shape and dtype; anything else as given to tw.trace."""
    import torch

    from ...graph.trace import placeholder
    from ._convert import dtype_name

    if isinstance(label, torch.Tensor):
        return placeholder(tuple(int(d) for d in label.shape), name="label", dtype=dtype_name(label.dtype))
    return label


def _training_graph(graph, captured, info, loss, optimizer, label=None):
    """The training graph through tw.trace (autodiff + optimizer), replaying the import on its inputs."""
    from ...graph.trace import placeholder, trace

    if loss is None:
        raise GraphError("from_torch: optimizer= and label= need loss=")
    from . import _convert, _table

    def forward(*inputs):
        g = inputs[0].graph
        conv = _convert.Converter(captured, g, _table.RULES, inputs=list(inputs))
        outs = [t for t in conv.run() if t is not None]
        # The loss is taken of the first tensor output (a model's logits or last hidden state).
        return outs[0]

    placeholders = [placeholder(tuple(graph.tensor(n).shape), name=n, dtype=graph.tensor(n).dtype)
                    for n in info.inputs]
    trained = trace(forward, *placeholders, loss=loss, optimizer=optimizer, name=graph.name,
                    label=None if label is None else _label(label))
    trained.torch_import = info
    return trained
