"""Makes layout graphs smaller: fewer configurations, or only the nodes near configurable ones."""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np

from baselines.core.errors import PipelineError
from baselines.layout.graph import LayoutGraph


def _config_groups(graph: LayoutGraph) -> tuple[np.ndarray, np.ndarray]:
    """(the first of each distinct configuration, ascending; how many configurations equal
    each one), from one sort of the configurations' codes."""
    c = graph.num_configs
    if graph.num_configurable == 0:
        # No configurable node: every configuration is the same (empty) one.
        return np.zeros(min(c, 1), dtype=np.int64), np.full(c, c, dtype=np.int64)
    codes = np.ascontiguousarray(graph.configs.codes_of())
    keys = codes.view(np.dtype((np.void, codes.shape[1] * codes.itemsize)))[:, 0]
    _, first, inverse, counts = np.unique(
        keys, return_index=True, return_inverse=True, return_counts=True
    )
    return np.sort(first), counts[inverse.reshape(-1)].astype(np.int64)


def count_configs(graph: LayoutGraph) -> LayoutGraph:
    """The graph with `config_count`: how many of its configurations equal each one. The
    compiler's default search returns to fast configurations, so a count read from the file
    (test files too) can inform a model; counted before `dedup_configs` drops the repeats."""
    return dataclasses.replace(graph, config_count=_config_groups(graph)[1])


def dedup_configs(graph: LayoutGraph) -> tuple[LayoutGraph, int]:
    """The graph without repeated configurations (the first of each kept), and how many dropped.
    A graph not yet counted is counted as it stands first (`count_configs`, from the same sort),
    so the kept configurations still say how often they occurred."""
    first, count = _config_groups(graph)
    if graph.config_count is None:
        graph = dataclasses.replace(graph, config_count=count)
    c = graph.num_configs
    if first.size == c:
        return graph, 0
    return graph.select_configs(first), c - int(first.size)


def graph_key(graph_id: str) -> int:
    """A stable 64-bit number for a graph id (Python's hash() changes between runs)."""
    return int.from_bytes(hashlib.sha256(graph_id.encode("utf-8")).digest()[:8], "little")


def sample_configs(graph: LayoutGraph, max_configs: int, seed: int) -> LayoutGraph:
    """At most `max_configs` configurations, drawn by (`seed`, graph id), in file order."""
    if isinstance(max_configs, bool) or not isinstance(max_configs, int | np.integer):
        raise PipelineError(f"max_configs must be an integer >= 1, got {max_configs!r}")
    if max_configs < 1:
        raise PipelineError(f"max_configs must be >= 1, got {max_configs}")
    if int(seed) < 0:
        raise PipelineError(f"seed must be >= 0, got {seed}")
    c = graph.num_configs
    if c <= max_configs:
        return graph
    rng = np.random.default_rng([int(seed), graph_key(graph.graph_id)])
    keep = np.sort(rng.choice(c, size=int(max_configs), replace=False))
    return graph.select_configs(keep)


def hop_distances(num_nodes: int, edges: np.ndarray, sources: np.ndarray, limit: int) -> np.ndarray:
    """int64 [n]: hops (either edge direction) from the nearest of `sources`, limit + 1 past it."""
    dist = np.full(num_nodes, limit + 1, np.int64)
    dist[sources] = 0
    for hop in range(1, limit + 1):
        frontier = dist == hop - 1
        if not frontier.any():
            break  # everything reachable has its distance
        ends = edges[frontier[edges[:, 0]] | frontier[edges[:, 1]]].ravel()
        dist[ends[dist[ends] > hop]] = hop
    return dist


def prune_to_configurable(graph: LayoutGraph, hops: int) -> tuple[LayoutGraph, np.ndarray]:
    """(the subgraph of configurable nodes and every node within `hops` edges either way, the
    kept ids ascending int64): nodes renumbered in order, node_splits counting kept nodes."""
    if isinstance(hops, bool) or not isinstance(hops, int | np.integer) or hops < 0:
        raise PipelineError(f"hops must be an integer >= 0, got {hops!r}")
    n = graph.num_nodes
    edges = graph.edge_index.reshape(-1, 2)
    keep = hop_distances(n, edges, graph.node_config_ids, int(hops)) <= hops
    consumer, producer = edges[:, 0], edges[:, 1]
    kept_ids = np.flatnonzero(keep).astype(np.int64)
    new_id = np.full(n, -1, dtype=np.int64)
    new_id[kept_ids] = np.arange(kept_ids.size)
    edge_kept = keep[consumer] & keep[producer]
    pruned = dataclasses.replace(
        graph,
        node_feat=graph.node_feat[kept_ids],
        node_opcode=graph.node_opcode[kept_ids],
        edge_index=new_id[graph.edge_index[edge_kept]].astype(np.int32).reshape(-1, 2),
        node_config_ids=new_id[graph.node_config_ids].astype(np.int32),
        node_splits=np.searchsorted(kept_ids, graph.node_splits, side="left").astype(np.int64),
    )
    return pruned, kept_ids
