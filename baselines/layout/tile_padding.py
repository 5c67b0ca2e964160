"""How much a layout pads its tensors to the TPU's vector tiles, per configuration and tensor."""

from __future__ import annotations

import tensorflow as tf

from baselines.layout.graph import NODE_CONFIG_FEAT_DIM

LANES = 128
SUBLANE_TILES = (8, 16, 32)  # 4-, 2- and 1-byte elements
GROUP_WIDTH = 6  # layout values per tensor (output, operand 0, operand 1)
NUM_GROUPS = NODE_CONFIG_FEAT_DIM // GROUP_WIDTH
FEATURES_PER_GROUP = 2 + len(SUBLANE_TILES)
TILE_PADDING_DIM = NUM_GROUPS * FEATURES_PER_GROUP


def resolved_group(values: tf.Tensor, ref: tf.Tensor, group: int) -> tf.Tensor:
    """[NC, K, 6]: group `group`'s layout (int32 values [NC, K, 18], ref [NC, 1, 18]): given dims
    kept, the reference's others following in its order (all -1: the reference):
        given (4, 0, -1, -1, -1, -1), reference (4, 3, 2, 1, 0, -1) -> (4, 0, 3, 2, 1, -1)
    """
    start = group * GROUP_WIDTH
    chosen = values[..., start : start + GROUP_WIDTH]
    reference = tf.broadcast_to(ref[..., start : start + GROUP_WIDTH], tf.shape(chosen))
    given = chosen >= 0
    count = tf.reduce_sum(tf.cast(given, tf.int32), axis=-1, keepdims=True)
    taken = tf.reduce_any(
        tf.equal(reference[..., :, None], chosen[..., None, :]) & given[..., None, :], axis=-1
    )
    rest = (reference >= 0) & ~taken  # reference dims the group leaves to the compiler
    target = tf.cumsum(tf.cast(rest, tf.int32), axis=-1, exclusive=True) + count
    lands = rest[..., :, None] & tf.equal(target[..., :, None], tf.range(GROUP_WIDTH))
    filled = tf.reduce_sum(tf.where(lands, reference[..., :, None], 0), axis=-2)
    return tf.where(given, chosen, tf.where(tf.reduce_any(lands, axis=-2), filled, -1))


def shape_dims(cfg_dims: tf.Tensor) -> tf.Tensor:
    """[NC, 18] float32 dimension sizes back from their log1p (0 past a tensor's rank)."""
    # Rounded: exact below 2**16; above, off by ~size * 2**-20 (log ratios change < 1e-4).
    return tf.math.round(tf.math.expm1(tf.cast(cfg_dims, tf.float32)))


def log_elements(group_dims: tf.Tensor) -> tf.Tensor:
    """[NC]: log of a tensor's element count from its [NC, 6] sizes (0 past the rank)."""
    return tf.reduce_sum(tf.math.log(tf.maximum(group_dims, 1.0)), axis=-1)


def _log_pad_ratio(size: tf.Tensor, present: tf.Tensor, tile: int) -> tf.Tensor:
    """log(ceil(size / tile) * tile / size) where `present`, else 0 (size >= 1)."""
    padded = tf.math.ceil(size / tile) * tile
    return tf.where(present, tf.math.log(padded / size), 0.0)


def tile_padding(values: tf.Tensor, cfg_ref: tf.Tensor, cfg_dims: tf.Tensor) -> tf.Tensor:
    """[NC, K, TILE_PADDING_DIM] float32 padding features of values [NC, K, 18] and
    `batching`'s cfg_ref, cfg_dims [NC, 18]. For each tensor (output, operand 0, operand 1:
    groups resolved by `resolved_group`): the log padded/stored ratio of the lanes (most-minor
    dim to a multiple of 128) and of the sublanes (second-minor dim to multiples of 8, 16, 32),
    and the log element count / 10. A missing tensor or dim gives 0."""
    values = tf.cast(values, tf.int32)
    ref = tf.cast(cfg_ref, tf.int32)[:, None, :]  # [NC, 1, 18]
    dims = shape_dims(cfg_dims)  # [NC, 18]
    feats = []
    for group in range(NUM_GROUPS):
        minor = resolved_group(values, ref, group)[..., :2]  # most-minor, second-minor
        present = minor >= 0
        group_dims = dims[:, group * GROUP_WIDTH : (group + 1) * GROUP_WIDTH]  # [NC, 6]
        size = tf.gather(group_dims, tf.maximum(minor, 0), batch_dims=1)  # [NC, K, 2]
        size = tf.maximum(size, 1.0)
        feats.append(_log_pad_ratio(size[..., 0], present[..., 0], LANES))
        for tile in SUBLANE_TILES:
            feats.append(_log_pad_ratio(size[..., 1], present[..., 1], tile))
        elements = log_elements(group_dims)
        feats.append(tf.broadcast_to(elements[:, None] / 10.0, tf.shape(size[..., 0])))
    return tf.stack(feats, axis=-1)
