"""``tw.from_torch``: a PyTorch ``nn.Module`` as a tilewise graph.

    import torch, tilewise as tw
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    g = tw.from_torch(model, torch.randn(8, 16))
    g.num_parameters == sum(p.numel() for p in model.parameters())    # True
    g.torch_import.feeds(model, torch.randn(8, 16))   # name -> array: inputs, parameters, constants

The module is captured with ``torch.export`` (see ``_capture`` for why not fx), each ATen node is
mapped onto TDL ops by the rule table of ``_rules*`` (``_table.TABLE`` lists it), and anything that cannot
be mapped is reported in one ``tw.GraphError`` listing every op kind, how often it occurs and
where. Parameters keep their torch names (``layer1.0.conv1.weight``); ops are named by the module
they come from (``layer1.0.conv1.conv2d``).

What the graph holds besides parameters is described by ``graph.torch_import`` (a
``TorchImport``): the input names, the output names, ``constants`` (buffers and tensors computed
from them alone, e.g. BatchNorm running statistics in eval mode: graph inputs with known
values), and ``dropout_masks`` (in training mode every active dropout takes its 0/1 mask as an
input; in eval mode dropout is the identity and disappears).
"""

from ...graph.trace import register_translator
from ._api import TorchImport, from_torch
from ._training import translate

register_translator(translate)  # tw.trace accepts torch's losses and optimizers

__all__ = ["TorchImport", "from_torch"]
