"""``tw.models``: the papers' benchmark models as graphs (training graphs through ``tw.trace``).

    >>> import tilewise as tw
    >>> g = tw.models.wresnet(152, width=10, batch=8)          # Tofu's WResNet-152-10
    >>> g = tw.models.get("rnn-10-8k", batch=128)               # Tofu's RNN-10-8K

Each function takes ``train=True`` (``False``: the forward graph only) and ``optimizer=``
(default SGD; a name "sgd" / "momentum" / "adam" or a ``tw.optim`` object). The modules
(``ResNet``, ``BertModel``, ...) are ``tw.nn`` modules, usable on their own.
"""

from ._build import has_autodiff
from .alexnet import AlexNet, alexnet
from .inception import InceptionV4, inception_v4
from .mlp import MLP, mlp
from .nasnet import NASNet, nasnet
from .registry import EXAMPLES, get, parse
from .resnet import ResNet, resnet, wresnet
from .rnn import LSTMModel, brnn, rnn
from .transformer import BertModel, transformer
from .vgg import VGG, vgg16

__all__ = [
    "EXAMPLES", "MLP", "VGG", "AlexNet", "BertModel", "InceptionV4", "LSTMModel", "NASNet", "ResNet", "alexnet",
    "brnn", "get", "has_autodiff", "inception_v4", "mlp", "nasnet", "parse", "resnet", "rnn", "transformer",
    "vgg16", "wresnet",
]
