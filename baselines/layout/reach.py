"""Exact ResModel scores computed on the nodes a graph's configurations reach.

A configuration only moves the states of its configurable nodes before the convolutions (the
prenet is pointwise), and conv l spreads a change one hop (either edge direction), so after
conv l only nodes within l hops of a configurable node (N_l) can differ from a reference pass
in which every configuration value is 0 (no node placed: `config_proj` has no bias). Conv l's
rows N_l read N_{l+1} over the edges with an end in N_l, normalised by whole-graph degrees;
every other row of N_{l+1} holds the reference's state. Sum and mean pooling then add the
reference's pooled state to the summed change over N_L. Max pooling: no `ReachScorer`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn

from baselines.core.layers.graph_ops import edge_set
from baselines.layout.batching import (
    BATCH_SIGNATURE,
    PreparedGraph,
    config_fields,
    to_model_inputs,
)
from baselines.layout.graph import NODE_CONFIG_FEAT_DIM
from baselines.layout.models import LayoutModel, ResModel
from baselines.layout.prune import hop_distances

# Past this share of a graph's nodes in reach, the saving is small: score the whole graph.
MAX_SHARE = 0.9


@dataclasses.dataclass(frozen=True, eq=False)
class Reach:
    """The rows a ResModel with `len(counts) - 2` convs runs per configuration (`find_reach`)."""

    rows: np.ndarray  # int64 [s]: node ids, the configurable ones first (cfg order), then by hops
    counts: np.ndarray  # int32 [L + 2]: counts[l] rows lie within l hops (N_l is rows[:counts[l]])
    edges: tuple[np.ndarray, ...]  # per conv l = 1..L: int32 [e, 2] local edges with an end in N_l
    degree: np.ndarray  # float32 [s]: each row's in- plus out-edges in the whole graph
    num_nodes: int

    @property
    def pays(self) -> bool:
        """Whether the reach is small enough to beat scoring the whole graph."""
        return self.rows.size <= MAX_SHARE * self.num_nodes


def find_reach(graph: PreparedGraph, num_gnns: int) -> Reach:
    """The rows, per-conv edges and whole-graph degrees `ReachScorer` runs `graph` on."""
    n, edges, cfg = graph.node_feats.shape[0], graph.edge_index.astype(np.int64), graph.cfg_node
    depth = num_gnns + 1 if num_gnns else 0  # the last conv reads one hop past its rows
    dist = hop_distances(n, edges, cfg, depth)
    rest = np.flatnonzero((dist > 0) & (dist <= depth))
    rows = np.concatenate([cfg.astype(np.int64), rest[np.argsort(dist[rest], kind="stable")]])
    counts = np.searchsorted(np.sort(dist), np.arange(depth + 1), side="right").astype(np.int32)
    local = np.full(n, -1, np.int64)
    local[rows] = np.arange(rows.size)
    near = np.minimum(dist[edges[:, 0]], dist[edges[:, 1]])
    per_conv = tuple(local[edges[near <= hop]].astype(np.int32) for hop in range(1, num_gnns + 1))
    degree = np.bincount(edges.ravel(), minlength=n)[rows].astype(np.float32)
    return Reach(rows, counts, per_conv, degree, n)


def applies(model: LayoutModel) -> bool:
    """Whether `model` computes ResModel's own scores with sum or mean pooling only."""
    own = type(model)
    return (
        isinstance(model, ResModel)
        and own.forward is LayoutModel.forward
        and own.graph_part is ResModel.graph_part
        and own.config_part is ResModel.config_part
        and set(model.pool.reductions) <= {"sum", "mean"}
    )


class ReachScorer:
    """Scores a ResModel's configurations (`applies`) on their `Reach` after one reference pass
    of the whole graph; equal to `forward` up to float32 rounding."""

    def __init__(self, model: ResModel):
        self.model = model
        width, convs = model.config_proj.units, len(model.convs)
        state = tf.TensorSpec([None, width], tf.float32)
        graph_spec = {
            "op_cfg": state,  # the op part of the configurable nodes
            "pinned": (state,) * (convs + 1),  # reference rows (`_constants`)
            "edges": (tf.TensorSpec([None, 2], tf.int32),) * convs,
            "counts": tf.TensorSpec([convs + 2 if convs else 1], tf.int32),
            "degree": tf.TensorSpec([None], tf.float32),
            "pooled": tf.TensorSpec([width * len(model.pool.reductions)], tf.float32),
            "num_nodes": tf.TensorSpec([], tf.float32),
        }
        self._reference = tf.function(self._reference_pass, input_signature=[BATCH_SIGNATURE])
        rows = tf.TensorSpec([None, None, NODE_CONFIG_FEAT_DIM], tf.int8)
        codes = tf.TensorSpec([None, None], tf.int32)
        self._chunk = tf.function(self._chunk_scores, input_signature=[rows, codes, graph_spec])

    def score(
        self, graph: PreparedGraph, reach: Reach, tensors: dict, chunks: Sequence[np.ndarray]
    ) -> np.ndarray:
        """[configs] scores of `graph`'s `chunks` of configurations; `tensors` a batch of it."""
        op_part, refs, pooled, score = self._reference(tensors)
        if reach.rows.size == 0:  # nothing configurable: every configuration is the reference
            return np.full(graph.num_configs, score.numpy(), np.float32)
        constants = self._constants(reach, op_part.numpy(), [r.numpy() for r in refs], pooled)
        parts = []
        for slots in chunks:
            fields = config_fields(graph, slots, len(slots))
            rows, codes = fields["config_rows"], fields["config_codes"]
            parts.append(self._chunk(tf.constant(rows), tf.constant(codes), constants).numpy())
        return np.concatenate(parts)

    def _constants(self, reach: Reach, op_part, refs: list[np.ndarray], pooled) -> dict:
        """The chunk function's per-graph inputs, reference rows in `reach` order."""
        counts, convs = reach.counts, len(self.model.convs)
        ordered = [ref[reach.rows] for ref in refs]
        # Conv h + 1's input takes rows counts[h]..counts[h + 2] from ref_h; the pooled change
        # subtracts ref_L over N_L.
        pinned = [ordered[h][counts[h] : counts[h + 2]] for h in range(convs)]
        pinned.append(ordered[convs][: counts[convs]])
        return {
            "op_cfg": tf.constant(op_part[reach.rows[: counts[0]]]),
            "pinned": tuple(tf.constant(p) for p in pinned),
            "edges": tuple(tf.constant(e) for e in reach.edges),
            "counts": tf.constant(counts),
            "degree": tf.constant(reach.degree),
            "pooled": pooled,
            "num_nodes": tf.constant(float(reach.num_nodes)),
        }

    def _reference_pass(self, batch: dict) -> tuple:
        """(op part [N, h], states ref_0..ref_L [N, h], pooled [h * r], score) of `batch`'s one
        graph with every configuration value 0: ResModel's `config_part` with nothing placed."""
        model, inputs = self.model, to_model_inputs(batch)
        graph = inputs["graph"]
        op_part = model.graph_part(inputs, training=False)
        states = model.activation(op_part[:, None, :])
        for layer in model.prenet:
            states = layer(states)
        refs = [states[:, 0]]
        for conv in model.convs:
            states = conv(graph, states)
            refs.append(states[:, 0])
        pooled = model.pool(graph, states)  # [1, 1, h * r]
        return op_part, tuple(refs), pooled[0, 0], model.head(pooled, training=False)[0, 0]

    def _chunk_scores(self, rows: tf.Tensor, codes: tf.Tensor, constants: dict) -> tf.Tensor:
        """[K] scores of one chunk (`config_fields`' rows and codes) on the reach's rows."""
        model, counts = self.model, constants["counts"]
        values = tf.cast(tf.gather(rows, codes, batch_dims=1), tf.float32)  # [NC, K, 18]
        states = model.activation(constants["op_cfg"][:, None, :] + model.config_proj(values))
        for layer in model.prenet:
            states = layer(states)
        k = tf.shape(codes)[1]
        for hop, conv in enumerate(model.convs, start=1):
            pinned = constants["pinned"][hop - 1]
            # Rows the configurations cannot move hold the reference's states, for every k.
            shape = tf.stack([tf.shape(pinned)[0], k, pinned.shape[-1]])
            fixed = tf.broadcast_to(pinned[:, None, :], shape)
            states = tf.concat([states, fixed], 0)  # N_{hop + 1}'s rows
            edges = constants["edges"][hop - 1]
            graph = tfgnn.GraphTensor.from_pieces(
                node_sets={"op": tfgnn.NodeSet.from_fields(sizes=counts[hop + 1][None])},
                edge_sets={
                    "feed": edge_set(tf.shape(edges)[:1], ("op", edges[:, 0]), ("op", edges[:, 1]))
                },
            )
            degree = constants["degree"][: counts[hop + 1]]
            states = conv(graph, states, degree=degree)[: counts[hop]]  # exact rows: N_hop
        change = tf.reduce_sum(states - constants["pinned"][-1][:, None, :], axis=0)  # [K, h]
        parts = [
            change if r == "sum" else change / constants["num_nodes"] for r in model.pool.reductions
        ]
        pooled = constants["pooled"] + tf.concat(parts, axis=-1)
        return model.head(pooled[None], training=False)[0]
