"""Whole-program graphs of a few families: conv nets, transformer-like dot stacks, RNNs.

A program is built layer by layer on the tile generator's graph helper
(`synthetic.common.opgraph.OpGraph`, which writes node_feat in the real
140-column featurization), so node features, opcodes and edges look like the tile
toy set's. Every convolution (26), dot (34) and reshape (75) is configurable, as in
the real files; each is followed by a run of elementwise "filler" ops (bias, scale,
activations, converts, selects) so that 2-8% of the nodes are configurable.

    program = build_program(rng, "resnet")
    program.node_feat, program.node_opcode, program.edge_index, program.node_splits

`FAMILIES[source][split]` lists the families of each split: valid and test hold
families train never sees. xla programs are convolution-heavy (plus RNNs, as
the real xla collection holds), nlp programs dot/reshape-heavy.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from synthetic.common.fileformat import (
    BF16,
    F32,
    OP_ADD,
    OP_BROADCAST,
    OP_COMPARE,
    OP_CONSTANT,
    OP_CONVERT,
    OP_CONVOLUTION,
    OP_DIVIDE,
    OP_DOT,
    OP_EXPONENTIAL,
    OP_MAXIMUM,
    OP_MULTIPLY,
    OP_REDUCE,
    OP_RESHAPE,
    OP_RSQRT,
    OP_SELECT,
    OP_SUBTRACT,
    OP_TANH,
    OP_TRANSPOSE,
    ElementType,
)
from synthetic.common.opgraph import OpGraph, Window
from synthetic.layout.cost_model import CONFIGURABLE_OPCODES

MIN_NODES, MAX_NODES = 100, 400
MIN_CONFIGURABLE_FRACTION, MAX_CONFIGURABLE_FRACTION = 0.02, 0.08

# Family names hold no "_": a graph id is "<family>_<dtype>_<index>".
FAMILIES: dict[str, dict[str, tuple[str, ...]]] = {
    "xla": {
        "train": ("resnet", "vgg", "lstm"),
        "valid": ("unet",),
        "test": ("mobilenet",),
    },
    "nlp": {
        "train": ("bert", "gpt", "mixer"),
        "valid": ("t5",),
        "test": ("gru",),
    },
}


@dataclasses.dataclass(frozen=True)
class Program:
    """One program graph in the real arrays' dtypes."""

    family: str
    etype: ElementType
    node_feat: np.ndarray  # float32 (n, 140)
    node_opcode: np.ndarray  # uint8 (n,)
    edge_index: np.ndarray  # int64 (m, 2), row [u, v]: u consumes v, u > v
    node_config_ids: np.ndarray  # int64 (nc,)
    node_splits: np.ndarray  # int64 (1, k): computation starts, then n

    @property
    def num_nodes(self) -> int:
        return int(self.node_feat.shape[0])


def _pick(rng: np.random.Generator, values):
    return values[int(rng.integers(len(values)))]


class _Builder:
    """Adds HLO-like ops to a `OpGraph`; every configurable op gets elementwise filler."""

    def __init__(self, rng: np.random.Generator, etype: ElementType, filler: tuple[int, int]):
        self.g = OpGraph()
        self.rng = rng
        self.etype = etype
        self.filler = filler
        self.block_starts: list[int] = []

    def shape(self, x: int) -> tuple[int, ...]:
        return self.g.nodes[x].shape

    def block(self) -> None:
        """Marks the start of a layer (candidate computation boundary)."""
        self.block_starts.append(len(self.g))

    # Leaves -----------------------------------------------------------------
    def param(self, shape, transposed_ok: bool = True) -> int:
        rank = len(shape)
        layout = list(range(rank - 1, -1, -1))
        if transposed_ok and rank >= 2 and self.rng.random() < 0.2:
            layout[0], layout[1] = layout[1], layout[0]  # stored transposed
        return self.g.parameter(shape, self.etype, layout)

    def splat(self, shape) -> int:
        k = self.g.add(OP_CONSTANT, (), self.etype)
        return self.g.add(OP_BROADCAST, shape, self.etype, (k,))

    def vector(self, x: int, dim: int) -> int:
        """A parameter vector broadcast along dim `dim` of x's shape (bias, scale)."""
        shape = self.shape(x)
        p = self.g.parameter((shape[dim],), self.etype)
        return self.g.add(OP_BROADCAST, shape, self.etype, (p,), dimensions=(dim,))

    # Elementwise ------------------------------------------------------------
    def unary(self, x: int, op: int | None = None) -> int:
        op = op if op is not None else int(_pick(self.rng, (OP_EXPONENTIAL, OP_TANH, OP_RSQRT)))
        return self.g.add(op, self.shape(x), self.etype, (x,))

    def binary(self, op: int, x: int, y: int) -> int:
        return self.g.add(op, self.shape(x), self.etype, (x, y))

    def relu(self, x: int) -> int:
        return self.binary(OP_MAXIMUM, x, self.splat(self.shape(x)))

    def elementwise(self, x: int, count: int) -> int:
        """A chain of about `count` elementwise nodes on x (same shape and type)."""
        start = len(self.g)
        shape = self.shape(x)
        while len(self.g) - start < count:
            kind = int(self.rng.integers(6))
            if kind == 0:
                x = self.unary(x)
            elif kind == 1:
                other = BF16 if self.etype is F32 else F32
                y = self.g.add(OP_CONVERT, shape, other, (x,))
                x = self.g.add(OP_CONVERT, shape, self.etype, (y,))
            elif kind == 2:
                op = int(_pick(self.rng, (OP_ADD, OP_MULTIPLY, OP_SUBTRACT)))
                x = self.binary(op, x, self.vector(x, len(shape) - 1))
            elif kind == 3:
                x = self.binary(OP_MULTIPLY, x, self.splat(shape))
            elif kind == 4:
                b = self.splat(shape)
                pred = self.g.add(OP_COMPARE, shape, BF16, (x, b))
                x = self.g.add(OP_SELECT, shape, self.etype, (pred, x, b))
            else:
                x = self.relu(x)
        return x

    def fill(self, x: int) -> int:
        lo, hi = self.filler
        return self.elementwise(x, int(self.rng.integers(lo, hi + 1)))

    def reduce(self, x: int, axis: int, op: int = OP_ADD) -> int:
        """Reduces x over `axis` and broadcasts the result back to x's shape."""
        shape = self.shape(x)
        kept = tuple(d for d in range(len(shape)) if d != axis)
        init = self.g.add(OP_CONSTANT, (), self.etype)
        r = self.g.add(
            OP_REDUCE, tuple(shape[d] for d in kept), self.etype, (x, init), dimensions=(axis,)
        )
        return self.g.add(OP_BROADCAST, shape, self.etype, (r,), dimensions=kept)

    def softmax(self, x: int) -> int:
        last = len(self.shape(x)) - 1
        x = self.binary(OP_SUBTRACT, x, self.reduce(x, last, OP_MAXIMUM))
        x = self.unary(x, OP_EXPONENTIAL)
        return self.binary(OP_DIVIDE, x, self.reduce(x, last))

    def layer_norm(self, x: int) -> int:
        last = len(self.shape(x)) - 1
        centred = self.binary(OP_SUBTRACT, x, self.reduce(x, last))
        var = self.reduce(self.binary(OP_MULTIPLY, centred, centred), last)
        x = self.binary(OP_MULTIPLY, centred, self.unary(var, OP_RSQRT))
        x = self.binary(OP_MULTIPLY, x, self.vector(x, last))
        return self.binary(OP_ADD, x, self.vector(x, last))

    def transpose(self, x: int, perm: tuple[int, ...]) -> int:
        shape = self.shape(x)
        out = tuple(shape[p] for p in perm)
        return self.g.add(OP_TRANSPOSE, out, self.etype, (x,), dimensions=perm)

    # Configurable ops -------------------------------------------------------
    def dot(self, x: int, y: int, x_contract: int, y_contract: int) -> int:
        """Batched dot: leading dims of x are batch (shared with y), then x's free, y's free."""
        xs, ys = self.shape(x), self.shape(y)
        batch = len(ys) - 2
        x_free = tuple(s for d, s in enumerate(xs) if d != x_contract and d >= batch)
        y_free = tuple(s for d, s in enumerate(ys) if d != y_contract and d >= batch)
        out = xs[:batch] + x_free + y_free
        d = self.g.add(OP_DOT, out, self.etype, (x, y), dimensions=(x_contract, y_contract))
        return self.fill(d)

    def dense(self, x: int, units: int) -> int:
        """x (..., K) . W (K, units) + bias."""
        k = self.shape(x)[-1]
        w = self.param((k, units))
        y = self.dot(x, w, len(self.shape(x)) - 1, 0)
        return self.binary(OP_ADD, y, self.vector(y, len(self.shape(y)) - 1))

    def conv(self, x: int, size: int, cout: int, stride: int = 1) -> int:
        n, h, w, cin = self.shape(x)
        f = self.param((size, size, cin, cout))
        pad = (size - 1) // 2
        window = Window((size, size), (stride, stride), (pad, pad), (pad, pad))
        out = (n, -(-h // stride), -(-w // stride), cout)
        y = self.g.add(OP_CONVOLUTION, out, self.etype, (x, f), window=window)
        return self.fill(y)

    def reshape(self, x: int, shape: tuple[int, ...]) -> int:
        assert math.prod(shape) == math.prod(self.shape(x)), (shape, self.shape(x))
        return self.fill(self.g.add(OP_RESHAPE, tuple(shape), self.etype, (x,)))


# ---------------------------------------------------------------------------
# Layers.


def _conv_block(b: _Builder, x: int, cout: int, stride: int, residual: bool) -> int:
    b.block()
    y = b.relu(b.conv(x, 3, cout, stride))
    y = b.conv(y, 3, cout)
    if residual:
        skip = x if b.shape(x) == b.shape(y) else b.conv(x, 1, cout, stride)
        y = b.binary(OP_ADD, y, skip)
    return b.relu(y)


def _inverted_residual(b: _Builder, x: int, cout: int, stride: int) -> int:
    b.block()
    cin = b.shape(x)[-1]
    y = b.relu(b.conv(x, 1, cin * int(_pick(b.rng, (2, 4, 6)))))
    y = b.relu(b.conv(y, 3, b.shape(y)[-1], stride))
    y = b.conv(y, 1, cout)
    return b.binary(OP_ADD, y, x) if b.shape(y) == b.shape(x) else y


def _upsample(b: _Builder, x: int) -> int:
    """Depth-to-space by reshape (rank 6), transpose, reshape: (N,H,W,4C) -> (N,2H,2W,C)."""
    b.block()
    n, h, w, c4 = b.shape(x)
    c = c4 // 4
    y = b.reshape(x, (n, h, w, 2, 2, c))
    y = b.transpose(y, (0, 1, 3, 2, 4, 5))
    return b.reshape(y, (n, 2 * h, 2 * w, c))


def _attention(b: _Builder, x: int, heads: int, memory: int | None, causal: bool) -> int:
    b.block()
    batch, seq, hidden = b.shape(x)
    dh = hidden // heads
    src = x if memory is None else memory
    src_seq = b.shape(src)[1]

    def split(t: int, length: int) -> int:
        t = b.reshape(t, (batch, length, heads, dh))
        return b.transpose(t, (0, 2, 1, 3))  # (B, h, S, dh)

    q = split(b.dense(x, hidden), seq)
    k = split(b.dense(src, hidden), src_seq)
    v = split(b.dense(src, hidden), src_seq)
    scores = b.dot(q, k, 3, 3)  # (B, h, S, S_src)
    scores = b.binary(OP_MULTIPLY, scores, b.splat(b.shape(scores)))
    if causal:
        mask = b.g.parameter(b.shape(scores), BF16)
        scores = b.g.add(
            OP_SELECT, b.shape(scores), b.etype, (mask, scores, b.splat(b.shape(scores)))
        )
    ctx = b.dot(b.softmax(scores), v, 3, 2)  # (B, h, S, dh)
    ctx = b.reshape(b.transpose(ctx, (0, 2, 1, 3)), (batch, seq, hidden))
    return b.layer_norm(b.binary(OP_ADD, x, b.dense(ctx, hidden)))


def _mlp(b: _Builder, x: int, expand: int) -> int:
    b.block()
    hidden = b.shape(x)[-1]
    y = b.unary(b.dense(x, hidden * expand), OP_TANH)
    return b.layer_norm(b.binary(OP_ADD, x, b.dense(y, hidden)))


def _token_mixing(b: _Builder, x: int) -> int:
    b.block()
    seq = b.shape(x)[1]
    y = b.transpose(x, (0, 2, 1))
    y = b.transpose(b.dense(b.relu(b.dense(y, seq * 2)), seq), (0, 2, 1))
    return b.layer_norm(b.binary(OP_ADD, x, y))


def _rnn_step(b: _Builder, x_t: int, h: int, gates: int) -> int:
    """h' = combine(reshape(x_t . W + h . U + bias, (B, gates, H))) (LSTM/GRU-like)."""
    b.block()
    batch, hidden = b.shape(h)
    z = b.binary(OP_ADD, b.dense(x_t, gates * hidden), b.dense(h, gates * hidden))
    z = b.reshape(z, (batch, gates, hidden))
    z = b.unary(z, OP_TANH)
    init = b.g.add(OP_CONSTANT, (), b.etype)
    combined = b.g.add(OP_REDUCE, (batch, hidden), b.etype, (z, init), dimensions=(1,))
    return b.binary(OP_ADD, b.unary(combined, OP_TANH), h)


# ---------------------------------------------------------------------------
# Families.


def _conv_net(b: _Builder, family: str) -> int:
    n = int(_pick(b.rng, (4, 8, 16, 32)))
    hw = int(_pick(b.rng, (28, 56, 64, 112)))
    c = int(_pick(b.rng, (32, 48, 64, 96)))
    x = b.param((n, hw, hw, int(_pick(b.rng, (3, 4, 8)))), transposed_ok=False)
    x = b.relu(b.conv(x, int(_pick(b.rng, (3, 7))), c, 2))
    for i in range(int(b.rng.integers(1, 4))):
        stride = 2 if i and b.rng.random() < 0.5 else 1
        cout = c * 2 if stride == 2 else c
        if family == "resnet":
            x = _conv_block(b, x, cout, stride, residual=True)
        elif family == "vgg":
            x = _conv_block(b, x, cout, stride, residual=False)
        elif family == "mobilenet":
            x = _inverted_residual(b, x, cout, stride)
        else:  # unet: down, then up by depth-to-space, with the skip added back
            skip = x
            x = _conv_block(b, x, cout * 2, 2, residual=False)
            x = _upsample(b, b.conv(x, 1, b.shape(skip)[-1] * 4))
            x = b.binary(OP_ADD, x, skip)
        c = b.shape(x)[-1]
    n_, h, w, c = b.shape(x)
    x = b.reshape(x, (n_, h * w * c))
    return b.dense(x, int(_pick(b.rng, (10, 100, 1000))))


def _transformer(b: _Builder, family: str) -> int:
    batch = int(_pick(b.rng, (4, 8, 16)))
    seq = int(_pick(b.rng, (128, 200, 256, 384, 512)))
    heads = int(_pick(b.rng, (4, 8, 12)))
    hidden = heads * int(_pick(b.rng, (32, 48, 64, 96)))
    x = b.param((batch, seq, hidden), transposed_ok=False)
    memory = None
    if family == "t5":  # decoder layers attending to an encoder output of another length
        memory = b.param((batch, int(_pick(b.rng, (64, 100, 128))), hidden), transposed_ok=False)
    for _ in range(int(b.rng.integers(1, 3))):
        if family == "mixer":
            x = _mlp(b, _token_mixing(b, x), 2)
        else:
            x = _attention(b, x, heads, memory, causal=family == "gpt")
            x = _mlp(b, x, int(_pick(b.rng, (2, 4))))
    return x


def _rnn(b: _Builder, family: str) -> int:
    batch = int(_pick(b.rng, (8, 16, 32, 64)))
    hidden = int(_pick(b.rng, (128, 200, 256, 512)))
    features = int(_pick(b.rng, (64, 100, 128, 300)))
    gates = 4 if family == "lstm" else 3
    h = b.param((batch, hidden), transposed_ok=False)
    for _ in range(int(b.rng.integers(2, 6))):
        h = _rnn_step(b, b.param((batch, features), transposed_ok=False), h, gates)
    return b.dense(h, int(_pick(b.rng, (128, 1000))))


_BUILDERS = {
    "resnet": _conv_net,
    "vgg": _conv_net,
    "unet": _conv_net,
    "mobilenet": _conv_net,
    "lstm": _rnn,
    "gru": _rnn,
    "bert": _transformer,
    "gpt": _transformer,
    "mixer": _transformer,
    "t5": _transformer,
}
_FILLER = {"xla": (8, 30), "nlp": (6, 24)}


def _try_build(rng: np.random.Generator, family: str, filler: tuple[int, int]) -> Program | None:
    etype = BF16 if rng.random() < 0.7 else F32
    b = _Builder(rng, etype, filler)
    out = _BUILDERS[family](b, family)
    b.g.nodes[out].is_root = True
    n = len(b.g)
    opcodes = b.g.opcodes()
    config_ids = np.flatnonzero(np.isin(opcodes, CONFIGURABLE_OPCODES)).astype(np.int64)
    fraction = config_ids.size / n
    if not (MIN_NODES <= n <= MAX_NODES) or not (
        MIN_CONFIGURABLE_FRACTION <= fraction <= MAX_CONFIGURABLE_FRACTION
    ):
        return None
    # 0 to 3 computation boundaries at layer starts, then n (as the real node_splits).
    starts = sorted(set(s for s in b.block_starts if 0 < s < n))
    cuts = sorted(rng.choice(starts, size=min(len(starts), int(rng.integers(0, 4))), replace=False))
    splits = np.array([[0, *cuts, n]], dtype=np.int64)
    return Program(
        family=family,
        etype=etype,
        node_feat=b.g.node_features(),
        node_opcode=opcodes,
        edge_index=b.g.edges(),
        node_config_ids=config_ids,
        node_splits=splits,
    )


def build_program(rng: np.random.Generator, source: str, family: str) -> Program:
    """A program of `family` with 100-400 nodes, 2-8% of them configurable (redrawn until so)."""
    for _ in range(200):
        program = _try_build(rng, family, _FILLER[source])
        if program is not None:
            return program
    raise RuntimeError(f"could not draw a {family} program within the size limits")


# ---------------------------------------------------------------------------
# Release-size programs: the same families, layer after layer up to a node count.

# Elementwise filler per configurable op in release-size programs (longer than the
# toy's, so that about 3% of the nodes are configurable, as in the real files).
RELEASE_FILLER = {"xla": (16, 48), "nlp": (14, 40)}
MAX_CHANNELS = 512


def _snapshot(b: _Builder) -> tuple[int, int, int]:
    return len(b.g.nodes), b.g.num_parameters, len(b.block_starts)


def _restore(b: _Builder, snap: tuple[int, int, int]) -> None:
    """Drops every node added after `snap` (operands always precede their users)."""
    del b.g.nodes[snap[0] :]
    b.g.num_parameters = snap[1]
    del b.block_starts[snap[2] :]


def _conv_stem(b: _Builder) -> int:
    n = int(_pick(b.rng, (4, 8, 16, 32)))
    hw = int(_pick(b.rng, (56, 64, 112, 224)))
    x = b.param((n, hw, hw, int(_pick(b.rng, (3, 4, 8)))), transposed_ok=False)
    return b.relu(b.conv(x, int(_pick(b.rng, (3, 7))), int(_pick(b.rng, (32, 48, 64))), 2))


def _conv_layer(b: _Builder, family: str, x: int, i: int) -> int:
    """Layer i of a deep conv net: stride 2 (doubling channels) every few layers."""
    _, h, _, c = b.shape(x)
    down = i % 4 == 3 and h >= 8
    stride = 2 if down else 1
    cout = min(MAX_CHANNELS, c * 2) if down else c
    if family == "resnet":
        return _conv_block(b, x, cout, stride, residual=True)
    if family == "vgg":
        return _conv_block(b, x, cout, stride, residual=False)
    if family == "mobilenet":
        return _inverted_residual(b, x, cout, stride)
    if h < 4:  # unet: down, then up by depth-to-space, with the skip added back
        return _conv_block(b, x, c, 1, residual=True)
    y = _conv_block(b, x, min(MAX_CHANNELS, c * 2), 2, residual=False)
    return b.binary(OP_ADD, _upsample(b, b.conv(y, 1, c * 4)), x)


def _conv_head(b: _Builder, x: int) -> int:
    n, h, w, c = b.shape(x)
    return b.dense(b.reshape(x, (n, h * w * c)), int(_pick(b.rng, (10, 100, 1000))))


def _transformer_stem(b: _Builder, family: str) -> tuple[int, int, int | None]:
    batch = int(_pick(b.rng, (4, 8, 16)))
    seq = int(_pick(b.rng, (128, 200, 256, 384, 512)))
    heads = int(_pick(b.rng, (4, 8, 12)))
    hidden = heads * int(_pick(b.rng, (32, 48, 64, 96)))
    x = b.param((batch, seq, hidden), transposed_ok=False)
    memory = None
    if family == "t5":
        memory = b.param((batch, int(_pick(b.rng, (64, 100, 128))), hidden), transposed_ok=False)
    return x, heads, memory


def _transformer_layer(b: _Builder, family: str, x: int, heads: int, memory: int | None) -> int:
    if family == "mixer":
        return _mlp(b, _token_mixing(b, x), 2)
    x = _attention(b, x, heads, memory, causal=family == "gpt")
    return _mlp(b, x, int(_pick(b.rng, (2, 4))))


def build_sized_program(
    rng: np.random.Generator, source: str, family: str, num_nodes: int
) -> Program:
    """A program of `family` with exactly `num_nodes` nodes: stem, repeated layers, head.

    Layers are added while the head still fits; the gap is closed by elementwise
    ops on the output. For release-size graphs (thousands of nodes):
        build_sized_program(np.random.default_rng(0), "xla", "resnet", 14_000).num_nodes
    """
    lo, hi = RELEASE_FILLER[source]
    reserve = 3 * (hi + 8) + 16  # the largest head (reshape + dense) plus slack
    if num_nodes < 4 * reserve:
        raise ValueError(f"a sized {family} program needs at least {4 * reserve} nodes")
    etype = BF16 if rng.random() < 0.7 else F32
    b = _Builder(rng, etype, (lo, hi))
    memory: int | None = None
    if family in ("bert", "gpt", "mixer", "t5"):
        x, heads, memory = _transformer_stem(b, family)
    elif family in ("lstm", "gru"):
        batch = int(_pick(rng, (8, 16, 32, 64)))
        hidden = int(_pick(rng, (128, 200, 256, 512)))
        features = int(_pick(rng, (64, 100, 128, 300)))
        x = b.param((batch, hidden), transposed_ok=False)
    else:
        x = _conv_stem(b)
    i = 0
    while True:
        snap = _snapshot(b)
        if family in ("bert", "gpt", "mixer", "t5"):
            y = _transformer_layer(b, family, x, heads, memory)
        elif family in ("lstm", "gru"):
            x_t = b.param((batch, features), transposed_ok=False)
            y = _rnn_step(b, x_t, x, 4 if family == "lstm" else 3)
        else:
            y = _conv_layer(b, family, x, i)
        if len(b.g) + reserve > num_nodes:
            _restore(b, snap)
            break
        x, i = y, i + 1
    if family in ("lstm", "gru"):
        x = b.dense(x, int(_pick(rng, (128, 1000))))
    elif family not in ("bert", "gpt", "mixer", "t5"):
        x = _conv_head(b, x)
    gap = num_nodes - len(b.g)
    if gap > 8:
        x = b.elementwise(x, gap - 8)
    while len(b.g) < num_nodes:
        x = b.unary(x)
    if len(b.g) != num_nodes:
        raise RuntimeError(f"{family}: built {len(b.g)} nodes instead of {num_nodes}")
    b.g.nodes[x].is_root = True
    opcodes = b.g.opcodes()
    config_ids = np.flatnonzero(np.isin(opcodes, CONFIGURABLE_OPCODES)).astype(np.int64)
    starts = sorted(set(s for s in b.block_starts if 0 < s < num_nodes))
    k = min(len(starts), int(rng.integers(1, 2 + num_nodes // 2000)))
    cuts = sorted(rng.choice(starts, size=k, replace=False)) if k else []
    return Program(
        family=family,
        etype=etype,
        node_feat=b.g.node_features(),
        node_opcode=opcodes,
        edge_index=b.g.edges(),
        node_config_ids=config_ids,
        node_splits=np.array([[0, *cuts, num_nodes]], dtype=np.int64),
    )
