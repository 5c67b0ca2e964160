"""A graph's layout configurations as per-node codebooks: each configurable node's distinct
18-value rows once and a code per (configuration, node) (two per byte: `pack_codes`)."""

from __future__ import annotations

import dataclasses

import numpy as np

from baselines.core.array_cache import release_mapped_pages

WIDTH = 18  # layout values per configurable node
# A row is one 54-bit key, sum over k of (v_k + 1) << 3k (v in -1..5).
_SHIFTS = np.arange(WIDTH, dtype=np.uint64) * np.uint64(3)


def _pack_bytes(lanes: np.ndarray) -> np.ndarray:
    """uint64 lanes of 8 bytes, each < 8, to their 24-bit key: byte i lands at bit 3i."""
    x = lanes
    x = (x | (x >> np.uint64(5))) & np.uint64(0x003F003F003F003F)
    x = (x | (x >> np.uint64(10))) & np.uint64(0x00000FFF00000FFF)
    return (x | (x >> np.uint64(20))) & np.uint64(0x0000000000FFFFFF)


def row_keys(values: np.ndarray) -> np.ndarray:
    """uint64 [...]: one key per 18-value row of `values` (-1..5); equal keys, equal rows."""
    values = np.asarray(values)
    rows = values.reshape(-1, WIDTH)
    padded = np.zeros((rows.shape[0], 24), dtype=np.uint8)  # three lanes of 8 bytes
    padded[:, :WIDTH] = rows.astype(np.int8) + np.int8(1)
    lanes = _pack_bytes(padded.view("<u8"))
    keys = lanes[:, 0] | (lanes[:, 1] << np.uint64(24)) | (lanes[:, 2] << np.uint64(48))
    return keys.reshape(values.shape[:-1])


def key_rows(keys: np.ndarray) -> np.ndarray:
    """int8 [..., 18]: the rows of `row_keys`."""
    fields = (np.asarray(keys, dtype=np.uint64)[..., None] >> _SHIFTS) & np.uint64(7)
    return (fields.astype(np.int16) - 1).astype(np.int8)


def code_dtype(most_rows: int) -> np.dtype:
    """The narrowest unsigned dtype that holds codes 0..most_rows-1."""
    for dtype in (np.uint8, np.uint16, np.uint32):
        if most_rows <= np.iinfo(dtype).max + 1:
            return np.dtype(dtype)
    raise ValueError(f"{most_rows} distinct layout rows on one node")


NIBBLE_ROWS = 16  # rows a node may have for its codes to be packed two per byte


def pack_codes(codes: np.ndarray) -> np.ndarray:
    """uint8 (s, ceil(nc / 2)): codes < 16 two per byte, node 2j low, node 2j + 1 high."""
    codes = np.asarray(codes, dtype=np.uint8)
    if codes.shape[1] % 2:
        codes = np.concatenate([codes, np.zeros((codes.shape[0], 1), np.uint8)], axis=1)
    return codes[:, 0::2] | (codes[:, 1::2] << np.uint8(4))


def unpack_codes(packed: np.ndarray, num_nodes: int) -> np.ndarray:
    """uint8 (s, num_nodes): the codes of `pack_codes`."""
    packed = np.asarray(packed, dtype=np.uint8)
    codes = np.empty((packed.shape[0], 2 * packed.shape[1]), np.uint8)
    codes[:, 0::2] = packed & np.uint8(15)
    codes[:, 1::2] = packed >> np.uint8(4)
    return codes[:, :num_nodes]


@dataclasses.dataclass(frozen=True, eq=False)
class Codebook:
    """Configurations of `nc` configurable nodes as codes into per-node rows.

    codes     unsigned (s, nc)  stored configuration i at node j is rows[offsets[j] + codes[i, j]]
                                (packed: uint8 (s, ceil(nc / 2)), two codes per byte)
    rows      int8     (R, 18)  every node's distinct rows, node after node, in code order
    offsets   int64    (nc + 1,)
    selected  int64    (c,)     configuration i is stored configuration selected[i];
                                None: every stored one in order (c == s)
    """

    codes: np.ndarray
    rows: np.ndarray
    offsets: np.ndarray
    selected: np.ndarray | None = None
    packed: bool = False

    @property
    def num_configs(self) -> int:
        return int((self.codes if self.selected is None else self.selected).shape[0])

    @property
    def num_nodes(self) -> int:
        return int(self.offsets.shape[0] - 1)

    @property
    def shape(self) -> tuple[int, int, int]:
        """The shape of the configurations it stands for: (c, nc, 18)."""
        return (self.num_configs, self.num_nodes, WIDTH)

    @property
    def row_counts(self) -> np.ndarray:
        """int64 (nc,): how many distinct rows each node has."""
        return np.diff(self.offsets)

    def codes_of(self, configs: np.ndarray | None = None) -> np.ndarray:
        """(len(configs), nc): the codes of configurations `configs` (None: all), read now."""
        if configs is None:
            configs = np.arange(self.num_configs)
        codes = read_rows(self.codes, self.selected, configs)
        return unpack_codes(codes, self.num_nodes) if self.packed else codes

    def values(self, configs: np.ndarray | None = None) -> np.ndarray:
        """int8 (len(configs), nc, 18): the rows of configurations `configs` (None: all)."""
        return self.rows[self.offsets[:-1] + self.codes_of(configs).astype(np.int64)]

    def select(self, configs: np.ndarray) -> Codebook:
        """The codebook of configurations `configs` only, in that order (lazy)."""
        configs = np.array(configs, dtype=np.int64).reshape(-1)  # a copy: the caller's may change
        selected = configs if self.selected is None else self.selected[configs]
        return dataclasses.replace(self, selected=selected)

    @classmethod
    def from_values(cls, values: np.ndarray) -> Codebook:
        """The codebook of int8 (c, nc, 18) configurations."""
        values = np.asarray(values)
        builder = CodebookBuilder(values.shape[1])
        builder.add(values)
        return builder.finish()


def read_rows(array: np.ndarray, selected: np.ndarray | None, slots: np.ndarray) -> np.ndarray:
    """`array[selected[slots]]` (`selected` None: `array[slots]`), reading only those rows, in
    sorted order (a contiguous run as one slice), their memory-mapped pages then released."""
    slots = np.asarray(slots, dtype=np.int64).reshape(-1)
    rows = slots if selected is None else np.asarray(selected)[slots]
    if rows.size and 0 <= rows[0] and rows[-1] < array.shape[0] and np.all(np.diff(rows) == 1):
        span = array[rows[0] : rows[-1] + 1]
        block = np.array(span)
        release_mapped_pages(span)
        return block
    unique, inverse = np.unique(rows, return_inverse=True)
    block = np.asarray(array[unique])
    if unique.size:
        release_mapped_pages(array[unique[0] : unique[-1] + 1])
    return block if unique.size == rows.size and np.array_equal(unique, rows) else block[inverse]


class CodebookBuilder:
    """Builds a `Codebook` from blocks of configurations as a file is read; codes never change."""

    def __init__(self, num_nodes: int):
        self.keys: list[dict[int, int]] = [{} for _ in range(num_nodes)]
        self.blocks: list[np.ndarray] = []

    def add(self, values: np.ndarray) -> None:
        """Adds configurations int8 (b, nc, 18), values -1..5."""
        keys = np.ascontiguousarray(row_keys(values).T)  # (nc, b): a node's keys contiguous
        codes = np.empty(keys.shape, dtype=np.uint32)
        for node, column in enumerate(keys):
            # Few distinct rows per node: looking up its sorted column beats sorting all pairs.
            distinct = np.unique(column)
            known = self.keys[node]
            lookup = [known.setdefault(k, len(known)) for k in distinct.tolist()]
            codes[node] = np.asarray(lookup, dtype=np.uint32)[np.searchsorted(distinct, column)]
        self.blocks.append(codes.T)

    def finish(self) -> Codebook:
        nc = len(self.keys)
        counts = np.array([len(known) for known in self.keys], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        ordered = [np.fromiter(known, np.uint64, len(known)) for known in self.keys]
        keys = np.concatenate(ordered) if ordered else np.zeros(0, np.uint64)
        codes = np.concatenate(self.blocks) if self.blocks else np.zeros((0, nc), np.uint32)
        dtype = code_dtype(int(counts.max(initial=1)))
        return Codebook(codes.astype(dtype), key_rows(keys).reshape(-1, WIDTH), offsets)
