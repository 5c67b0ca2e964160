"""The base of every cost model: scores [graphs, configurations], lower = predicted faster."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from baselines.core.model_lookup import check_int, constructor_kwargs


class CostModel(tf.keras.Model):
    """Registers subclasses with Keras; `get_config` is every constructor kwarg."""

    # Keras' registry names: "<keras_package>><class name>" (kept in saved models).
    keras_package = "tpugraphs"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        tf.keras.utils.register_keras_serializable(package=cls.keras_package)(cls)

    def __init__(self, num_configs: int | None, num_ops: int):
        super().__init__(name=type(self).__name__.lower())
        check_int("num_ops", num_ops, 1)
        self.num_configs = num_configs
        self.num_ops = num_ops

    def get_config(self) -> dict[str, Any]:
        """Every kwarg's value (defaults resolved): what rebuilds the model as it was."""
        if not getattr(self, "_auto_get_config", False):
            raise ValueError(
                f"{type(self).__name__} was constructed with arguments other than numbers, "
                "strings, booleans or None, so it cannot be saved and rebuilt"
            )
        config = constructor_kwargs(type(self), CostModel)
        config.update(num_configs=self.num_configs, num_ops=self.num_ops)
        config.update(self._auto_config.config)  # what Keras recorded of the call
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> CostModel:
        return cls(**config)
