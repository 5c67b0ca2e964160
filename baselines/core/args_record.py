"""What a run's immutable args record does, for any collection's frozen dataclass of flags."""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
from typing import Any, ClassVar

from baselines.core.data_roots import DataPlace
from baselines.core.errors import PipelineError
from baselines.core.loss_spec import parse_losses

# Upstream's --toy_data=True: the first this many files of each split, in file-name order.
TOY_MAX_FILES = 100
TOY_DATA_NOTE = (
    f"--toy_data=True: the first {TOY_MAX_FILES} files of each split (--max_files="
    f"{TOY_MAX_FILES}); the bundled toy set stands in only where the default --data_root holds "
    "nothing (--bundled_toy=True asks for it)"
)


class ArgsRecord:
    """Flag names, dict round trip and the run hash of a frozen args dataclass."""

    # Fields left out of the run hash (they say where things go, not what is trained).
    NOT_HASHED: ClassVar[frozenset[str]] = frozenset()
    # Fields hashed only when they differ from their default (added after runs were saved).
    ADDED_LATER: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def hash_view(cls, values: dict[str, Any]) -> dict[str, Any]:
        """Field values under the names runs have always hashed them by (a subclass maps a
        renamed flag back to the one it replaced)."""
        return dict(values)

    def run_hash(self) -> str:
        """md5 of the sorted JSON of the hashed fields: the `<hash>` of the run's files."""
        defaults = self.hash_view({f.name: f.default for f in dataclasses.fields(self)})
        hashed = {
            k: v
            for k, v in self.hash_view(self.to_dict()).items()
            if k not in self.NOT_HASHED and not (k in self.ADDED_LATER and v == defaults.get(k))
        }
        return hashlib.md5(json.dumps(hashed, sort_keys=True).encode()).hexdigest()

    def parse_optional_ints(self, *names: str) -> None:
        """Sets each named field from its flag text: None ("" or "none") or an integer."""
        for name in names:
            value = getattr(self, name)
            if not isinstance(value, str):
                continue
            try:
                parsed = None if value.strip().lower() in ("", "none") else int(value)
            except ValueError:
                raise PipelineError(
                    f"--{name}: expected an integer or None, got {value!r}"
                ) from None
            object.__setattr__(self, name, parsed)

    @classmethod
    def flag_fields(cls) -> list[dataclasses.Field]:
        """One command-line flag per field, named like it, then the init-only fields
        (`dataclasses.InitVar`): flags that set other fields and are never stored."""
        stored = [f.name for f in dataclasses.fields(cls)]
        init_only = [n for n in inspect.signature(cls).parameters if n not in stored]
        return [*dataclasses.fields(cls), *(cls.__dataclass_fields__[n] for n in init_only)]

    @classmethod
    def flag_names(cls) -> frozenset[str]:
        return frozenset(f.name for f in cls.flag_fields())

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


def flag(default: Any, help: str) -> Any:
    """A field that is also a command-line flag; `help` is its one description."""
    return dataclasses.field(default=default, metadata={"help": help})


def old_spelling_notes(flags: dict[str, Any]) -> list[str]:
    """One line per old spelling among a script's parsed `flags`: what it does in the new ones."""
    return [TOY_DATA_NOTE] if flags.get("toy_data") else []


def flag_type(field: dataclasses.Field) -> str:
    """A flag field's type as written, e.g. "int | None" (an init-only field's inner type)."""
    return str(field.type).removeprefix("dataclasses.InitVar[").removesuffix("]")


OPTIMIZERS = ("adam", "adamw")
LR_SCHEDULES = ("constant", "cosine")


@dataclasses.dataclass(frozen=True)
class TrainingArgs(ArgsRecord):
    """The flags every collection's training takes (optimizer, schedule, validation, averaging)."""

    lr: float = flag(1e-3, "learning rate (peak rate with --lr_schedule=cosine)")
    optimizer: str = flag("adam", "adam or adamw (decoupled weight decay)")
    weight_decay: float = flag(0.0, "AdamW weight decay (needs --optimizer=adamw)")
    lr_schedule: str = flag("constant", "constant, or cosine (Keras CosineDecay over all steps)")
    warmup_epochs: int = flag(0, "epochs of linear warm-up before the cosine decay")
    max_train_steps: int = flag(
        0,
        "cap on training steps: a run trains min(--epochs, ceil(this / steps per epoch)) "
        "epochs, its learning-rate schedule fitted to them (0 = no cap)",
    )
    eval_every: int = flag(
        1,
        "validate (OPA, model selection, early stop) every N epochs and after the last; "
        "--early_stop still counts epochs",
    )
    average_from: int | None = flag(
        None,
        "end on the mean of the weights after this epoch (counted from 1) and every later "
        "one, instead of the best epoch's (None = the best epoch's)",
    )

    # Init-only (`dataclasses.InitVar`): each sets stored fields, so that a run is recorded
    # and hashed the same however it was asked for. On a record they read False.
    toy_data: dataclasses.InitVar[bool] = flag(
        False, f"old spelling of --max_files={TOY_MAX_FILES} (upstream's tile flag)"
    )
    bundled_toy: dataclasses.InitVar[bool] = flag(
        False, "the bundled synthetic toy set in data/ instead of --data_root"
    )

    def __post_init__(self, toy_data: bool, bundled_toy: bool) -> None:
        """`--max_files` as an integer; `--toy_data` and `--bundled_toy` applied, or refused
        in one line when another flag says otherwise."""
        self.parse_optional_ints("max_files")
        if toy_data:
            if self.max_files not in (None, TOY_MAX_FILES):
                raise PipelineError(
                    f"--toy_data=True means --max_files={TOY_MAX_FILES}, not "
                    f"--max_files={self.max_files}; give one of the two"
                )
            object.__setattr__(self, "max_files", TOY_MAX_FILES)
        if bundled_toy:
            place: DataPlace = self.PLACE  # the collection's (a subclass sets it)
            if self.data_root == place.default:
                object.__setattr__(self, "data_root", place.toy_text)
            elif not place.is_toy(place.expand(self.data_root)):
                raise PipelineError(
                    f"--bundled_toy=True reads {place.toy}, not --data_root={self.data_root}; "
                    "give one of the two"
                )

    @classmethod
    def hash_view(cls, values: dict[str, Any]) -> dict[str, Any]:
        """`max_files` hashed as the flag it replaced, upstream's `toy_data` (None as False,
        100 as True), so that runs saved before keep their names; any other count is hashed
        as itself beside it."""
        view = dict(values)
        max_files = view.pop("max_files")
        view["toy_data"] = max_files == TOY_MAX_FILES
        if max_files not in (None, TOY_MAX_FILES):
            view["max_files"] = max_files
        return view

    def validation_epochs(self, epochs: int | None = None) -> list[int]:
        """1-based epochs after which validation runs: every `eval_every`-th and the last."""
        epochs = self.epochs if epochs is None else epochs
        return sorted({*range(self.eval_every, epochs + 1, self.eval_every), epochs})

    def optimizer_and_schedule_problem(self) -> str | None:
        """What is wrong with the optimizer and schedule flags, or None."""
        if self.eval_every < 1:
            return f"--eval_every: must be at least 1, got {self.eval_every}"
        for name, allowed in (("optimizer", OPTIMIZERS), ("lr_schedule", LR_SCHEDULES)):
            if getattr(self, name) not in allowed:
                return f"--{name}: '{getattr(self, name)}' is not one of {', '.join(allowed)}"
        if self.weight_decay < 0 or (self.weight_decay > 0 and self.optimizer != "adamw"):
            return f"--weight_decay: {self.weight_decay} needs --optimizer=adamw and a value >= 0"
        if self.warmup_epochs < 0 or (self.warmup_epochs and self.lr_schedule != "cosine"):
            return (
                f"--warmup_epochs: {self.warmup_epochs} needs --lr_schedule=cosine and a value >= 0"
            )
        if self.max_train_steps < 0:
            return f"--max_train_steps: must be 0 (no cap) or positive, got {self.max_train_steps}"
        return None


def check_training_flags(args: Any) -> None:
    """The checks every collection's training flags share, one line per problem."""
    parse_losses(args.losses)
    args.model_kwargs()
    for name in ("epochs", "early_stop", "batch"):
        if getattr(args, name) < 1:
            raise PipelineError(f"--{name}: must be at least 1, got {getattr(args, name)}")
    if args.configs < 2:
        raise PipelineError(
            f"--configs: {args.configs} gives no ranking signal (configurations are ranked "
            "against each other within a graph); use at least 2"
        )
    if args.max_files is not None and args.max_files < 1:
        raise PipelineError(
            f"--max_files: must be at least 1 (or None = every file), got {args.max_files}"
        )
    if not args.lr > 0 or not args.clip_norm > 0:
        raise PipelineError(
            f"--lr and --clip_norm must be positive, got {args.lr} and {args.clip_norm}"
        )
    if args.average_from is not None and not 1 <= args.average_from <= args.epochs:
        raise PipelineError(
            f"--average_from: must be an epoch from 1 to --epochs ({args.epochs}), "
            f"got {args.average_from}"
        )
    problem = args.optimizer_and_schedule_problem()
    if problem:
        raise PipelineError(problem)
