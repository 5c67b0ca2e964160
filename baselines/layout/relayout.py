"""Which tensors a layout configuration makes the compiler copy into another layout."""

from __future__ import annotations

import tensorflow as tf

from baselines.layout.tile_padding import GROUP_WIDTH, log_elements, resolved_group, shape_dims

RELAYOUT_DIM = 6


def relayout_copies(
    values: tf.Tensor, cfg_ref: tf.Tensor, cfg_operand: tf.Tensor, cfg_dims: tf.Tensor
) -> tf.Tensor:
    """[NC, K, RELAYOUT_DIM] float32 copy indicators per configurable node w and configuration,
    groups resolved: for operands 0 and 1, 1 where w reads the operand in another layout than it
    is produced in (`cfg_operand`'s output group, else its file layout); for the output, 1 where
    it differs from the file layout; then the same three times the log element count / 10."""
    values = tf.cast(values, tf.int32)
    ref = tf.cast(cfg_ref, tf.int32)[:, None, :]  # [NC, 1, 18]
    output = resolved_group(values, ref, 0)  # [NC, K, 6]
    dims = shape_dims(cfg_dims)
    flags, weights = [], []
    for operand in (0, 1):
        group = 1 + operand
        start = group * GROUP_WIDTH
        read = resolved_group(values, ref, group)
        producer_id = cfg_operand[:, operand]  # [NC]
        configurable = producer_id >= 0
        produced = tf.where(
            configurable[:, None, None],
            tf.gather(output, tf.maximum(producer_id, 0)),
            ref[..., start : start + GROUP_WIDTH],
        )
        present = ref[..., start] >= 0  # [NC, 1]: the node has this operand
        differs = tf.reduce_any(tf.not_equal(read, produced), axis=-1)  # [NC, K]
        flags.append(tf.cast(differs & present, tf.float32))
        weights.append(dims[:, start : start + GROUP_WIDTH])
    moved = tf.reduce_any(tf.not_equal(output, ref[..., :GROUP_WIDTH]), axis=-1)
    flags.append(tf.cast(moved, tf.float32))
    weights.append(dims[:, :GROUP_WIDTH])
    weighted = [flag * log_elements(sizes)[:, None] / 10.0 for flag, sizes in zip(flags, weights)]
    return tf.stack(flags + weighted, axis=-1)
