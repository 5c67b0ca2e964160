"""An op graph under construction, featurized as the real files' 140 node columns.

Shared by the tile and layout generators: nodes are added operands first, and
`node_features`, `opcodes` and `edges` give the arrays an npz file holds.

    g = OpGraph()
    x = g.parameter((128, 256), BF16)
    y = g.add(OP_EXPONENTIAL, (128, 256), BF16, operands=(x,))
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from synthetic.common.fileformat import (
    COL_BASE_DILATION,
    COL_DIMENSIONS,
    COL_ELEMENT_BITS,
    COL_IS_ROOT,
    COL_LAYOUT,
    COL_PARAMETER_NUMBER,
    COL_SHAPE,
    COL_SHAPE_PRODUCT,
    COL_SHAPE_SUM,
    COL_TUPLE_SIZE,
    COL_WINDOW_DILATION,
    COL_WINDOW_PAD_HIGH,
    COL_WINDOW_PAD_LOW,
    COL_WINDOW_SIZE,
    COL_WINDOW_STRIDE,
    EMPTY_PRODUCT_COLS,
    NODE_FEAT_DIM,
    OP_PARAMETER,
    TUPLE,
    ElementType,
)


@dataclasses.dataclass(frozen=True)
class Window:
    size: tuple[int, ...]
    stride: tuple[int, ...]
    pad_low: tuple[int, ...]
    pad_high: tuple[int, ...]


@dataclasses.dataclass
class OpNode:
    opcode: int
    shape: tuple[int, ...]
    etype: ElementType
    operands: tuple[int, ...]
    layout: tuple[int, ...] | None
    parameter: int = 0
    dimensions: tuple[int, ...] = ()
    window: Window | None = None
    tuple_size: int = 0
    is_root: bool = False


def default_layout(rank: int) -> tuple[int, ...]:
    return tuple(range(rank - 1, -1, -1))


class OpGraph:
    """A kernel graph under construction; operands always precede their users."""

    def __init__(self) -> None:
        self.nodes: list[OpNode] = []
        self.num_parameters = 0

    def __len__(self) -> int:
        return len(self.nodes)

    def add(
        self,
        opcode: int,
        shape: Sequence[int],
        etype: ElementType,
        operands: Sequence[int] = (),
        layout: Sequence[int] | None = None,
        **extra,
    ) -> int:
        shape = tuple(int(s) for s in shape)
        if layout is None and etype is not TUPLE and shape:
            layout = default_layout(len(shape))
        node = OpNode(opcode, shape, etype, tuple(operands), tuple(layout or ()), **extra)
        self.nodes.append(node)
        return len(self.nodes) - 1

    def parameter(
        self, shape: Sequence[int], etype: ElementType, layout: Sequence[int] | None = None
    ) -> int:
        number = self.num_parameters
        self.num_parameters += 1
        return self.add(OP_PARAMETER, shape, etype, layout=layout, parameter=number)

    def node_features(self) -> np.ndarray:
        feat = np.zeros((len(self.nodes), NODE_FEAT_DIM), dtype=np.float64)
        for i, node in enumerate(self.nodes):
            row = feat[i]
            row[COL_IS_ROOT] = float(node.is_root)
            row[COL_ELEMENT_BITS] = node.etype.bits
            row[node.etype.column] = 1.0
            rank = len(node.shape)
            row[COL_SHAPE : COL_SHAPE + rank] = node.shape
            row[COL_SHAPE_SUM] = sum(node.shape)
            row[COL_SHAPE_PRODUCT] = math.prod(node.shape)
            row[COL_TUPLE_SIZE] = node.tuple_size
            row[COL_PARAMETER_NUMBER] = node.parameter
            dims = node.dimensions[:6]
            row[COL_DIMENSIONS : COL_DIMENSIONS + len(dims)] = dims
            row[list(EMPTY_PRODUCT_COLS)] = 1.0
            if node.window is not None:
                w = node.window
                ones = (1,) * len(w.size)
                for start, values in (
                    (COL_WINDOW_SIZE, w.size),
                    (COL_WINDOW_STRIDE, w.stride),
                    (COL_WINDOW_PAD_LOW, w.pad_low),
                    (COL_WINDOW_PAD_HIGH, w.pad_high),
                    (COL_WINDOW_DILATION, ones),
                    (COL_BASE_DILATION, ones),
                ):
                    row[start : start + len(values)] = values
                    row[start + 6] = sum(values)
                    row[start + 7] = math.prod(values)
            row[COL_LAYOUT : COL_LAYOUT + len(node.layout)] = node.layout
        return feat.astype(np.float32)

    def opcodes(self) -> np.ndarray:
        return np.array([n.opcode for n in self.nodes], dtype=np.uint8)

    def edges(self) -> np.ndarray:
        rows = []
        for u, node in enumerate(self.nodes):
            for v in dict.fromkeys(node.operands):
                rows.append((u, v))
        return np.array(rows, dtype=np.int64).reshape(-1, 2)
