"""What a run's immutable args record does, for any collection's frozen dataclass of flags.

    @dataclasses.dataclass(frozen=True)
    class MyArgs(ArgsRecord):
        lr: float = 1e-3
    MyArgs.from_dict(MyArgs().to_dict()) == MyArgs()   # the run file's round trip

`parse_json_object` reads a `--*_json` flag that must hold a JSON object, with
the same one-line refusals for every script.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from baselines.core.errors import PipelineError

# --toy_data (upstream's tile flag, taken by both collections' training scripts):
# the first this many files of each split, in file-name order.
TOY_MAX_FILES = 100


class ArgsRecord:
    """Flag names, dict round trip and unknown-key tolerance of a frozen args dataclass."""

    @classmethod
    def flag_names(cls) -> frozenset[str]:
        """One command-line flag per field, named like it."""
        return frozenset(f.name for f in dataclasses.fields(cls))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]):
        """The record of a run file; keys that are not fields (older or newer files) are ignored."""
        names = cls.flag_names()
        return cls(**{k: v for k, v in d.items() if k in names})


def parse_json_object(flag: str, text: str, example: str) -> dict[str, Any]:
    """The JSON object a flag holds; anything else ends in one line naming the flag."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise PipelineError(
            f"--{flag}: not valid JSON ({e.msg} at char {e.pos}): {text!r}; "
            f"pass an object such as '{example}'"
        ) from None
    if not isinstance(value, dict):
        raise PipelineError(f"--{flag}: expected a JSON object, got {text!r}")
    return value
