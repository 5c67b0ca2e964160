"""The `--losses` flag: weighted ranking losses as "Name:weight,...". No TensorFlow."""

from __future__ import annotations

import math

from baselines.core.errors import PipelineError

# Names of --losses' terms (metrics.py builds them with TensorFlow and TF-Ranking).
LOSS_NAMES = ("ListMLELoss", "PListMLELoss", "PairwiseHingeLoss", "MSE")


def parse_losses(spec: str) -> tuple[tuple[str, float], ...]:
    """Parses "Name:weight,Name:weight"; raises PipelineError on anything else."""
    parsed = []
    for part in spec.split(","):
        name, sep, weight = part.strip().partition(":")
        try:
            value = float(weight)
        except ValueError:
            value = float("nan")
        if not sep or name not in LOSS_NAMES or not math.isfinite(value) or value < 0:
            raise PipelineError(
                f"--losses: cannot parse '{part}' in '{spec}'; use Name:weight pairs "
                f"separated by commas, names from {', '.join(LOSS_NAMES)}, "
                "e.g. ListMLELoss:1,MSE:0.02"
            )
        parsed.append((name, value))
    return tuple(parsed)
