"""Feature normalization fitted on the train split, saved with every model: per column
`sign(x) * log1p(|x|)`, then the train mean and std, then derived columns (the analytic
estimates and, when a model asks, the architecture columns)."""

from __future__ import annotations

import dataclasses

import numpy as np

from baselines.core.errors import PipelineError
from baselines.tiles.analytic import NUM_ESTIMATES
from baselines.tiles.architecture import NUM_ARCHITECTURE, config_inputs
from baselines.tiles.data import CONFIG_FEAT_DIM, NODE_FEAT_DIM, TileSplit

_MIN_STD = 1e-6
# Rows per chunk when fitting and normalizing (whole-array float64 temporaries take gigabytes).
CHUNK_ROWS = 1 << 18

NUM_DIMS = 6
# Node columns of dimension d: output shape dim (21 + d) and layout entry (134 + d).
SHAPE_COLUMN = 21
LAYOUT_COLUMN = 134
# Normalized node features: the 140 file columns, then layout_positions.
LAYOUT_POSITION_COLUMN = NODE_FEAT_DIM
NORMALIZED_NODE_DIM = NODE_FEAT_DIM + NUM_DIMS
# Normalized config features: the 24 file columns, then the analytic estimates, then (only
# in splits normalized with `architecture`) the architecture inputs.
ANALYTIC_COLUMN = CONFIG_FEAT_DIM
NORMALIZED_CONFIG_DIM = CONFIG_FEAT_DIM + NUM_ESTIMATES
ARCHITECTURE_COLUMN = NORMALIZED_CONFIG_DIM
ARCHITECTURE_CONFIG_DIM = NORMALIZED_CONFIG_DIM + NUM_ARCHITECTURE


def layout_positions(node_feat: np.ndarray) -> np.ndarray:
    """[n, 6] float32 of raw node features: position of dim d in the op's layout (0: most minor),
    -1 past the rank or unnamed: minor_to_major [1, 0, 3, 2] of rank 4 -> [1, 0, 3, 2, -1, -1]."""
    shape = node_feat[:, SHAPE_COLUMN : SHAPE_COLUMN + NUM_DIMS] > 0
    rank = np.where(shape.any(axis=1), NUM_DIMS - np.argmax(shape[:, ::-1], axis=1), 0)
    minor_to_major = node_feat[:, LAYOUT_COLUMN : LAYOUT_COLUMN + NUM_DIMS].astype(np.int64)
    positions = np.full((node_feat.shape[0], NUM_DIMS), -1.0, np.float32)
    for i in range(NUM_DIMS):
        dim = minor_to_major[:, i]
        named = (i < rank) & (dim >= 0) & (dim < rank)
        positions[np.flatnonzero(named), dim[named]] = i
    return positions


def signed_log(x: np.ndarray) -> np.ndarray:
    return (np.sign(x) * np.log1p(np.abs(x))).astype(np.float32)


def _chunks(rows: int, chunk_rows: int):
    return (slice(i, min(i + chunk_rows, rows)) for i in range(0, rows, chunk_rows))


def column_moments(
    x: np.ndarray, width: int, chunk_rows: int = CHUNK_ROWS
) -> tuple[np.ndarray, np.ndarray]:
    """Column mean and std of signed_log(x), two passes over row chunks in float64."""
    rows = x.shape[0]
    if rows == 0:
        return np.zeros(width, np.float32), np.ones(width, np.float32)
    # float64 accumulation: millions of rows in float32 lose digits.
    total = np.zeros(x.shape[1:], np.float64)
    for rows_slice in _chunks(rows, chunk_rows):
        total += signed_log(x[rows_slice]).sum(axis=0, dtype=np.float64)
    mean = total / rows
    squares = np.zeros_like(mean)
    for rows_slice in _chunks(rows, chunk_rows):
        squares += np.square(signed_log(x[rows_slice]) - mean).sum(axis=0)
    std = np.sqrt(squares / rows)
    std = np.where(std < _MIN_STD, 1.0, std)
    return mean.astype(np.float32), std.astype(np.float32)


def _standardize(
    x: np.ndarray, mean: np.ndarray, std: np.ndarray, chunk_rows: int, out: np.ndarray | None = None
) -> np.ndarray:
    """(signed_log(x) - mean) / std as float32, chunk by chunk into one output array."""
    out = np.empty(x.shape, np.float32) if out is None else out
    for rows_slice in _chunks(x.shape[0], chunk_rows):
        part = signed_log(x[rows_slice])
        part -= mean
        part /= std
        out[rows_slice] = part
    return out


def uses_estimates(model_kwargs: dict) -> bool:
    return bool(model_kwargs.get("analytic_inputs", False))


def uses_architecture(model_kwargs: dict) -> bool:
    """Whether a model built with these kwargs reads the architecture inputs."""
    return bool(model_kwargs.get("architecture_inputs", False))


def _check_raw_width(node_feat: np.ndarray) -> None:
    # Normalized features (wider) normalized again would be a silent mistake: refused.
    if node_feat.ndim != 2 or node_feat.shape[1] != NODE_FEAT_DIM:
        raise PipelineError(
            f"node features of shape {node_feat.shape}: expected the files' "
            f"{NODE_FEAT_DIM} raw columns (are they normalized already?)"
        )


@dataclasses.dataclass(frozen=True)
class FeatureStats:
    """Per-column mean and std of signed-log node and config features."""

    node_mean: np.ndarray
    node_std: np.ndarray
    config_mean: np.ndarray
    config_std: np.ndarray

    @classmethod
    def fit(cls, node_feat: np.ndarray, config_feat: np.ndarray) -> FeatureStats:
        _check_raw_width(node_feat)
        node_mean, node_std = column_moments(node_feat, NODE_FEAT_DIM)
        config_mean, config_std = column_moments(config_feat, CONFIG_FEAT_DIM)
        return cls(node_mean, node_std, config_mean, config_std)

    @classmethod
    def fit_split(cls, split: TileSplit) -> FeatureStats:
        return cls.fit(split.node_feat, split.config_feat)

    def normalize_nodes(self, node_feat: np.ndarray, chunk_rows: int = CHUNK_ROWS) -> np.ndarray:
        """[n, NORMALIZED_NODE_DIM]: the standardized 140 columns, then layout_positions."""
        _check_raw_width(node_feat)
        out = np.empty((node_feat.shape[0], NORMALIZED_NODE_DIM), np.float32)
        _standardize(
            node_feat, self.node_mean, self.node_std, chunk_rows, out=out[:, :NODE_FEAT_DIM]
        )
        for rows_slice in _chunks(node_feat.shape[0], chunk_rows):
            out[rows_slice, LAYOUT_POSITION_COLUMN:] = layout_positions(node_feat[rows_slice])
        return out

    def normalize_configs(
        self, config_feat: np.ndarray, chunk_rows: int = CHUNK_ROWS
    ) -> np.ndarray:
        return _standardize(config_feat, self.config_mean, self.config_std, chunk_rows)

    def normalize_split(
        self, split: TileSplit, estimates: bool = True, architecture: bool = False
    ) -> TileSplit:
        """A copy of the split with normalized float32 features and derived columns: the
        analytic ones zeros unless `estimates`, the architecture ones only with `architecture`."""
        _check_raw_width(split.node_feat)
        width = ARCHITECTURE_CONFIG_DIM if architecture else NORMALIZED_CONFIG_DIM
        configs = np.zeros((split.config_feat.shape[0], width), np.float32)
        configs[:, :CONFIG_FEAT_DIM] = self.normalize_configs(split.config_feat)
        analytic, arch = config_inputs(split, estimates, architecture)
        if analytic is not None:
            configs[:, ANALYTIC_COLUMN:NORMALIZED_CONFIG_DIM] = analytic
        if arch is not None:
            configs[:, ARCHITECTURE_COLUMN:] = arch
        return split.replace(node_feat=self.normalize_nodes(split.node_feat), config_feat=configs)

    def to_dict(self) -> dict[str, list[float]]:
        return {f.name: getattr(self, f.name).tolist() for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, d: dict) -> FeatureStats:
        widths = dict.fromkeys(("node_mean", "node_std"), NODE_FEAT_DIM)
        widths.update(dict.fromkeys(("config_mean", "config_std"), CONFIG_FEAT_DIM))
        arrays = {}
        for key, width in widths.items():
            value = np.asarray(d.get(key, []), dtype=np.float32)
            if value.shape != (width,) or not np.all(np.isfinite(value)):
                raise PipelineError(
                    f"feature statistics: '{key}' must be {width} finite numbers; "
                    "the run file is damaged, retrain the model"
                )
            arrays[key] = value
        return cls(**arrays)
