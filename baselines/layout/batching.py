"""Layout batches: G program graphs x K configuration slots each, numpy dicts (`assemble_batch`)."""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Sequence

import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn

from baselines.core.format import NODE_FEAT_DIM
from baselines.core.keras_fit import BatchSource, vector_specs
from baselines.core.layers.graph_ops import edge_set
from baselines.layout.codebook import Codebook
from baselines.layout.data import MINOR_TO_MAJOR, SHAPE_DIMS, layout_minor_to_major
from baselines.layout.graph import NODE_CONFIG_FEAT_DIM, LayoutGraph
from baselines.layout.prune import count_configs

# Padding slots' layout values ("the compiler's default"; the slots are masked).
PAD_VALUE = -1

BATCH_SIGNATURE = {
    **vector_specs(tf.int32, "node_sizes", "edge_sizes", "cfg_sizes", "cfg_edge_sizes"),
    **vector_specs(tf.int32, "node_opcode"),
    "node_feats": tf.TensorSpec([None, NODE_FEAT_DIM], tf.float32),
    **vector_specs(tf.int32, "edge_source", "edge_target", "cfg_node", "cfg_source", "cfg_target"),
    "cfg_ref": tf.TensorSpec([None, NODE_CONFIG_FEAT_DIM], tf.int8),
    "cfg_dims": tf.TensorSpec([None, NODE_CONFIG_FEAT_DIM], tf.float32),
    "cfg_operand": tf.TensorSpec([None, 2], tf.int32),
    "config_rows": tf.TensorSpec([None, None, NODE_CONFIG_FEAT_DIM], tf.int8),
    "config_codes": tf.TensorSpec([None, None], tf.int32),
    **vector_specs(tf.float32, "config_runtimes", "config_mask", "config_frequency"),
    **vector_specs(tf.int32, "config_index"),
    **vector_specs(tf.string, "graph_id"),
}


def normalize_node_feat(node_feat: np.ndarray) -> np.ndarray:
    """The 140 node feature columns as models read them, float32 [n, 140]: sign(x) * log1p(|x|)
    (fixed: nothing saved beside a model), then `layout_minor_to_major` in 134-139."""
    x = np.asarray(node_feat, dtype=np.float64)
    out = np.sign(x) * np.log1p(np.abs(x))
    out[:, MINOR_TO_MAJOR] = layout_minor_to_major(node_feat)
    return out.astype(np.float32)


@dataclasses.dataclass(frozen=True, eq=False)
class PreparedGraph:
    """A layout graph as batches take it (`prepare_graphs`); configurations read when batched."""

    graph_id: str
    node_feats: np.ndarray  # float32 [n, 140], normalized
    node_opcode: np.ndarray  # int32 [n]
    edge_index: np.ndarray  # int32 [m, 2], [consumer, producer]
    cfg_node: np.ndarray  # int32 [nc]
    cfg_edges: np.ndarray  # int32 [mc, 2], ids into the nc configurable nodes
    cfg_ref: np.ndarray  # int8 [nc, 18], reference layouts (own, operand 0, operand 1)
    cfg_dims: np.ndarray  # float32 [nc, 18], log1p shape dims of the same tensors
    cfg_operand: np.ndarray  # int32 [nc, 2], configurable ids of operands 0 and 1, or -1
    configs: Codebook  # the c configurations, as per-node codes
    runtimes: np.ndarray  # float32 [c], runtime / smallest runtime (0 when hidden)
    raw_runtimes: np.ndarray  # int64 [c], as in the file
    frequency: np.ndarray  # float32 [c], log of how often the configuration occurs in its file

    @property
    def num_configs(self) -> int:
        return int(self.runtimes.shape[0])


def operand_nodes(graph: LayoutGraph) -> np.ndarray:
    """int64 [nc, 3]: each configurable node's own id, operand 0's and operand 1's (-1: none)."""
    nc = graph.num_configurable
    tensors = np.full((nc, 3), -1, dtype=np.int64)  # own, operand 0, operand 1
    tensors[:, 0] = graph.node_config_ids
    cfg_of_node = np.full(graph.num_nodes, -1, dtype=np.int64)
    cfg_of_node[graph.node_config_ids] = np.arange(nc)
    edges = graph.edge_index.reshape(-1, 2)
    edges = edges[cfg_of_node[edges[:, 0]] >= 0]  # rows read by a configurable node
    owner = cfg_of_node[edges[:, 0]]
    order = np.argsort(owner, kind="stable")  # file order within each node
    owner, producer = owner[order], edges[order, 1]
    first = np.searchsorted(owner, owner, side="left")
    operand = np.arange(owner.size) - first  # 0 for a node's first row, 1 for its second...
    keep = operand < 2
    tensors[owner[keep], 1 + operand[keep]] = producer[keep]
    return tensors


def reference_layouts(graph: LayoutGraph, tensors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(cfg_ref int8 [nc, 18], cfg_dims float32 [nc, 18]) of a graph and its `operand_nodes`."""
    m2m = layout_minor_to_major(graph.node_feat)  # [n, 6], -1 past the rank
    dims = np.log1p(np.maximum(graph.node_feat[:, SHAPE_DIMS], 0)).astype(np.float32)
    nc = graph.num_configurable
    present = tensors >= 0
    ref = np.where(present[:, :, None], m2m[np.maximum(tensors, 0)], -1)
    size = np.where(present[:, :, None], dims[np.maximum(tensors, 0)], 0)
    width = NODE_CONFIG_FEAT_DIM
    return ref.reshape(nc, width).astype(np.int8), size.reshape(nc, width).astype(np.float32)


def prepare_graph(graph: LayoutGraph) -> PreparedGraph:
    """Normalizes one graph's features and finds its configurable-to-configurable edges; a graph
    read without `config_count` is counted as it stands."""
    if graph.config_count is None:
        graph = count_configs(graph)
    cfg_of_node = np.full(graph.num_nodes, -1, dtype=np.int64)
    cfg_of_node[graph.node_config_ids] = np.arange(graph.num_configurable)
    ends = cfg_of_node[graph.edge_index.reshape(-1, 2)]
    cfg_edges = ends[(ends >= 0).all(axis=1)].astype(np.int32).reshape(-1, 2)
    raw = np.asarray(graph.config_runtime, dtype=np.int64)
    operands = operand_nodes(graph)
    cfg_ref, cfg_dims = reference_layouts(graph, operands)
    positive = raw[raw > 0]
    scale = float(positive.min()) if positive.size else 1.0
    operand_ids = operands[:, 1:]  # nodes of operands 0 and 1, -1: none
    cfg_operand = np.where(operand_ids >= 0, cfg_of_node[np.maximum(operand_ids, 0)], -1)
    return PreparedGraph(
        graph_id=graph.graph_id,
        node_feats=normalize_node_feat(graph.node_feat),
        node_opcode=np.asarray(graph.node_opcode, dtype=np.int32),
        edge_index=np.asarray(graph.edge_index, dtype=np.int32).reshape(-1, 2),
        cfg_node=np.asarray(graph.node_config_ids, dtype=np.int32),
        cfg_edges=cfg_edges,
        cfg_ref=cfg_ref,
        cfg_dims=cfg_dims,
        cfg_operand=cfg_operand.astype(np.int32),
        configs=graph.configs,
        runtimes=(raw / scale).astype(np.float32),
        raw_runtimes=raw,
        frequency=np.log(graph.config_count).astype(np.float32),
    )


def prepare_graphs(graphs: Sequence[LayoutGraph]) -> list[PreparedGraph]:
    return [prepare_graph(g) for g in graphs]


def config_fields(graph: PreparedGraph, slots: np.ndarray, num_configs: int) -> dict:
    """The per-configuration batch fields of one graph's K slots (-1 = padding)."""
    k = int(num_configs)
    slots = np.asarray(slots, dtype=np.int64)
    if slots.shape[0] > k:
        raise ValueError(f"{slots.shape[0]} config slots for a batch of {k}")
    slots = np.concatenate([slots, np.full(k - slots.shape[0], -1, np.int64)])
    pad = slots < 0
    real = np.where(pad, 0, slots)
    nc = graph.cfg_node.shape[0]
    if graph.num_configs:
        book = graph.configs
        ids = book.offsets[:-1][None, :] + book.codes_of(real).astype(np.int64)  # [K, nc]
        runtimes, frequency = graph.runtimes[real], graph.frequency[real]
    else:  # no configuration at all: every slot is padding
        book, ids = None, np.zeros((k, nc), np.int64)
        runtimes = frequency = np.zeros(k, np.float32)
    rows, codes = _rows_used(np.where(pad[:, None], -1, ids))
    values = np.full(rows.shape + (NODE_CONFIG_FEAT_DIM,), PAD_VALUE, np.int8)
    if book is not None:
        used = rows >= 0
        values[used] = book.rows[rows[used]]
    return {
        "config_rows": values.transpose(1, 0, 2),  # [nc, R, 18]
        "config_codes": codes.T.astype(np.int32),  # [nc, K]
        "config_runtimes": np.where(pad, -1.0, runtimes).astype(np.float32),
        "config_mask": (~pad).astype(np.float32),
        "config_frequency": np.where(pad, 0.0, frequency).astype(np.float32),
        "config_index": slots.astype(np.int32),
    }


def _rows_used(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rows [R, nc], codes [K, nc]) of codebook row ids [K, nc] (-1: padding): per node
    the distinct ids its slots use, -1 past them, and each slot's index among them."""
    order = np.argsort(ids, axis=0, kind="stable")
    ordered = np.take_along_axis(ids, order, axis=0)
    new = np.ones(ordered.shape, dtype=bool)
    new[1:] = ordered[1:] != ordered[:-1]
    rank = np.cumsum(new, axis=0) - 1
    codes = np.empty_like(rank)
    np.put_along_axis(codes, order, rank, axis=0)
    width = int(rank.max(initial=-1)) + 1
    rows = np.full((width, ids.shape[1]), -1, dtype=np.int64)
    rows[rank[new], np.nonzero(new)[1]] = ordered[new]
    return rows, codes


def assemble_batch(
    graphs: Sequence[PreparedGraph],
    graph_ids: Sequence[int],
    config_slots: Sequence[np.ndarray],
    num_configs: int,
) -> dict[str, np.ndarray]:
    """One batch of graphs[graph_ids], each with K `config_slots` (-1 = padding; a graph with
    fewer configurations gets them all plus padding). N nodes, E edges, NC configurable
    nodes, EC edges between two configurable nodes, summed over the G graphs; ids are
    global in the batch:

    - `node_sizes`, `edge_sizes`, `cfg_sizes`, `cfg_edge_sizes` [G]: per-graph counts;
    - `node_opcode` [N] int32, `node_feats` [N, 140] float32 (`normalize_node_feat`);
    - `edge_source`, `edge_target` [E]: edge_index rows [u, v], consumer u -> producer v;
    - `cfg_node` [NC]: the node id of every configurable node, graph by graph;
    - `cfg_source`, `cfg_target` [EC]: ids into the NC configurable nodes, same direction;
    - `cfg_ref` [NC, 18] int8: the unconfigured layouts of a configurable node's own output,
      operand 0 and operand 1 (its i-th edge row in file order), -1 past a rank or for a
      missing operand; `cfg_dims` [NC, 18] float32: those tensors' dims, log1p (0 past the
      rank); `cfg_operand` [NC, 2] int32: the configurable id of operands 0 and 1, else -1;
    - `config_rows` [NC, R, 18] int8: each configurable node's distinct rows among
      the slots, `PAD_VALUE` past its count; `config_codes` [NC, K] int32: slot k's
      row among its node's (a node's config-independent state is one [NC, d] row
      broadcast over K); `to_model_inputs` adds `config_values` [NC, K, 18];
    - `config_runtimes` [G * K] float32: runtime / the graph's smallest, -1 for padding;
      `config_mask` [G * K] 1/0; `config_index` [G * K]: the graph's row, -1 for padding;
      `config_frequency` [G * K]: log of how often the configuration occurs in its file
      (`count_configs`), 0 for padding;
    - `graph_id` [G] bytes; `node_segment` [N] bool (`segment_source` only).
    """
    k = int(num_configs)
    parts: dict[str, list] = {key: [] for key in BATCH_SIGNATURE}
    node_base = cfg_base = 0
    for gid, slots in zip(graph_ids, config_slots):
        g = graphs[gid]
        n, nc = g.node_feats.shape[0], g.cfg_node.shape[0]
        parts["node_sizes"].append(n)
        parts["edge_sizes"].append(g.edge_index.shape[0])
        parts["cfg_sizes"].append(nc)
        parts["cfg_edge_sizes"].append(g.cfg_edges.shape[0])
        parts["node_opcode"].append(g.node_opcode)
        parts["node_feats"].append(g.node_feats)
        parts["edge_source"].append(g.edge_index[:, 0] + node_base)
        parts["edge_target"].append(g.edge_index[:, 1] + node_base)
        parts["cfg_node"].append(g.cfg_node + node_base)
        parts["cfg_source"].append(g.cfg_edges[:, 0] + cfg_base)
        parts["cfg_target"].append(g.cfg_edges[:, 1] + cfg_base)
        parts["cfg_ref"].append(g.cfg_ref)
        parts["cfg_dims"].append(g.cfg_dims)
        parts["cfg_operand"].append(np.where(g.cfg_operand >= 0, g.cfg_operand + cfg_base, -1))
        for key, value in config_fields(g, slots, k).items():
            parts[key].append(value)
        parts["graph_id"].append(np.array([g.graph_id.encode()], dtype=object))
        node_base += n
        cfg_base += nc
    sizes = ("node_sizes", "edge_sizes", "cfg_sizes", "cfg_edge_sizes")
    out = {}
    for key, spec in BATCH_SIGNATURE.items():
        if key in sizes:
            out[key] = np.asarray(parts[key], dtype=np.int32)
        elif key == "graph_id":
            out[key] = np.concatenate(parts[key]) if parts[key] else np.zeros(0, object)
        elif key == "config_rows":
            width = max((p.shape[1] for p in parts[key]), default=0)
            padded = [
                np.pad(p, ((0, 0), (0, width - p.shape[1]), (0, 0)), constant_values=PAD_VALUE)
                for p in parts[key]
            ]
            out[key] = (
                np.concatenate(padded).astype(np.int8)
                if padded
                else np.zeros((0, 0, NODE_CONFIG_FEAT_DIM), np.int8)
            )
        else:
            out[key] = np.concatenate(parts[key]).astype(spec.dtype.as_numpy_dtype)
    return out


def batch_source(graphs: Sequence[PreparedGraph]) -> BatchSource:
    graphs = list(graphs)
    return BatchSource(
        num_configs=np.array([g.num_configs for g in graphs], dtype=np.int64),
        assemble=lambda ids, slots, k: assemble_batch(graphs, ids, slots, k),
        signature=BATCH_SIGNATURE,
    )


SEGMENT_KEY = "node_segment"
SEGMENT_SIGNATURE = {**BATCH_SIGNATURE, SEGMENT_KEY: tf.TensorSpec([None], tf.bool)}


def segment_mask(node_sizes: np.ndarray, keep_nodes: int, rng: np.random.Generator) -> np.ndarray:
    """[N] bool: per graph of n nodes, nodes start..start+keep_nodes-1, start uniform (all
    when n <= keep_nodes); node ids are in file order, so a segment is a run of neighbours."""
    parts = []
    for n in np.asarray(node_sizes, dtype=np.int64):
        keep = np.zeros(n, dtype=bool)
        start = int(rng.integers(0, n - keep_nodes + 1)) if n > keep_nodes else 0
        keep[start : start + keep_nodes] = True
        parts.append(keep)
    return np.concatenate(parts) if parts else np.zeros(0, bool)


def segment_source(
    graphs: Sequence[PreparedGraph], keep_nodes: int, seed: int, per_graph: bool = False
) -> BatchSource:
    """`batch_source` whose batches also carry `node_segment` (`segment_mask`), seeded per batch,
    or per graph and its slots with `per_graph` (a step split into passes draws what the whole
    step would)."""
    plain = batch_source(graphs)

    def assemble(ids: Sequence[int], slots: Sequence[np.ndarray], k: int) -> dict:
        batch = plain.assemble(ids, slots, k)
        if not per_graph:
            key = zlib.crc32(batch["config_index"].tobytes() + b"/".join(batch["graph_id"]))
            rng = np.random.default_rng([seed, key])
            batch[SEGMENT_KEY] = segment_mask(batch["node_sizes"], keep_nodes, rng)
            return batch
        masks = []
        for i, (size, graph_id) in enumerate(zip(batch["node_sizes"], batch["graph_id"])):
            key = zlib.crc32(batch["config_index"][i * k : (i + 1) * k].tobytes() + graph_id)
            masks.append(segment_mask([size], keep_nodes, np.random.default_rng([seed, key])))
        batch[SEGMENT_KEY] = np.concatenate(masks) if masks else np.zeros(0, bool)
        return batch

    return BatchSource(plain.num_configs, assemble, SEGMENT_SIGNATURE)


def to_tensors(batch: dict[str, np.ndarray]) -> dict[str, tf.Tensor]:
    return {k: tf.constant(v, dtype=SEGMENT_SIGNATURE[k].dtype) for k, v in batch.items()}


def to_model_inputs(batch: dict[str, tf.Tensor]) -> dict:
    """What a layout model's `forward` reads: a GraphTensor (a component per graph, node sets `op`,
    `cfg`, edge sets `feed`, consumer -> producer, `cfg_feed`) and the batch's other fields."""
    node_sizes, cfg_sizes = batch["node_sizes"], batch["cfg_sizes"]
    graph = tfgnn.GraphTensor.from_pieces(
        node_sets={
            "op": tfgnn.NodeSet.from_fields(
                sizes=node_sizes,
                features={"op": batch["node_opcode"], "feats": batch["node_feats"]},
            ),
            "cfg": tfgnn.NodeSet.from_fields(sizes=cfg_sizes, features={}),
        },
        edge_sets={
            "feed": edge_set(
                batch["edge_sizes"], ("op", batch["edge_source"]), ("op", batch["edge_target"])
            ),
            "cfg_feed": edge_set(
                batch["cfg_edge_sizes"], ("cfg", batch["cfg_source"]), ("cfg", batch["cfg_target"])
            ),
        },
    )
    return {
        "graph": graph,
        # Each node's distinct rows and each slot's row among them; `config_values` gathered.
        "config_rows": batch["config_rows"],
        "config_codes": batch["config_codes"],
        "config_values": tf.gather(batch["config_rows"], batch["config_codes"], batch_dims=1),
        "cfg_node": batch["cfg_node"],
        "cfg_ref": batch["cfg_ref"],
        "cfg_dims": batch["cfg_dims"],
        "cfg_operand": batch["cfg_operand"],
        "node_segment": batch.get(SEGMENT_KEY),
        "config_mask": batch["config_mask"],
        "config_frequency": batch["config_frequency"],
    }


def dummy_batch(num_configs: int = 2) -> dict[str, np.ndarray]:
    """A 3-node graph (one configurable node) with `num_configs` configs: creates variables."""
    graph = LayoutGraph(
        graph_id="dummy",
        node_feat=np.zeros((3, NODE_FEAT_DIM), np.float32),
        node_opcode=np.zeros(3, np.int32),
        edge_index=np.array([[1, 0], [2, 1]], np.int32),
        node_config_ids=np.array([1], np.int32),
        configs=Codebook.from_values(np.full((num_configs, 1, NODE_CONFIG_FEAT_DIM), -1, np.int8)),
        config_runtime=np.ones(num_configs, np.int64),
        node_splits=np.array([0, 3], np.int64),
    )
    return assemble_batch([prepare_graph(graph)], [0], [np.arange(num_configs)], num_configs)
