"""Which tile configs a kernel lists: the default tile first, then distinct plausible ones.

Two samplers: `sample_configs` (the toy and benchmark sets; powers-of-two-like
tile menu, rejection in Python) and `ReleaseConfigSpace` (release-size sets:
the larger menu of `release_tile_candidates`, vectorized, exact when the space
is small enough to list, and able to say up front how many plausible configs a
kernel has, so a kernel planned with 20,000 configs gets a graph that has them).
"""

from __future__ import annotations

import math

import numpy as np

from synthetic.tiles.cost_model import (
    DEFAULT_HARDWARE,
    CostSpec,
    Hardware,
    _plausible,
    default_tiles,
    release_tile_candidates,
    tile_candidates,
)


def _candidate_menu(spec: CostSpec, candidates) -> list[np.ndarray]:
    """Per output dim, then the K dim (a single 0 without a contraction)."""
    menu = [candidates(d) for d in spec.out_dims]
    if spec.contraction is not None:
        menu.append(candidates(spec.contraction.k))
    else:
        menu.append(np.zeros(1, dtype=np.int64))
    return menu


def _with_duplicate(
    rng: np.random.Generator, table: np.ndarray, count: int, duplicate: bool
) -> np.ndarray:
    """Re-inserts the default (row 0) at a random later position: a re-measured default."""
    if duplicate and count >= 3:
        at = int(rng.integers(1, len(table) + 1))
        table = np.concatenate([table[:at], table[:1], table[at:]])
    return table


def sample_configs(
    rng: np.random.Generator,
    spec: CostSpec,
    count: int,
    duplicate: bool,
    hw: Hardware = DEFAULT_HARDWARE,
) -> tuple[np.ndarray, np.ndarray]:
    """Tile configs: the default first, then distinct random ones (maybe the default again).

    Random configs that `_plausible` rejects are skipped, like an autotuner that
    never tries absurdly small tiles.
    """
    default, default_k = default_tiles(spec)
    candidates = _candidate_menu(spec, tile_candidates)
    seen = {default + (default_k,)}
    rows = [default + (default_k,)]
    wanted = count - (1 if duplicate and count >= 3 else 0)
    for _ in range(8):
        missing = wanted - len(rows)
        if missing <= 0:
            break
        draws = 2 * missing + 8
        block = np.stack([c[rng.integers(len(c), size=draws)] for c in candidates], axis=1)
        for row in map(tuple, block[_plausible(spec, block, hw)].tolist()):
            if row not in seen:
                seen.add(row)
                rows.append(row)
                if len(rows) == wanted:
                    break
    table = _with_duplicate(rng, np.array(rows, dtype=np.int64), count, duplicate)
    return table[:, :-1], table[:, -1]


class ReleaseConfigSpace:
    """The plausible configs of one kernel under the release tile menu.

    Rows are coded by their menu indices (mixed radix), so distinctness checks
    are integer operations. Spaces of at most `LIST_LIMIT` rows are listed in
    full (exact capacity, sampling without replacement); larger ones are
    sampled in rounds, and their capacity estimated from a first sample.
    """

    LIST_LIMIT = 1 << 17
    ESTIMATE_DRAWS = 4096
    MAX_ROUNDS = 40

    def __init__(self, spec: CostSpec, hw: Hardware = DEFAULT_HARDWARE):
        self.spec = spec
        self.hw = hw
        self.menu = _candidate_menu(spec, release_tile_candidates)
        self.radix = np.array([len(m) for m in self.menu], dtype=np.int64)
        self.size = math.prod(int(r) for r in self.radix)
        default, default_k = default_tiles(spec)
        self.default = np.array(default + (default_k,), dtype=np.int64)
        self.listed: np.ndarray | None = None
        if self.size <= self.LIST_LIMIT:
            grids = np.meshgrid(*[np.arange(r) for r in self.radix], indexing="ij")
            index = np.stack([g.ravel() for g in grids], axis=1)
            rows = self._rows(index)
            keep = _plausible(spec, rows, hw) & ~np.all(rows == self.default, axis=1)
            self.listed = rows[keep]

    def _rows(self, index: np.ndarray) -> np.ndarray:
        return np.stack([m[index[:, j]] for j, m in enumerate(self.menu)], axis=1)

    def _codes(self, index: np.ndarray) -> np.ndarray:
        codes = np.zeros(index.shape[0], dtype=np.int64)
        for j, r in enumerate(self.radix):
            codes = codes * r + index[:, j]
        return codes

    def capacity(self, rng: np.random.Generator) -> float:
        """Plausible configs besides the default (estimated for spaces too large to list)."""
        if self.listed is not None:
            return float(len(self.listed))
        index = np.stack([rng.integers(r, size=self.ESTIMATE_DRAWS) for r in self.radix], axis=1)
        return float(_plausible(self.spec, self._rows(index), self.hw).mean() * self.size)

    def sample(
        self, rng: np.random.Generator, count: int, duplicate: bool
    ) -> tuple[np.ndarray, np.ndarray]:
        """The default, then up to `count` - 1 distinct plausible configs (as many as exist)."""
        wanted = count - 1 - (1 if duplicate and count >= 3 else 0)
        if self.listed is not None:
            take = min(wanted, len(self.listed))
            picked = self.listed[rng.choice(len(self.listed), size=take, replace=False)]
        else:
            picked = self._draw(rng, wanted)
        table = np.concatenate([self.default[None, :], picked.reshape(-1, len(self.radix))])
        table = _with_duplicate(rng, table, count, duplicate)
        return table[:, :-1], table[:, -1]

    def _draw(self, rng: np.random.Generator, wanted: int) -> np.ndarray:
        taken_codes = np.zeros(0, dtype=np.int64)
        taken_rows = [np.zeros((0, len(self.radix)), dtype=np.int64)]
        for _ in range(self.MAX_ROUNDS):
            missing = wanted - len(taken_codes)
            if missing <= 0:
                break
            draws = max(self.ESTIMATE_DRAWS, 3 * missing)
            index = np.stack([rng.integers(r, size=draws) for r in self.radix], axis=1)
            rows = self._rows(index)
            ok = _plausible(self.spec, rows, self.hw) & ~np.all(rows == self.default, axis=1)
            codes = self._codes(index[ok])
            rows = rows[ok]
            _, first = np.unique(codes, return_index=True)
            first.sort()  # first occurrences, in draw order
            fresh = first[~np.isin(codes[first], taken_codes)][:missing]
            if fresh.size == 0:
                break
            taken_codes = np.concatenate([taken_codes, codes[fresh]])
            taken_rows.append(rows[fresh])
        return np.concatenate(taken_rows)[:wanted]
