"""Keras layers for graph cost models, one small module per idea. They read node set `op`
(`op`: opcode, `feats`) and edge set `feed` (consumer -> producer), as both collections build."""

from baselines.core.layers.cheb import ChebConv
from baselines.core.layers.gat import GATv2Block
from baselines.core.layers.op_encoder import OpEncoder
from baselines.core.layers.pointwise import PointwiseDense
from baselines.core.layers.readout import ConfigScoringHead, KernelPooling
from baselines.core.layers.res_gcn import ResGCNConv
from baselines.core.layers.sage import SAGEConv

__all__ = [
    "ChebConv",
    "ConfigScoringHead",
    "GATv2Block",
    "KernelPooling",
    "OpEncoder",
    "PointwiseDense",
    "ResGCNConv",
    "SAGEConv",
]
