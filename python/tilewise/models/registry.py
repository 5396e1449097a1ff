"""Model names for the command line: ``tw.models.get("wresnet-152-10", batch=8)``.

    >>> import tilewise as tw
    >>> tw.models.parse("rnn-10-8k")
    ('rnn', {'layers': 10, 'hidden': 8192})
    >>> tw.models.get("mlp-2-64", batch=4, train=False).num_parameters
    8320

Names (case-insensitive; "_" and "-" alike):

=====================  ==================================================
``wresnet-D-W``        Wide ResNet, depth D in 50/101/152, widening W
``resnet-D``           ResNet-D (width 1)
``rnn-L-XK``           L LSTM layers of hidden X*1024 (``rnn-L-H`` for H units)
``brnn-L-XK``          bidirectional RNN
``transformer-L-H-A``  BERT-style encoder, L layers, hidden H, A heads
``bert-base``          transformer-12-768-12; ``bert-large``: 24-1024-16
``vgg16``, ``alexnet``
``inception-W``        Inception-v4 with wide scale W; ``inception-v4``: W = 1
``nasnet-R``           NASNet-A style net with 3R normal cells
``mlp-L-H``            L Linear layers of H units
=====================  ==================================================
"""

from __future__ import annotations

import re

from .._core import GraphError
from ..graph.autodiff import gradient_accumulation
from .alexnet import alexnet
from .inception import inception_v4
from .mlp import mlp
from .nasnet import nasnet
from .resnet import wresnet
from .rnn import brnn, rnn
from .transformer import transformer
from .vgg import vgg16

# Default batch per family: the batch sizes of the papers' experiments.
DEFAULT_BATCH = {"wresnet": 8, "rnn": 128, "brnn": 128, "transformer": 8, "vgg16": 64, "alexnet": 64,
                 "inception_v4": 64, "nasnet": 64, "mlp": 64}

BUILDERS = {"wresnet": wresnet, "rnn": rnn, "brnn": brnn, "transformer": transformer, "vgg16": vgg16,
            "alexnet": alexnet, "inception_v4": inception_v4, "nasnet": nasnet, "mlp": mlp}

EXAMPLES = ("wresnet-152-10", "resnet-50", "rnn-10-8k", "brnn-4-8k", "bert-base", "transformer-12-768-12",
            "vgg16", "alexnet", "inception-4", "nasnet-25", "mlp-4-1024")


def _hidden(text: str) -> int:
    return int(text[:-1]) * 1024 if text.endswith("k") else int(text)


_PATTERNS = [
    (r"w(?:ide)?resnet-(\d+)-(\d+)", lambda m: ("wresnet", {"depth": int(m[1]), "width": int(m[2])})),
    (r"resnet-?(\d+)", lambda m: ("wresnet", {"depth": int(m[1]), "width": 1})),
    (r"rnn-(\d+)-(\d+k?)", lambda m: ("rnn", {"layers": int(m[1]), "hidden": _hidden(m[2])})),
    (r"brnn-(\d+)-(\d+k?)", lambda m: ("brnn", {"layers": int(m[1]), "hidden": _hidden(m[2])})),
    (r"transformer-(\d+)-(\d+)-(\d+)", lambda m: ("transformer", {"layers": int(m[1]), "hidden": int(m[2]),
                                                                  "heads": int(m[3])})),
    (r"bert-base", lambda m: ("transformer", {"layers": 12, "hidden": 768, "heads": 12})),
    (r"bert-large", lambda m: ("transformer", {"layers": 24, "hidden": 1024, "heads": 16})),
    (r"vgg-?16", lambda m: ("vgg16", {})),
    (r"alexnet", lambda m: ("alexnet", {})),
    (r"inception-?v4", lambda m: ("inception_v4", {"width": 1})),
    (r"inception-(\d+)", lambda m: ("inception_v4", {"width": int(m[1])})),
    (r"nasnet-(\d+)", lambda m: ("nasnet", {"cells": int(m[1])})),
    (r"mlp-(\d+)-(\d+k?)", lambda m: ("mlp", {"layers": int(m[1]), "hidden": _hidden(m[2])})),
]


#: Largest value of each size in a model name: beyond them a name would build for hours (or
#: forever: ``mlp-99999999999-16``) or overflow the size checks; a typo, not a model.
LIMITS = {"layers": 1024, "depth": 1024, "width": 1024, "hidden": 2**20, "heads": 1024, "cells": 1024,
          "batch": 2**20}


def _check_sizes(name: str, args: dict) -> dict:
    for k, v in args.items():
        limit = LIMITS.get(k)
        if limit is not None and not 1 <= v <= limit:
            raise GraphError(f"model {name!r}: {k} = {v} is out of range; expected 1 to {limit:,}")
    return args


def parse(name: str) -> tuple[str, dict]:
    """(family, keyword arguments) for a model name; GraphError naming the valid forms otherwise."""
    if not isinstance(name, str):
        raise GraphError(f"a model name is a string, not {type(name).__name__}; examples: {', '.join(EXAMPLES)}")
    key = name.strip().lower().replace("_", "-")
    for pattern, make in _PATTERNS:
        m = re.fullmatch(pattern, key)
        if m:
            family, args = make(m)
            return family, _check_sizes(name, args)
    raise GraphError(f"unknown model name {name!r}; examples: {', '.join(EXAMPLES)}")


def get(name: str, batch: int | None = None, *, accumulate: str | None = None, **kwargs):
    """The graph of the named model (training graph unless ``train=False``); ``kwargs`` go to the builder.
    ``accumulate``: how gradient parts are summed, "sum" (the default here: the papers' graphs),
    "running" (swapping wants it) or "batched" (``tw.grad``'s default)."""
    family, args = parse(name)
    import inspect

    params = inspect.signature(BUILDERS[family]).parameters
    for k in kwargs:
        if k not in params:
            takes = ", ".join(p for p in params if p not in args and p != "batch")
            raise GraphError(f"model {name!r} ({family}) has no option {k!r}; it takes {takes or 'no options'}")
    args.update(kwargs)
    args["batch"] = DEFAULT_BATCH[family] if batch is None else batch
    if isinstance(args["batch"], bool) or not hasattr(args["batch"], "__index__"):
        raise GraphError(f"batch must be an integer, got {args['batch']!r}")
    args["batch"] = int(args["batch"])
    if args["batch"] < 1:
        raise GraphError(f"batch must be positive, got {args['batch']}")
    _check_sizes(name, {"batch": args["batch"]})
    if accumulate is None:
        g = BUILDERS[family](**args)
    else:
        with gradient_accumulation(accumulate):
            g = BUILDERS[family](**args)
    g.name = name
    return g
