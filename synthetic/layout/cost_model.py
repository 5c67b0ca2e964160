"""The analytic layout cost model: a program's runtime under one layout configuration.

Everything is read from a layout file's own arrays, so the model is a pure function
of what the file holds (a test can recompute any file's noise-free runtimes):

    ns = layout_runtime_ns(node_feat, node_opcode, edge_index, node_config_ids, config_feat)

Notation. A tensor t is a node's output: shape s (node_feat columns 21-26, rank r =
number of non-zero dims), element bytes e (column 1 / 8), bytes B(t) = e * prod(s).
`nf(t)` is its layout in node_feat columns 134..133+r (minor-to-major). Edge row
[u, v] means u consumes v; the k-th row with first entry u (in file order) is u's
operand k (the generator writes edges in operand order, one per distinct operand).

Layouts a configuration decides (node_config_feat, per configurable node j = node w):
  out(w)      = group 0-5 (w's output layout),
  in(w)       = group 6-11 (the layout w reads its operand 0 in),
  kernel(w)   = group 12-17 (the layout w reads its operand 1 in; convolution and dot only).
A group's first r entries are a permutation of 0..r-1 of its tensor's rank r, the
rest -1. A group of all -1 is the compiler's default: it resolves to nf of its
tensor (w for out, operand 0 for in, operand 1 for kernel). A group that gives only
its first k < r dims (as the real files' groups often do: the two most-minor) keeps
them and orders the other dims as nf does. Every layout the configuration does not
decide is nf: the output of a non-configurable node, and what a non-configurable
consumer (or a slot without a group) reads.

    runtime_ns = BASE + TRANSPOSES + PADDING, measured = round(runtime_ns * exp(N(0, sigma^2)))
    (sigma NOISE_SIGMA = 0.01 in the toy set, RELEASE_NOISE_SIGMA = 1e-4 at release size)

BASE (the same for every configuration of a graph):
    sum over nodes v that are not parameters or constants of B(v) / HBM_BYTES_PER_NS
  + sum over dots      of 2 * prod(s(v)) * K / mxu(v),  K = s(operand 0)[c], c = column 31
  + sum over convolutions of 2 * prod(s(v)) * prod(s(op1)) / s(op1)[-1] / mxu(v)
    (op1 = the filter (kh, kw, cin, cout): kh * kw * cin multiply-adds per output),
  mxu(v) = MXU_FLOPS_PER_NS for 2-byte elements, a quarter of it for 4-byte ones.

TRANSPOSES: for every edge [u, v] at operand slot k, the layout v is written in,
    P = out(v) if v is configurable else nf(v),
and the layout u reads it in,
    W = in(u) if u is configurable and k == 0,
        kernel(u) if u is a configurable convolution or dot and k == 1,
        nf(v) otherwise;
if P and W differ in their first rank(v) entries (rank(v) >= 2), a relayout copy costs
    TRANSPOSE_NS_PER_BYTE * B(v).

PADDING: every layout a configuration decides (out(w), in(w), kernel(w) of every
configurable node w, resolved as above) stores its tensor t (shape s, rank r >= 1)
padded: the most-minor dim L[0] to a multiple of LANES, the second-minor L[1]
(r >= 2) to a multiple of SUBLANES:
    padded = prod(s) / s[L0] * ceil(s[L0] / 128) * 128   (then the same for L1 with 8)
    cost   = PAD_NS_PER_BYTE * e * (padded - prod(s)).
Padding of layouts no configuration changes is a per-graph constant and left out.

So the compiler default pays no transposes but may pad badly (a 64-wide minor dim
wastes half its lanes); moving a better dim minor saves padding but costs a
transpose on every edge whose other end still expects the old layout, unless the
neighbours are configured to match. Noise is the only source of ties.

Two sets of constants (`COST_MODELS`, chosen by name with `cost_model=`): "standard"
(the values above, the toy set's) and "alternate" (another chip: a (32, 128) vector
tile, 600 bytes/ns, half the matrix unit, transposes at 0.002 ns/byte and padding at
0.006 ns/byte), so that a method tuned to one model can be checked on another:

    ns = layout_runtime_ns(node_feat, node_opcode, edge_index, ids, feat, cost_model="alternate")
"""

from __future__ import annotations

import dataclasses

import numpy as np

from baselines.core.errors import PipelineError

# Opcodes of the real vocabulary (the ids the tile generator uses too).
OP_CONSTANT = 24
OP_CONVOLUTION = 26
OP_DOT = 34
OP_PARAMETER = 63
OP_RESHAPE = 75
CONFIGURABLE_OPCODES = (OP_CONVOLUTION, OP_DOT, OP_RESHAPE)

# node_feat columns (the real files' featurization).
COL_ELEMENT_BITS = 1
COL_SHAPE = 21  # 21..26
COL_DIMENSIONS = 31  # dot: lhs contracting dim, rhs contracting dim
COL_LAYOUT = 134  # 134..139, minor-to-major

# node_config_feat groups.
GROUP_OUT, GROUP_IN, GROUP_KERNEL = 0, 1, 2
GROUP_WIDTH = 6

HBM_BYTES_PER_NS = 1000.0
MXU_FLOPS_PER_NS = 200_000.0
TRANSPOSE_NS_PER_BYTE = 0.004  # read + write at half the bandwidth (strided access)
PAD_NS_PER_BYTE = 0.002  # padded bytes are written once and read once
LANES = 128
SUBLANES = 8
# Measurement noise, relative (log-normal sigma). The toy set's: on its graphs of a few
# hundred nodes the configurations' runtimes spread by 10-36% (std/mean), far above it.
NOISE_SIGMA = 0.01
# Release-size sets': what the real files show. Repeated configurations in the real
# layout samples differ by 3e-6 to 2e-4 relative (median per file 3.4e-6 to 6.5e-5);
# 1e-4 is the top of that range. On graphs of ~14,000 nodes, where a configuration
# moves the runtime by 0.1-1% (std/mean), the toy set's 1% buried that signal:
# noise-free and measured runtimes agreed only to Kendall's tau 0.05-0.66.
RELEASE_NOISE_SIGMA = 1e-4


@dataclasses.dataclass(frozen=True)
class CostConstants:
    """The constants of one cost model (bandwidths, per-byte costs, the vector tile).

    COST_MODELS["standard"].lanes == 128
    """

    hbm_bytes_per_ns: float
    mxu_flops_per_ns: float
    transpose_ns_per_byte: float
    pad_ns_per_byte: float
    lanes: int
    sublanes: int


COST_MODELS: dict[str, CostConstants] = {
    "standard": CostConstants(
        HBM_BYTES_PER_NS, MXU_FLOPS_PER_NS, TRANSPOSE_NS_PER_BYTE, PAD_NS_PER_BYTE, LANES, SUBLANES
    ),
    "alternate": CostConstants(600.0, 100_000.0, 0.002, 0.006, 128, 32),
}


def cost_constants(name: str) -> CostConstants:
    """The constants of cost model `name`; an unknown name is a one-line PipelineError.

    cost_constants("alternate").sublanes == 32
    """
    if name not in COST_MODELS:
        raise PipelineError(
            f"unknown cost model {name!r}; choose one of {', '.join(sorted(COST_MODELS))}"
        )
    return COST_MODELS[name]


def node_shapes(node_feat: np.ndarray) -> list[tuple[int, ...]]:
    """Each node's shape: the non-zero dims of columns 21-26."""
    dims = np.asarray(node_feat)[:, COL_SHAPE : COL_SHAPE + 6].astype(np.int64)
    return [tuple(int(d) for d in row if d > 0) for row in dims]


def node_layouts(node_feat: np.ndarray) -> list[tuple[int, ...]]:
    """Each node's node_feat layout (minor-to-major), cut to its rank."""
    shapes = node_shapes(node_feat)
    lay = np.asarray(node_feat)[:, COL_LAYOUT : COL_LAYOUT + 6].astype(np.int64)
    return [tuple(int(x) for x in lay[i, : len(s)]) for i, s in enumerate(shapes)]


def operands(edge_index: np.ndarray, num_nodes: int) -> list[list[int]]:
    """operands[u] = the nodes u consumes, in edge_index order (= operand order)."""
    ops: list[list[int]] = [[] for _ in range(num_nodes)]
    for u, v in np.asarray(edge_index, dtype=np.int64).reshape(-1, 2):
        ops[int(u)].append(int(v))
    return ops


def group_tensor(opcode: int, ops: list[int], group: int) -> int | None:
    """The node whose output a configurable node's group lays out (None: no such tensor)."""
    if group == GROUP_IN:
        return ops[0] if ops else None
    if group == GROUP_KERNEL:
        if opcode in (OP_CONVOLUTION, OP_DOT) and len(ops) > 1:
            return ops[1]
        return None
    raise ValueError(f"group {group} lays out the node itself, not an operand")


def padded_elements(
    shape: tuple[int, ...], layout: np.ndarray, lanes: int = LANES, sublanes: int = SUBLANES
) -> np.ndarray:
    """Elements of `shape` stored in each layout of `layout` (k, >= rank), lane/sublane padded."""
    layout = np.asarray(layout, dtype=np.int64)
    size = np.array(shape, dtype=np.float64)
    total = np.full(layout.shape[0], float(np.prod(size)))
    minor = size[layout[:, 0]]
    total = total / minor * np.ceil(minor / lanes) * lanes
    if len(shape) >= 2:
        second = size[layout[:, 1]]
        total = total / second * np.ceil(second / sublanes) * sublanes
    return total


def _completed(given: list[int], default: tuple[int, ...]) -> list[int]:
    """The dims `given`, then the rest of `default` in its order: ([4, 0], (4, 3, 2, 1, 0))
    -> [4, 0, 3, 2, 1]."""
    taken = set(given)
    return [*given, *(d for d in default if d not in taken)]


def _resolve(groups: np.ndarray, default: tuple[int, ...]) -> np.ndarray:
    """(c, 6) groups as full layouts of rank len(default).

    A row of all -1 is `default`; a row that gives only its first k < r dims (the
    rest -1) keeps them and orders the remaining dims as `default` does:
        _resolve([[4, 0, -1, -1, -1, -1]], (4, 3, 2, 1, 0)) -> [[4, 0, 3, 2, 1]]
    """
    r = len(default)
    out = np.asarray(groups, dtype=np.int64)[:, :r].copy()
    given = (out >= 0).sum(axis=1)
    out[given == 0] = default
    partial = (given > 0) & (given < r)
    if partial.any():
        rows = out[partial]
        # One integer per row (entries -1..5 in base 8): a 1-D unique is far cheaper.
        keys = (rows + 1) @ (8 ** np.arange(r, dtype=np.int64))
        _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        patterns = rows[first]
        full = np.array([_completed(row[row >= 0].tolist(), default) for row in patterns])
        out[partial] = full[inverse.reshape(-1)]
    return out


def base_runtime_ns(
    node_feat: np.ndarray,
    node_opcode: np.ndarray,
    edge_index: np.ndarray,
    cost_model: str = "standard",
) -> float:
    """BASE: output traffic of every computed node plus matrix-unit time of dots and convs."""
    k_ = cost_constants(cost_model)
    shapes = node_shapes(node_feat)
    ebytes = np.asarray(node_feat)[:, COL_ELEMENT_BITS].astype(np.float64) / 8
    ops = operands(edge_index, len(shapes))
    total = 0.0
    for v, (shape, opcode) in enumerate(zip(shapes, np.asarray(node_opcode).tolist())):
        if opcode in (OP_PARAMETER, OP_CONSTANT):
            continue
        elements = float(np.prod(shape)) if shape else 1.0
        total += ebytes[v] * elements / k_.hbm_bytes_per_ns
        mxu = k_.mxu_flops_per_ns if ebytes[v] <= 2 else k_.mxu_flops_per_ns / 4
        if opcode == OP_DOT:
            k = shapes[ops[v][0]][int(node_feat[v, COL_DIMENSIONS])]
            total += 2 * elements * k / mxu
        elif opcode == OP_CONVOLUTION:
            kernel = shapes[ops[v][1]]
            total += 2 * elements * float(np.prod(kernel)) / kernel[-1] / mxu
    return total


def layout_cost_terms(
    node_feat: np.ndarray,
    node_opcode: np.ndarray,
    edge_index: np.ndarray,
    node_config_ids: np.ndarray,
    config_feat: np.ndarray,
    cost_model: str = "standard",
) -> dict[str, np.ndarray | float]:
    """The model's terms: {"base": float, "transposes": (c,), "padding": (c,)} in ns."""
    k_ = cost_constants(cost_model)
    node_feat = np.asarray(node_feat)
    opcodes = np.asarray(node_opcode).astype(np.int64).tolist()
    config_feat = np.asarray(config_feat)
    c = config_feat.shape[0]
    shapes = node_shapes(node_feat)
    nf = node_layouts(node_feat)
    ebytes = node_feat[:, COL_ELEMENT_BITS].astype(np.float64) / 8
    ops = operands(edge_index, len(shapes))
    slot_of = {int(w): j for j, w in enumerate(np.asarray(node_config_ids).tolist())}

    memo: dict[tuple[int, int], np.ndarray] = {}

    def resolved(w: int, group: int, tensor: int) -> np.ndarray:
        # A node's output is read by each of its consumers: resolve each group once.
        if (w, group) not in memo:
            cols = slice(group * GROUP_WIDTH, (group + 1) * GROUP_WIDTH)
            memo[w, group] = _resolve(config_feat[:, slot_of[w], cols], nf[tensor])
        return memo[w, group]

    def written(v: int) -> np.ndarray | None:
        return resolved(v, GROUP_OUT, v) if v in slot_of else None

    def read(u: int, k: int, v: int) -> np.ndarray | None:
        if u not in slot_of:
            return None
        if k == 0:
            return resolved(u, GROUP_IN, v)
        if k == 1 and opcodes[u] in (OP_CONVOLUTION, OP_DOT):
            return resolved(u, GROUP_KERNEL, v)
        return None

    transposes = np.zeros(c)
    for u, u_ops in enumerate(ops):
        for k, v in enumerate(u_ops):
            if len(shapes[v]) < 2 or (u not in slot_of and v not in slot_of):
                continue
            p, w = written(v), read(u, k, v)
            p = np.broadcast_to(nf[v], (c, len(nf[v]))) if p is None else p
            w = np.broadcast_to(nf[v], (c, len(nf[v]))) if w is None else w
            differ = np.any(p != w, axis=1)
            transposes += differ * k_.transpose_ns_per_byte * ebytes[v] * np.prod(shapes[v])

    padding = np.zeros(c)
    for w in slot_of:
        laid_out = [(GROUP_OUT, w)]
        for group in (GROUP_IN, GROUP_KERNEL):
            t = group_tensor(opcodes[w], ops[w], group)
            if t is not None:
                laid_out.append((group, t))
        for group, t in laid_out:
            if not shapes[t]:
                continue
            stored = padded_elements(shapes[t], resolved(w, group, t), k_.lanes, k_.sublanes)
            padding += k_.pad_ns_per_byte * ebytes[t] * (stored - np.prod(shapes[t]))
    base = base_runtime_ns(node_feat, node_opcode, edge_index, cost_model)
    return {"base": base, "transposes": transposes, "padding": padding}


def layout_runtime_ns(
    node_feat: np.ndarray,
    node_opcode: np.ndarray,
    edge_index: np.ndarray,
    node_config_ids: np.ndarray,
    config_feat: np.ndarray,
    cost_model: str = "standard",
) -> np.ndarray:
    """Noise-free runtime (float64 ns) of each configuration: BASE + TRANSPOSES + PADDING."""
    terms = layout_cost_terms(
        node_feat, node_opcode, edge_index, node_config_ids, config_feat, cost_model
    )
    return terms["base"] + terms["transposes"] + terms["padding"]


def measure(
    runtime_ns: np.ndarray, rng: np.random.Generator, sigma: float = NOISE_SIGMA
) -> np.ndarray:
    """Measured runtimes: int64 ns with independent log-normal noise of relative `sigma`."""
    runtime_ns = np.asarray(runtime_ns, dtype=np.float64)
    noisy = runtime_ns * np.exp(rng.normal(0.0, sigma, size=runtime_ns.shape))
    return np.round(noisy).astype(np.int64)
