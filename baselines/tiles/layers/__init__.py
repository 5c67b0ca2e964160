"""The layers tile models use: the shared ones (`baselines.core.layers`) and their own."""

from baselines.core.layers import (
    ChebConv,
    ConfigScoringHead,
    GATv2Block,
    KernelPooling,
    OpEncoder,
    PointwiseDense,
    ResGCNConv,
    SAGEConv,
)
from baselines.tiles.layers.config_encoder import PerDimConfigEncoder

__all__ = [
    "ChebConv",
    "ConfigScoringHead",
    "GATv2Block",
    "KernelPooling",
    "OpEncoder",
    "PerDimConfigEncoder",
    "PointwiseDense",
    "ResGCNConv",
    "SAGEConv",
]
