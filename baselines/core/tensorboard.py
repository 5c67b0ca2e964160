"""A run's flags on TensorBoard's HParams dashboard (unset ones left out), beside the scalars
that measure it, each (tag, run, title): ("epoch_opa", "validation", "val OPA")."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import tensorflow as tf
from tensorboard.plugins.hparams import api as hparams_api


@dataclasses.dataclass(frozen=True)
class HParams:
    values: dict[str, Any]
    metrics: tuple[tuple[str, str, str], ...]
    trial_id: str

    @classmethod
    def of_flags(
        cls,
        flags: Mapping[str, Any],
        left_out: Iterable[str],
        metrics: Iterable[tuple[str, str, str]],
        trial_id: str,
    ) -> HParams:
        """The flags that say what is trained (not where files go), those unset left out."""
        values = {k: v for k, v in flags.items() if k not in set(left_out) and v is not None}
        return cls(values, tuple(metrics), trial_id)

    def callbacks(self, tb_dir: Path) -> list[tf.keras.callbacks.Callback]:
        """Writes the dashboard's config into `tb_dir`; the callback records the session."""
        with tf.summary.create_file_writer(str(tb_dir)).as_default():
            hparams_api.hparams_config(
                hparams=[hparams_api.HParam(name) for name in self.values],
                metrics=[
                    hparams_api.Metric(tag, group=group, display_name=title)
                    for tag, group, title in self.metrics
                ],
            )
        return [hparams_api.KerasCallback(str(tb_dir), self.values, trial_id=self.trial_id)]
