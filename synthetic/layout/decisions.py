"""Layout configurations made of a few shared binary decisions, as the real files' are.

The real layout files do not choose each group's layout freely. In the labelled
samples (xla unet_3d, nlp and xla test files) a configuration group writes only its
two most-minor dims, in one of two orders, and the groups are tied: the 93-2,467
groups that vary fall into 17-55 classes that change together across the
configurations. So a configuration is a vector of 17-55 binary decisions; the random
search draws each decision fairly and independently (minority shares 0.42-0.50), the
default search keeps most decisions near one value (minority shares 0.01-0.45).

This module writes configurations of that shape for a synthetic program:

    feat = decision_configs(rng, program, 1_000, search="default", cost_model="standard")
    feat.shape == (1_000, program.node_config_ids.size, 18)

- Every configurable group lays out a tensor of rank r. A group of rank >= 2 gets a
  dim pair (a, b): a is node_feat's most-minor dim of the tensor, b another dim
  drawn at random. Its two options write (a, b) or (b, a) in its first two entries
  and -1 after them (the compiler orders the remaining dims as node_feat does, which
  is how the cost model reads such a group). A group of rank 1 writes all -1 or (0).
- The groups are split into D decisions, D drawn from [16, 56] (at most one per
  group); beyond one group each, decision k gets groups with weight 1 / k, so a few
  decisions tie many groups (as in the real files: classes of 31, 31, 15, ... groups).
  Each group takes its decision's value, or its opposite (a fixed per-group orientation).
- `random` search: every decision is 0 or 1 with probability 1/2, independently.
- `default` search: each decision has a preferred value and a minority share q drawn
  from [0.01, 0.45]; a row takes the other value with probability q. The search finds
  a decision's faster value in proportion to how much it matters: flipping decision k
  alone from all zeros changes the runtime by e_k, and the preferred value is the
  faster one with probability 1/2 + |e_k| / (2 max |e|). In the two labelled real
  default files the majority value is the faster one for the decisions that explain
  most of the runtime (83% and 99% of the explained variance) and for only 5 and 7
  of the 17 decisions counted one by one.

Nothing here reads the cost model's formula except through `layout_runtime_ns`
(the preferred values), so a method fitted to the decisions' structure is fitted to
what the real files show, not to the generator's constants.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from synthetic.layout.cost_model import GROUP_WIDTH, layout_runtime_ns
from synthetic.layout.generate import _groups
from synthetic.layout.programs import Program

SEARCH_SPACES = ("permutations", "decisions")
# Decisions per file: the real labelled files tie their varying groups into 17-55.
MIN_DECISIONS, MAX_DECISIONS = 16, 56
# Minority share of a default-search decision: the real default files' range.
MIN_MINORITY, MAX_MINORITY = 0.01, 0.45


def decision_groups(program: Program) -> list[tuple[int, int, tuple[int, ...]]]:
    """(configurable slot, group, node_feat layout of its tensor) of every group with a tensor."""
    return [(j, group, layout) for j, group, layout, _ in _groups(program)]


def decision_options(
    rng: np.random.Generator, groups: list[tuple[int, int, tuple[int, ...]]]
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each group's two options as 6-wide rows (option 0, option 1).

    A rank-1 group: (all -1, (0, -1, ...)); a rank-r group: (a, b, -1, ...), (b, a, -1, ...)
    with a = node_feat's most-minor dim and b another dim drawn with `rng`.
    """
    options = []
    for _, _, layout in groups:
        zero = np.full(GROUP_WIDTH, -1, dtype=np.float32)
        one = zero.copy()
        if len(layout) < 2:
            one[0] = 0
        else:
            a = layout[0]
            b = int(rng.choice([d for d in range(len(layout)) if d != a]))
            zero[:2], one[:2] = (a, b), (b, a)
        options.append((zero, one))
    return options


def tie_groups(rng: np.random.Generator, num_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """(decision of each group, orientation of each group (0/1)) for `num_groups` groups.

    D = min(num_groups, a draw from [MIN_DECISIONS, MAX_DECISIONS]) decisions, each used
    by at least one group, the other groups assigned to decision k (0-based) with weight
    1 / (k + 1).
    """
    d = min(num_groups, int(rng.integers(MIN_DECISIONS, MAX_DECISIONS + 1)))
    if d == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    weights = 1.0 / np.arange(1, d + 1)
    decision = np.concatenate(
        [np.arange(d), rng.choice(d, size=num_groups - d, p=weights / weights.sum())]
    )
    decision = decision[rng.permutation(num_groups)]
    return decision.astype(np.int64), rng.integers(2, size=num_groups)


def _write(
    values: np.ndarray,
    groups: list[tuple[int, int, tuple[int, ...]]],
    options: list[tuple[np.ndarray, np.ndarray]],
    decision: np.ndarray,
    orientation: np.ndarray,
    num_configurable: int,
) -> np.ndarray:
    """Configurations (rows of `values`, one 0/1 per decision) as node_config_feat rows."""
    feat = np.full((values.shape[0], num_configurable, 3 * GROUP_WIDTH), -1, dtype=np.float32)
    for g, (j, group, _) in enumerate(groups):
        pick = values[:, decision[g]] ^ orientation[g]
        zero, one = options[g]
        cols = slice(group * GROUP_WIDTH, (group + 1) * GROUP_WIDTH)
        feat[:, j, cols] = np.where(pick[:, None] == 1, one, zero)
    return feat


def flip_effects(
    program: Program, write: Callable[[np.ndarray], np.ndarray], num_decisions: int, cost_model: str
) -> np.ndarray:
    """Runtime change (ns, noise-free) of flipping each decision alone from all zeros."""
    rows = np.zeros((num_decisions + 1, num_decisions), dtype=np.int64)
    rows[np.arange(1, num_decisions + 1), np.arange(num_decisions)] = 1
    ns = layout_runtime_ns(
        program.node_feat,
        program.node_opcode,
        program.edge_index,
        program.node_config_ids,
        write(rows),
        cost_model,
    )
    return ns[1:] - ns[0]


def decision_configs(
    rng: np.random.Generator, program: Program, c: int, search: str, cost_model: str = "standard"
) -> np.ndarray:
    """`c` configurations (float32 (c, configurable nodes, 18)) of `search` in the decision space.

    decision_configs(rng, program, 100, "random").shape == (100, nc, 18)
    """
    groups = decision_groups(program)
    options = decision_options(rng, groups)
    decision, orientation = tie_groups(rng, len(groups))
    d = int(decision.max()) + 1 if decision.size else 0
    nc = program.node_config_ids.size

    def write(values: np.ndarray) -> np.ndarray:
        return _write(values, groups, options, decision, orientation, nc)

    if search == "random":
        values = rng.integers(2, size=(c, d))
    else:
        effect = flip_effects(program, write, d, cost_model) if d else np.zeros(0)
        largest = float(np.abs(effect).max()) if d else 0.0
        right = 0.5 + 0.5 * (np.abs(effect) / largest if largest > 0 else np.zeros(d))
        preferred = (effect < 0).astype(np.int64) ^ (rng.random(d) >= right).astype(np.int64)
        minority = rng.uniform(MIN_MINORITY, MAX_MINORITY, size=d)
        values = preferred[None, :] ^ (rng.random((c, d)) < minority[None, :]).astype(np.int64)
    return write(values.astype(np.int64))
