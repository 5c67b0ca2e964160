"""The layers tile models use: the shared ones (`baselines.core.layers`) and their own.

- `config_encoder`: per-dimension config tokens beside the kernel's matching dims.

The shared layers are importable from here too, as models.py always imported them.
"""

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
