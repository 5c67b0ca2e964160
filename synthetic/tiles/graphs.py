"""Kernel graph sampler: HLO-like op graphs of five families, with their CostSpec."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

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
    OP_COPY,
    OP_DIVIDE,
    OP_DOT,
    OP_EXPONENTIAL,
    OP_MAXIMUM,
    OP_MULTIPLY,
    OP_PARAMETER,
    OP_REDUCE,
    OP_RESHAPE,
    OP_RSQRT,
    OP_SELECT,
    OP_SUBTRACT,
    OP_TANH,
    OP_TRANSPOSE,
    OP_TUPLE,
    PRED,
    TUPLE,
    ElementType,
)
from synthetic.common.opgraph import OpGraph as _Graph
from synthetic.common.opgraph import OpNode as _Node  # noqa: F401
from synthetic.common.opgraph import Window as _Window
from synthetic.common.opgraph import default_layout as _default_layout
from synthetic.tiles.cost_model import (
    REDUCED_AXIS,
    Contraction,
    CostSpec,
    OperandSpec,
)


@dataclasses.dataclass
class _Work:
    """Per-output-element work and streamed operands, accumulated while building."""

    operands: list[OperandSpec] = dataclasses.field(default_factory=list)
    vpu: float = 0.0
    eup: float = 0.0

    def spec(self, out_dims, layout, out_bytes, contraction=None) -> CostSpec:
        """The CostSpec of a kernel with this work and an output of `layout`."""
        return CostSpec(
            out_dims=out_dims,
            out_minor=layout[0],
            out_second=layout[1] if len(out_dims) > 1 else None,
            out_bytes=out_bytes,
            operands=tuple(self.operands),
            vpu_per_element=self.vpu,
            eup_per_element=self.eup,
            contraction=contraction,
        )


_MINOR_SIZES = (32, 64, 96, 100, 128, 192, 200, 256, 320, 384, 512, 640, 768, 1000, 1024)
_MINOR_SIZES += (1280, 2048, 3072, 4096)
_MAJOR_SIZES = (1, 2, 3, 4, 6, 7, 8, 12, 14, 16, 24, 28, 32, 49, 56, 64, 112, 128, 196, 224)
_MAJOR_SIZES += (256, 384, 512, 1024)


def _choice(rng: np.random.Generator, values: Sequence) -> object:
    return values[int(rng.integers(len(values)))]


def _sample_shape(rng: np.random.Generator, rank: int, log2_size: float) -> tuple[int, ...]:
    """An array shape of `rank` with about 2**log2_size elements, natural-looking dims."""
    best, best_gap = None, math.inf
    for _ in range(200):
        shape = [int(_choice(rng, _MAJOR_SIZES)) for _ in range(rank - 1)]
        shape.append(int(_choice(rng, _MINOR_SIZES)))
        gap = abs(math.log2(math.prod(shape)) - log2_size)
        if gap < best_gap:
            best, best_gap = tuple(shape), gap
        if gap < 1.0:
            break
    return best


def _sample_layout(rng: np.random.Generator, rank: int) -> tuple[int, ...]:
    """Mostly the default layout; sometimes the two minor dims swapped, or a permutation."""
    layout = list(_default_layout(rank))
    u = rng.random()
    if rank >= 2 and u < 0.15:
        layout[0], layout[1] = layout[1], layout[0]
    elif rank >= 3 and u < 0.25:
        layout = [int(x) for x in rng.permutation(rank)]
    return tuple(layout)


def _operand_for(shape_layout: tuple[int, ...], bytes_per_element: int) -> OperandSpec:
    """A full-shaped operand with the given layout (same coordinates as the output)."""
    rank = len(shape_layout)
    return OperandSpec(
        dims=tuple(range(rank)),
        minor=shape_layout[0],
        second=shape_layout[1] if rank > 1 else None,
        bytes_per_element=bytes_per_element,
    )


def _elementwise_chain(
    g: _Graph,
    rng: np.random.Generator,
    x: int,
    budget: int,
    work: _Work,
    template: OperandSpec,
    repeat: float = 1.0,
    vector_dim: int | None = None,
) -> int:
    """Appends elementwise ops on `x` (at most `budget` nodes); returns the last value.

    `template` describes a new full-shaped parameter in output coordinates,
    `repeat` is how many of x's elements make one output element (reduce
    prologues), `vector_dim` the output dim bias-like vectors broadcast along.
    """
    values = [x]
    while budget > 0:
        node = g.nodes[x]
        shape, layout, etype = node.shape, node.layout or None, node.etype
        options = [("unary", 1, 2.0), ("convert", 1, 0.6), ("binary_param", 2, 3.0)]
        options += [("binary_const", 3, 2.0), ("select", 4, 0.8)]
        if vector_dim is not None:
            options.append(("binary_vector", 3, 2.0))
        same_type = [v for v in values[:-1] if g.nodes[v].etype is etype]
        if same_type:
            options.append(("reuse", 1, 1.5))
        options = [o for o in options if o[1] <= budget]
        weights = np.array([o[2] for o in options])
        kind, size, _ = options[int(rng.choice(len(options), p=weights / weights.sum()))]
        budget -= size
        if kind == "unary":
            op = int(_choice(rng, (OP_EXPONENTIAL, OP_TANH, OP_RSQRT)))
            x = g.add(op, shape, etype, (x,), layout)
            work.eup += repeat
            work.vpu += 2 * repeat
        elif kind == "convert":
            etype = BF16 if etype is F32 else F32
            x = g.add(OP_CONVERT, shape, etype, (x,), layout)
            work.vpu += repeat
        elif kind == "binary_param":
            op = int(_choice(rng, (OP_ADD, OP_MULTIPLY, OP_SUBTRACT, OP_MAXIMUM, OP_DIVIDE)))
            p = g.parameter(shape, etype, layout)
            work.operands.append(dataclasses.replace(template, bytes_per_element=etype.bytes))
            x = g.add(op, shape, etype, (x, p) if rng.random() < 0.7 else (p, x), layout)
            work.vpu += (2 if op == OP_DIVIDE else 1) * repeat
            work.eup += repeat if op == OP_DIVIDE else 0.0
        elif kind == "binary_const":
            op = int(_choice(rng, (OP_ADD, OP_MULTIPLY, OP_MAXIMUM)))
            k = g.add(OP_CONSTANT, (), etype)
            b = g.add(OP_BROADCAST, shape, etype, (k,), layout)
            x = g.add(op, shape, etype, (x, b), layout)
            work.vpu += repeat
        elif kind == "binary_vector":
            op = int(_choice(rng, (OP_ADD, OP_MULTIPLY)))
            p = g.parameter((shape[vector_dim],), etype)
            b = g.add(OP_BROADCAST, shape, etype, (p,), layout, dimensions=(vector_dim,))
            x = g.add(op, shape, etype, (x, b), layout)
            work.operands.append(OperandSpec((vector_dim,), vector_dim, None, etype.bytes))
            work.vpu += repeat
        elif kind == "reuse":
            other = same_type[int(rng.integers(len(same_type)))]
            op = int(_choice(rng, (OP_ADD, OP_MULTIPLY, OP_SUBTRACT)))
            x = g.add(op, shape, etype, (x, other), layout)
            work.vpu += repeat
        else:  # select(compare(x, c), x, c)
            k = g.add(OP_CONSTANT, (), etype)
            b = g.add(OP_BROADCAST, shape, etype, (k,), layout)
            pred = g.add(OP_COMPARE, shape, PRED, (x, b), layout)
            x = g.add(OP_SELECT, shape, etype, (pred, x, b), layout)
            work.vpu += 3 * repeat
        values.append(x)
    return x


def _finish_outputs(g: _Graph, rng: np.random.Generator, x: int, multi_output: bool) -> int:
    """Marks the roots (with `multi_output`: a tuple of two same-shaped values, 1-2 nodes).

    Returns the output bytes per element, summed over the outputs.
    """
    if not multi_output:
        g.nodes[x].is_root = True
        return g.nodes[x].etype.bytes
    node = g.nodes[x]
    candidates = [
        i
        for i, n in enumerate(g.nodes)
        if i != x
        and n.shape == node.shape
        and n.opcode not in (OP_PARAMETER, OP_BROADCAST)
        and n.etype is not PRED
    ]
    if candidates:
        other = candidates[int(rng.integers(len(candidates)))]
    else:
        other = g.add(OP_CONVERT, node.shape, BF16 if node.etype is F32 else F32, (x,), node.layout)
    first, second = sorted((x, other))
    t = g.add(OP_TUPLE, (), TUPLE, (first, second), tuple_size=2)
    for i in (first, second, t):
        g.nodes[i].is_root = True
    return g.nodes[first].etype.bytes + g.nodes[second].etype.bytes


@dataclasses.dataclass(frozen=True)
class _Plan:
    """Per-kernel choices made before building the graph."""

    family: str
    target_nodes: int
    etype: ElementType
    multi_output: bool = False
    configurable: bool = True


def _build_move(g: _Graph, rng: np.random.Generator, plan: _Plan) -> CostSpec:
    """2 nodes: parameter -> copy / transpose / reshape / convert."""
    rank = int(_choice(rng, (1, 2, 2, 3, 3, 4)))
    shape = _sample_shape(rng, rank, rng.uniform(10, 23))
    etype = plan.etype
    kind = str(_choice(rng, ("copy", "transpose", "reshape", "convert")))
    if rank == 1 and kind in ("copy", "transpose"):
        kind = "convert"
    in_etype, out_etype = etype, etype
    if kind == "copy":
        in_layout = tuple(int(v) for v in rng.permutation(rank))
        if in_layout == _default_layout(rank):
            in_layout = tuple(reversed(in_layout))
        p = g.parameter(shape, etype, in_layout)
        x = g.add(OP_COPY, shape, etype, (p,))
        operand = OperandSpec(tuple(range(rank)), in_layout[0], in_layout[1], etype.bytes)
    elif kind == "transpose":
        perm = tuple(int(v) for v in rng.permutation(rank))
        if perm == tuple(range(rank)):
            perm = tuple(reversed(perm))
        in_shape = tuple(shape[perm.index(d)] for d in range(rank))  # shape[j] = in[perm[j]]
        p = g.parameter(in_shape, etype)
        x = g.add(OP_TRANSPOSE, shape, etype, (p,), dimensions=perm)
        minor, second = perm.index(rank - 1), perm.index(rank - 2)
        operand = OperandSpec(tuple(range(rank)), minor, second, etype.bytes)
    elif kind == "reshape":
        if rank >= 2:
            in_shape = shape[:-2] + (shape[-2] * shape[-1],)
        else:
            in_shape = (2, shape[0] // 2) if shape[0] % 2 == 0 else (1, shape[0])
        p = g.parameter(in_shape, etype)
        x = g.add(OP_RESHAPE, shape, etype, (p,))
        operand = _operand_for(_default_layout(rank), etype.bytes)
    else:
        in_etype = BF16 if etype is F32 else F32
        p = g.parameter(shape, in_etype)
        x = g.add(OP_CONVERT, shape, out_etype, (p,))
        operand = _operand_for(_default_layout(rank), in_etype.bytes)
    g.nodes[x].is_root = True
    layout = g.nodes[x].layout
    return CostSpec(
        out_dims=shape,
        out_minor=layout[0],
        out_second=layout[1] if rank > 1 else None,
        out_bytes=out_etype.bytes,
        operands=(operand,),
        vpu_per_element=1.0 if kind == "convert" else 0.0,
        eup_per_element=0.0,
        contraction=None,
        configurable=plan.configurable,
    )


def _build_elementwise(g: _Graph, rng: np.random.Generator, plan: _Plan) -> CostSpec:
    rank = int(_choice(rng, (1, 2, 2, 3, 3, 4, 4)))
    shape = _sample_shape(rng, rank, rng.uniform(10, 25))
    layout = _sample_layout(rng, rank)
    work = _Work()
    template = _operand_for(layout, plan.etype.bytes)
    x = g.parameter(shape, plan.etype, layout)
    work.operands.append(template)
    budget = max(1, plan.target_nodes - 1 - (2 if plan.multi_output else 0))
    x = _elementwise_chain(g, rng, x, budget, work, template, vector_dim=layout[0])
    out_bytes = _finish_outputs(g, rng, x, plan.multi_output)
    return work.spec(shape, layout, out_bytes)


def _build_reduce(g: _Graph, rng: np.random.Generator, plan: _Plan) -> CostSpec:
    """parameter -> elementwise prologue -> reduce over one axis -> epilogue."""
    in_rank = int(_choice(rng, (2, 2, 3, 3, 4)))
    in_shape = _sample_shape(rng, in_rank, rng.uniform(12, 25))
    axis = in_rank - 1 if rng.random() < 0.5 else int(rng.integers(in_rank - 1))
    out_shape = tuple(s for d, s in enumerate(in_shape) if d != axis)
    out_rank = in_rank - 1
    reduced = in_shape[axis]

    def out_dim(d: int) -> int:
        return REDUCED_AXIS if d == axis else (d if d < axis else d - 1)

    work = _Work()
    template = OperandSpec(
        tuple(range(out_rank)),
        out_dim(in_rank - 1),
        out_dim(in_rank - 2),
        plan.etype.bytes,
        reduced=reduced,
    )
    x = g.parameter(in_shape, plan.etype)
    work.operands.append(template)
    budget = max(0, plan.target_nodes - 3)
    pre = int(rng.integers(budget + 1)) if budget else 0
    x = _elementwise_chain(g, rng, x, pre, work, template, repeat=float(reduced))
    etype = g.nodes[x].etype
    init = g.add(OP_CONSTANT, (), etype)
    x = g.add(OP_REDUCE, out_shape, etype, (x, init), dimensions=(axis,))
    work.vpu += reduced
    out_layout = _default_layout(out_rank)
    out_template = _operand_for(out_layout, etype.bytes)
    x = _elementwise_chain(g, rng, x, budget - pre, work, out_template, vector_dim=out_layout[0])
    out_bytes = _finish_outputs(g, rng, x, False)
    return work.spec(out_shape, out_layout, out_bytes)


def _build_dot(g: _Graph, rng: np.random.Generator, plan: _Plan) -> CostSpec:
    """lhs (B.., M, K) x rhs (B.., K, N) -> dot -> epilogue (bias, activation, ...)."""
    sizes = (64, 96, 128, 192, 256, 384, 512, 768, 1000, 1024, 2048, 3072, 4096)
    for _ in range(100):
        batch = () if rng.random() < 0.6 else (int(_choice(rng, (2, 4, 8, 12, 16, 32))),)
        m, n = int(_choice(rng, sizes)), int(_choice(rng, sizes))
        k = int(_choice(rng, sizes + (8192,)))
        out = math.prod(batch) * m * n
        if out <= 2**24 and out * k <= 2**35:
            break
    etype = plan.etype
    lhs = g.parameter(batch + (m, k), etype)
    rhs = g.parameter(batch + (k, n), etype)
    shape = batch + (m, n)
    rank = len(shape)
    x = g.add(OP_DOT, shape, etype, (lhs, rhs), dimensions=(rank - 1, rank - 2))
    layout = _default_layout(rank)
    work = _Work()
    budget = max(0, plan.target_nodes - 3 - (2 if plan.multi_output else 0))
    x = _elementwise_chain(
        g, rng, x, budget, work, _operand_for(layout, etype.bytes), vector_dim=rank - 1
    )
    out_bytes = _finish_outputs(g, rng, x, plan.multi_output)
    return work.spec(shape, (rank - 1, rank - 2), out_bytes, Contraction("dot", k, etype.bytes))


def _build_conv(g: _Graph, rng: np.random.Generator, plan: _Plan) -> CostSpec:
    """input (N, H, W, Ci) * filter (kh, kw, Ci, Co) -> convolution -> epilogue."""
    for _ in range(100):
        n = int(_choice(rng, (1, 2, 4, 8, 16, 32, 64)))
        hw_size = int(_choice(rng, (7, 14, 28, 56, 112)))
        ci = int(_choice(rng, (16, 32, 64, 96, 128, 256, 512)))
        co = int(_choice(rng, (16, 32, 64, 96, 128, 256, 512)))
        kh = int(_choice(rng, (1, 3, 3, 5, 7)))
        stride = 2 if rng.random() < 0.25 else 1
        ho = -(-hw_size // stride)
        out = n * ho * ho * co
        if out <= 2**24 and out * kh * kh * ci <= 2**35:
            break
    etype = plan.etype
    inp = g.parameter((n, hw_size, hw_size, ci), etype)
    flt = g.parameter((kh, kh, ci, co), etype)
    pad = (kh - 1) // 2
    window = _Window((kh, kh), (stride, stride), (pad, pad), (pad, pad))
    shape = (n, ho, ho, co)
    x = g.add(OP_CONVOLUTION, shape, etype, (inp, flt), window=window)
    layout = _default_layout(4)
    work = _Work()
    budget = max(0, plan.target_nodes - 3 - (2 if plan.multi_output else 0))
    x = _elementwise_chain(g, rng, x, budget, work, _operand_for(layout, etype.bytes), vector_dim=3)
    out_bytes = _finish_outputs(g, rng, x, plan.multi_output)
    return work.spec(
        shape, (3, 2), out_bytes, Contraction("conv", ci, etype.bytes, (kh, kh), stride)
    )


_BUILDERS = {
    "move": _build_move,
    "elementwise": _build_elementwise,
    "reduce": _build_reduce,
    "dot": _build_dot,
    "conv": _build_conv,
}
_FAMILY_MIN_NODES = {"move": 2, "elementwise": 2, "reduce": 3, "dot": 3, "conv": 3}
_FAMILY_WEIGHTS = {"move": 0.12, "elementwise": 0.33, "reduce": 0.2, "dot": 0.2, "conv": 0.15}
