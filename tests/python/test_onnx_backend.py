"""ONNX's own node tests (``onnx.backend.test``) against our kernels: a suite nobody here wrote.

Each test is one ONNX node with inputs and the outputs ONNX's reference computes. The backend
(``tilewise.frontends.onnx.backend``) imports the model with ``tw.from_onnx``, plans it on one
device (and again on 3 devices) and runs it with ``tw.compile`` (native float32 kernels where an
op has one, the interpreter otherwise), so what is compared is what a user's executable
computes. ``INCLUDE`` names the node tests of every ONNX op ``from_onnx`` converts; ``EXCLUDE`` lists, with the reason,
the variants of those ops it refuses (it raises ``tw.GraphError`` for each, never approximates).
Node tests of other ops are not collected. Skipped without onnx (``pip install onnx``).
"""

from __future__ import annotations

import re
import warnings

import pytest

pytest.importorskip("onnx", reason="the ONNX node tests need onnx: pip install onnx")

import onnx.backend.test  # noqa: E402

from tilewise.frontends.onnx import backend  # noqa: E402

# The node tests of the ops from_onnx converts (docs/FROM_ONNX.md); each name is a test-name prefix.
OPS = [
    "abs", "add", "averagepool", "batchnorm", "celu", "clip", "concat", "constant", "constantofshape", "conv",
    "convtranspose", "depthtospace", "div", "dropout", "elu", "erf", "exp", "expand", "flatten", "gather",
    "gelu", "gemm", "globalaveragepool", "globalmaxpool", "hardsigmoid", "hardswish", "identity",
    "instancenorm", "layer_normalization", "leakyrelu", "log", "logsoftmax", "matmul", "max", "maxpool", "mean",
    "min", "mish", "mul", "neg", "pow", "prelu", "reciprocal", "reduce_l1", "reduce_l2", "reduce_log_sum",
    "reduce_max", "reduce_mean", "reduce_min", "reduce_prod", "reduce_sum", "relu", "reshape", "resize",
    "rms_normalization", "selu", "shape", "sigmoid", "sign", "size", "slice", "softmax", "softplus", "softsign",
    "spacetodepth", "split", "sqrt", "squeeze", "sub", "sum", "swish", "tanh", "tile", "transpose", "unsqueeze",
    "upsample", "where",
]
INCLUDE = rf"^test_({'|'.join(OPS)})(_.*)?_cpu$"

# Variants of those ops that from_onnx refuses, by reason.
EXCLUDE = [
    # Tensors are float32: integer, boolean, float16/float64 data (and outputs) are not supported yet.
    r"_(u?int(2|4|8|16|32|64)|float16|float64|bfloat16|bool)(_|$)", r"_types_", r"_INT\d_", r"integer",
    r"^test_(cumsum|reduce_log_sum_exp)_",  # their test data is float64
    r"^test_(shape|size)(_|$)", r"^test_where_long_example",  # int64 outputs
    r"^test_constantofshape_int",  # int32/int64 outputs
    # Tensors with no elements.
    r"_empty_set", r"zero_size", r"^test_reshape_allowzero", r"^test_slice_start_out_of_bounds",
    # Optional values and sequences.
    r"^test_identity_(opt|sequence)", r"^test_split_to_sequence",
    # Function bodies built on comparisons (Less, Greater): tilewise has no comparison op.
    r"^test_(clip|elu|selu|leakyrelu|prelu)_.*expanded",
    # Windows the library's ops do not express: 1-D and 3-D pooling, 3-D transposed convolution,
    # dilated pooling, ceil_mode that changes the size, max pooling with unequal (SAME) pads,
    # unequal strides along the spatial axes, grouped transposed and integer convolutions.
    r"^test_(averagepool|maxpool)_(1d|3d)", r"^test_convtranspose_3d", r"^test_(averagepool|maxpool)_2d_dilations",
    r"^test_(averagepool|maxpool)_2d_ceil_cpu", r"^test_maxpool_2d_same_", r"^test_maxpool_with_argmax",
    r"^test_convtranspose_(kernel_shape|output_shape|pads?)_cpu", r"^test_convtranspose_group", r"^test_convinteger",
    # Training-mode batch normalization (batch statistics, running-statistics outputs); dropout's mask.
    r"^test_batchnorm_.*training_mode", r"^test_dropout_default_mask",
    # A tensor exponent (pow is by a known scalar).
    r"^test_pow(_bcast_array|_example)?_cpu",
    # A resize with an extrapolation value (not one interpolation per axis).
    r"^test_resize_tf_crop_and_resize_extrapolation_value",
    # GatherElements and GatherND (known indices along one axis only).
    r"^test_gather(_elements|nd)",
]


def _tests(devices: int, name: str):
    runner = onnx.backend.test.BackendTest(backend, __name__, test_kwargs={"devices": devices})
    runner.include(INCLUDE)
    for pattern in EXCLUDE:
        runner.exclude(pattern)
    cases = runner.test_cases["OnnxBackendNodeModelTest"]
    # Only our ops' tests: the thousands of others would each be one more skip.
    for test in [n for n in vars(cases) if n.startswith("test_")]:
        if not re.search(INCLUDE, test):
            delattr(cases, test)
    cases.__name__ = cases.__qualname__ = name
    return cases


with warnings.catch_warnings():
    # Loading the cases computes their expected outputs with NumPy (1/0 on purpose: inf tests).
    warnings.simplefilter("ignore")
    OnnxBackendNodeModelTest = _tests(1, "OnnxBackendNodeModelTest")
    # The same tests planned on 3 devices: tensors split unevenly, tiles moved between devices.
    OnnxBackendNodeModelTestOn3Devices = _tests(3, "OnnxBackendNodeModelTestOn3Devices")
