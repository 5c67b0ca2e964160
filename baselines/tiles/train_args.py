"""The immutable record of one training run; its hash names the run's files.

    args = TrainArgs(model="LateJoinGAT", toy_data=True)
    args.run_hash()        # md5 of the sorted JSON of every field
    args.validate()        # PipelineError on a bad model, loss spec, kwargs, test mode

Defaults are the public baseline's (SPEC §4); `seed`, `optimizer`,
`weight_decay`, `lr_schedule`, `warmup_epochs` and `sampling` are new, and at
their defaults they train exactly as the baseline does; `eval_every` is
upstream's (validate every N epochs and after the last one).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import shutil
import tempfile
from pathlib import Path
from typing import Any

from baselines.tiles.errors import PipelineError
from baselines.tiles.model_kwargs import resolve_model_kwargs

TEST_MODES = ("predictions", "metrics")
OPTIMIZERS = ("adam", "adamw")
LR_SCHEDULES = ("constant", "cosine")
SAMPLINGS = ("uniform", "balanced", "sqrt_configs")
# Where echo_download_commands.py puts tile:xla; every entry script's default.
DEFAULT_DATA_ROOT = "~/data/tpugraphs/npz/tile/xla"


@dataclasses.dataclass(frozen=True)
class TrainArgs:
    model: str = "EarlyJoinSAGE"
    epochs: int = 100
    early_stop: int = 20
    configs: int = 10
    batch: int = 10
    losses: str = "ListMLELoss:1,MSE:0.02"
    lr: float = 1e-3
    clip_norm: float = 1e-3
    model_kwargs_json: str = "{}"
    test_mode: str = "predictions"
    out_dir: str = "~/out/tpugraphs_tiles"
    results_csv: str = ""
    validate_batches: int = -1
    run_id: str = ""
    data_root: str = DEFAULT_DATA_ROOT
    cache_dir: str = "~/data/tpugraphs/cache/tile"
    toy_data: bool = False
    seed: int = 0
    # Beyond the baseline (its behaviour at these defaults):
    optimizer: str = "adam"
    weight_decay: float = 0.0
    lr_schedule: str = "constant"
    warmup_epochs: int = 0
    sampling: str = "uniform"
    eval_every: int = 5  # upstream's flag and default (SPEC §10)

    @classmethod
    def flag_names(cls) -> frozenset[str]:
        """One command-line flag per field, named like it."""
        return frozenset(f.name for f in dataclasses.fields(cls))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainArgs:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def run_hash(self) -> str:
        return hashlib.md5(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()

    def model_kwargs(self) -> dict[str, Any]:
        try:
            kwargs = json.loads(self.model_kwargs_json)
        except json.JSONDecodeError as e:
            raise PipelineError(
                f"--model_kwargs_json: not valid JSON ({e.msg} at char {e.pos}): "
                f"{self.model_kwargs_json!r}; pass an object such as '{{\"hidden_dim\": 128}}'"
            ) from None
        if not isinstance(kwargs, dict):
            raise PipelineError(
                f"--model_kwargs_json: expected a JSON object, got {self.model_kwargs_json!r}"
            )
        return kwargs

    def validation_epochs(self) -> list[int]:
        """1-based epochs after which validation runs: every `eval_every`-th and the last."""
        return sorted({*range(self.eval_every, self.epochs + 1, self.eval_every), self.epochs})

    def validate(self) -> None:
        """Checks everything that can be checked before loading data.

        `check_flags` (no TensorFlow), then builds the model once, so that the
        kwargs' values are checked by its constructor.
        """
        self.check_flags()
        # Imported here so that importing TrainArgs stays free of TensorFlow.
        from baselines.tiles import models

        models.build_model(self.model, self.configs, self.model_kwargs())

    def check_flags(self) -> None:
        """Checks every flag, the model name and its kwarg names, without TensorFlow."""
        parse_losses(self.losses)
        resolve_model_kwargs(self.model, self.model_kwargs())
        if self.test_mode not in TEST_MODES:
            raise PipelineError(f"--test_mode: '{self.test_mode}' is not one of {TEST_MODES}")
        if self.configs == 1:
            # One configuration per kernel has no pair to order: the ranking
            # losses are constant and validation OPA is 0.
            raise PipelineError(
                "--configs: 1 gives no ranking signal (configurations are ranked against "
                "each other within a kernel); use at least 2"
            )
        for flag in ("epochs", "configs", "batch", "eval_every"):
            if getattr(self, flag) < 1:
                raise PipelineError(f"--{flag}: must be at least 1, got {getattr(self, flag)}")
        for flag, allowed in (
            ("optimizer", OPTIMIZERS),
            ("lr_schedule", LR_SCHEDULES),
            ("sampling", SAMPLINGS),
        ):
            if getattr(self, flag) not in allowed:
                raise PipelineError(
                    f"--{flag}: '{getattr(self, flag)}' is not one of {', '.join(allowed)}"
                )
        if self.weight_decay < 0 or (self.weight_decay > 0 and self.optimizer != "adamw"):
            raise PipelineError(
                f"--weight_decay: {self.weight_decay} needs --optimizer=adamw and a value >= 0"
            )
        if self.warmup_epochs < 0 or (self.warmup_epochs and self.lr_schedule != "cosine"):
            raise PipelineError(
                f"--warmup_epochs: {self.warmup_epochs} needs --lr_schedule=cosine and a value >= 0"
            )
        if self.early_stop < 1:
            raise PipelineError(f"--early_stop: must be at least 1, got {self.early_stop}")
        if not self.lr > 0 or not self.clip_norm > 0:
            raise PipelineError("--lr and --clip_norm must be positive")
        check_writable_dir(Path(self.out_dir).expanduser(), "--out_dir")
        if self.results_csv and self.test_mode == "predictions":
            # Checked now, not after hours of training.
            check_writable_dir(Path(self.results_csv).expanduser().parent, "--results_csv")


# Probes of a folder that a concurrent probe may remove before the write.
PROBE_ATTEMPTS = 5


def check_writable_dir(path: Path, flag: str) -> None:
    """Proves a file can be written in `path`, leaving the filesystem as it was.

    A real attempt, because `os.access` says yes to root even where the
    filesystem refuses (read-only mounts, /proc). Folders made for the probe are
    removed again, so a run that fails later leaves nothing behind.
    """
    created = path
    while not created.parent.exists():
        created = created.parent
    made = not created.exists()
    try:
        for attempt in range(PROBE_ATTEMPTS):
            path.mkdir(parents=True, exist_ok=True)
            try:
                with tempfile.TemporaryFile(dir=path):
                    pass
                break
            except FileNotFoundError:
                # Another process probing the same new folder (the workers of
                # a multi-worker run) removed it between our mkdir and write.
                if attempt == PROBE_ATTEMPTS - 1:
                    raise
    except OSError as e:
        raise PipelineError(
            f"{flag}: {path} is not writable ({e.strerror or e}); choose another folder"
        ) from None
    finally:
        if made:
            shutil.rmtree(created, ignore_errors=True)


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
