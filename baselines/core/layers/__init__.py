"""Keras layers for graph cost models, one small module per idea.

Layers read a GraphTensor with node set `op` (`op`: opcode, `feats`: node
features) and edge set `feed` (op -> op: the consumer to the op it reads),
which the tile and the layout graphs share.
"""

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
