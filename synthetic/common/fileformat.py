"""The real tile:xla file format: keys, dtypes, columns, element types, opcodes, programs."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

NODE_FEAT_DIM = 140
CONFIG_FEAT_DIM = 24
SPLITS = ("train", "valid", "test")

# Keys in the order of the real files, with the dtypes seen there.
ARRAY_DTYPES: Mapping[str, np.dtype] = {
    "node_feat": np.dtype("<f4"),
    "node_opcode": np.dtype("u1"),
    "edge_index": np.dtype("<i8"),
    "config_feat": np.dtype("<f4"),
    "config_runtime": np.dtype("<i8"),
    "config_runtime_normalizers": np.dtype("<i8"),
}

# Node feature columns. Groups of "6 dims + sum + product" start at the named column.
COL_IS_ROOT = 0
COL_ELEMENT_BITS = 1
COL_SHAPE = 21  # dims 0-5 in 21..26
COL_SHAPE_SUM = 27
COL_SHAPE_PRODUCT = 28
COL_TUPLE_SIZE = 29
COL_PARAMETER_NUMBER = 30
COL_DIMENSIONS = 31  # 31..36: reduce dims, broadcast dims, transpose permutation, ...
COL_WINDOW_SIZE = 37  # 37..42, sum 43, product 44
COL_WINDOW_STRIDE = 45  # 45..50, sum 51, product 52
COL_WINDOW_PAD_LOW = 53
COL_WINDOW_PAD_HIGH = 61
COL_WINDOW_DILATION = 69
COL_BASE_DILATION = 77
# Products over empty windows/slices: 1.0 in the real files for ordinary nodes.
EMPTY_PRODUCT_COLS = (44, 52, 60, 68, 76, 84, 112, 116, 120, 124, 128, 132)
COL_LAYOUT = 134  # minor_to_major, 134..139

# Config feature groups (6 dims + sum + product each).
CFG_KERNEL_BOUNDS = 0
CFG_OUTPUT_BOUNDS = 8
CFG_INPUT_BOUNDS = 16


@dataclasses.dataclass(frozen=True)
class ElementType:
    """An XLA element type: its one-hot column in node_feat and its size."""

    name: str
    column: int
    bits: int

    @property
    def bytes(self) -> int:
        return self.bits // 8


F32 = ElementType("f32", 13, 32)
BF16 = ElementType("bf16", 15, 16)
PRED = ElementType("pred", 3, 8)
TUPLE = ElementType("tuple", 18, 0)

# Opcode ids (stable; all < 128 like the real vocabulary).
OP_ADD = 2
OP_BROADCAST = 13
OP_COMPARE = 20
OP_CONSTANT = 24
OP_CONVERT = 25
OP_CONVOLUTION = 26
OP_COPY = 27
OP_DIVIDE = 32
OP_DOT = 34
OP_EXPONENTIAL = 38
OP_REDUCE = 48
OP_MAXIMUM = 57
OP_MULTIPLY = 59
OP_PARAMETER = 63
OP_RESHAPE = 75
OP_RSQRT = 83
OP_SELECT = 87
OP_SUBTRACT = 95
OP_TANH = 100
OP_TRANSPOSE = 105
OP_TUPLE = 107

OPCODE_NAMES: Mapping[int, str] = {
    OP_ADD: "add",
    OP_BROADCAST: "broadcast",
    OP_COMPARE: "compare",
    OP_CONSTANT: "constant",
    OP_CONVERT: "convert",
    OP_CONVOLUTION: "convolution",
    OP_COPY: "copy",
    OP_DIVIDE: "divide",
    OP_DOT: "dot",
    OP_EXPONENTIAL: "exponential",
    OP_REDUCE: "reduce",
    OP_MAXIMUM: "maximum",
    OP_MULTIPLY: "multiply",
    OP_PARAMETER: "parameter",
    OP_RESHAPE: "reshape",
    OP_RSQRT: "rsqrt",
    OP_SELECT: "select",
    OP_SUBTRACT: "subtract",
    OP_TANH: "tanh",
    OP_TRANSPOSE: "transpose",
    OP_TUPLE: "tuple",
}

# Program names: train and valid use disjoint programs, like the real split.
TRAIN_PROGRAMS = (
    "resnet50.4x4.fp16",
    "bert_base.2x2.bf16",
    "mlp_mixer.8x8.fp32",
    "unet2d_batch_16_train",
    "transformer_lm.4x4.bf16",
    "efficientnet_b0_batch_64_train",
    "wide_deep.2x2.fp32",
    "vit_b16.8x8.bf16",
    "retinanet.2x2.fp32",
    "dlrm_batch_256_eval",
)
VALID_PROGRAMS = (
    "inception_v3_batch_128_train",
    "mobilenet_v2.2x2.fp16",
    "gpt_small.4x4.bf16",
)
TEST_PROGRAMS = ("shufflenet.2x2.fp32", "t5_small.4x4.bf16", "deeplab_v3_batch_8_train")

__all__ = [
    "NODE_FEAT_DIM",
    "CONFIG_FEAT_DIM",
    "SPLITS",
    "ARRAY_DTYPES",
    "COL_IS_ROOT",
    "COL_ELEMENT_BITS",
    "COL_SHAPE",
    "COL_SHAPE_SUM",
    "COL_SHAPE_PRODUCT",
    "COL_TUPLE_SIZE",
    "COL_PARAMETER_NUMBER",
    "COL_DIMENSIONS",
    "COL_WINDOW_SIZE",
    "COL_WINDOW_STRIDE",
    "COL_WINDOW_PAD_LOW",
    "COL_WINDOW_PAD_HIGH",
    "COL_WINDOW_DILATION",
    "COL_BASE_DILATION",
    "EMPTY_PRODUCT_COLS",
    "COL_LAYOUT",
    "CFG_KERNEL_BOUNDS",
    "CFG_OUTPUT_BOUNDS",
    "CFG_INPUT_BOUNDS",
    "ElementType",
    "F32",
    "BF16",
    "PRED",
    "TUPLE",
    "OP_ADD",
    "OP_BROADCAST",
    "OP_COMPARE",
    "OP_CONSTANT",
    "OP_CONVERT",
    "OP_CONVOLUTION",
    "OP_COPY",
    "OP_DIVIDE",
    "OP_DOT",
    "OP_EXPONENTIAL",
    "OP_REDUCE",
    "OP_MAXIMUM",
    "OP_MULTIPLY",
    "OP_PARAMETER",
    "OP_RESHAPE",
    "OP_RSQRT",
    "OP_SELECT",
    "OP_SUBTRACT",
    "OP_TANH",
    "OP_TRANSPOSE",
    "OP_TUPLE",
    "OPCODE_NAMES",
    "TRAIN_PROGRAMS",
    "VALID_PROGRAMS",
    "TEST_PROGRAMS",
]
