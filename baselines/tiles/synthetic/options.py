"""Size knobs of a synthetic set."""

from __future__ import annotations

import dataclasses

from baselines.tiles.synthetic.cost_model import DEFAULT_HARDWARE, Hardware


@dataclasses.dataclass(frozen=True)
class GeneratorOptions:
    """Size knobs of a synthetic set (the toy set uses the defaults)."""

    min_configs: int = 5
    max_configs: int = 200
    max_nodes: int = 40
    # Cost-model constants the runtimes are computed with.
    hardware: Hardware = DEFAULT_HARDWARE
    # The real test split hides its runtimes; benchmarks need them to score.
    test_labels: bool = False

    def __post_init__(self) -> None:
        if self.min_configs < 1 or self.max_configs < self.min_configs:
            raise ValueError(
                f"need 1 <= min_configs <= max_configs, got {self.min_configs}, {self.max_configs}"
            )
        if self.max_nodes < 2:
            raise ValueError(f"max_nodes must be at least 2, got {self.max_nodes}")
