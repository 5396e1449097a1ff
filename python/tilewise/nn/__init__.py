"""``tw.nn``: PyTorch-style modules that build graphs.

    >>> import tilewise as tw
    >>> net = tw.nn.Sequential(tw.nn.Linear(16, 32), tw.nn.ReLU(), tw.nn.Linear(32, 4))
    >>> g = tw.Graph()
    >>> net(g.input("x", (8, 16))).shape
    (8, 4)
    >>> sorted(t.name for t in g.tensors_with_role("parameter"))
    ['0.bias', '0.weight', '2.bias', '2.weight']

Layers by family: ``linear`` (Linear, Identity, Flatten), ``conv`` (Conv2d), ``normalization``
(BatchNorm2d, LayerNorm), ``activation``, ``pooling``, ``dropout``, ``sparse`` (Embedding),
``rnn`` (LSTM), ``attention`` (MultiheadAttention); ``functional`` has them as functions plus
the losses.
"""

from . import functional
from .activation import GELU, ReLU, Sigmoid, Softmax, Tanh
from .attention import MultiheadAttention
from .conv import Conv2d
from .dropout import Dropout
from .linear import Flatten, Identity, Linear
from .module import Buffer, Module, ModuleList, Parameter, Sequential
from .normalization import BatchNorm2d, LayerNorm
from .pooling import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d
from .rnn import LSTM
from .sparse import Embedding

__all__ = [
    "AdaptiveAvgPool2d", "AvgPool2d", "BatchNorm2d", "Buffer", "Conv2d", "Dropout", "Embedding", "Flatten", "GELU",
    "Identity", "LSTM", "LayerNorm", "Linear", "MaxPool2d", "Module", "ModuleList", "MultiheadAttention",
    "Parameter", "ReLU", "Sequential", "Sigmoid", "Softmax", "Tanh", "functional",
]
