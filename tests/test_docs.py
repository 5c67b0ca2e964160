"""The README and docs/ say what the code does: their commands run or parse, their tables match.

Every fenced bash block is marked on the line before it:
- `<!-- docs-test: run -->`: its lines run verbatim, in order, in a scratch copy
  of the repository with an empty home folder (so `~/data/...` is absent, as
  on a machine before any download); `model_<hash>` matches the one run made;
  `make` uses this interpreter for `.venv`; `make test` is checked to be what
  `.ci/run` runs (CI runs it; a test cannot run its own suite);
- `<!-- docs-test: run by tests/NAME.py -->`: that test runs the block;
- `<!-- docs-test: parse -->`: it needs the real data or hours; each command is
  parsed by its own script's parser (flagfiles expanded), make targets are
  dry-run, and commands of other tools must be among the few known ones.
"""

from __future__ import annotations

import argparse
import os
import re
import runpy
import shlex
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
from conftest import ROOT, copy_repository

from baselines.core.cli import EntryParser

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)
MARKER = re.compile(r"<!-- docs-test: (run|parse|run by (tests/\w+\.py)) -->")
# Commands of other tools a parse block may hold (a download, a Kaggle CLI, a shell).
EXTERNAL = {"kaggle", "tensorboard", "bash", "pip", "conda", "git", "cd", "curl", "tar", "cp"}
CI_COMMAND = "make test"


def blocks() -> list[tuple[Path, int, str, str]]:
    """(file, line, mode, body) of every bash block of the README and docs/."""
    found = []
    for path in DOCS:
        text = path.read_text()
        for match in FENCE.finditer(text):
            before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
            marker = MARKER.fullmatch(before.strip())
            line = text[: match.start()].count("\n") + 1
            mode = marker.group(1) if marker else "unmarked"
            found.append((path, line, mode, match.group(1)))
    return found


def without_comment(line: str) -> str:
    """`line` without a trailing `# ...` comment (a `#` outside quotes, after a space)."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def commands(body: str) -> list[str]:
    """One string per command: continuation lines joined, comments dropped."""
    joined = body.replace("\\\n", " ")
    lines = (without_comment(line).strip() for line in joined.splitlines())
    return [line for line in lines if line]


def block_id(block) -> str:
    path, line, mode, _ = block
    return f"{path.relative_to(ROOT)}:{line}:{mode.split()[0]}"


ALL_BLOCKS = blocks()


def test_every_bash_block_is_marked_and_the_docs_hold_some():
    assert len(ALL_BLOCKS) >= 10
    unmarked = [block_id(b) for b in ALL_BLOCKS if b[2] == "unmarked"]
    assert not unmarked, f"bash blocks without a docs-test marker: {unmarked}"
    for path, _, mode, _body in ALL_BLOCKS:
        if mode.startswith("run by"):
            runner = ROOT / mode.removeprefix("run by ")
            # The named test reads the block from this file.
            assert path.name in runner.read_text(), (path, runner)


class _Parsed(Exception):
    """Raised by the patched parsers once a script has parsed its command line."""


def parse_only(script: Path, argv: list[str]):
    """Runs `script` as __main__ until it has parsed `argv`; returns what it parsed."""
    inside = [False]

    def stopping(parse):
        def wrapper(self, *args, **kwargs):
            if inside[0]:  # a parser calling its own parse_known_args
                return parse(self, *args, **kwargs)
            inside[0] = True
            try:
                result = parse(self, *args, **kwargs)
            finally:
                inside[0] = False
            raise _Parsed(result)

        return wrapper

    with (
        mock.patch.object(EntryParser, "parse_args", stopping(EntryParser.parse_args)),
        mock.patch.object(
            argparse.ArgumentParser, "parse_args", stopping(argparse.ArgumentParser.parse_args)
        ),
        mock.patch.object(
            argparse.ArgumentParser,
            "parse_known_args",
            stopping(argparse.ArgumentParser.parse_known_args),
        ),
        mock.patch.object(sys, "argv", [str(script), *argv]),
    ):
        try:
            runpy.run_path(str(script), run_name="__main__")
        except _Parsed as done:
            return done.args[0]
        except SystemExit as e:
            raise AssertionError(f"{script.name} {shlex.join(argv)}: exit {e.code}") from None
    raise AssertionError(f"{script.name} finished without parsing its command line")


def first_of_pipeline(command: str) -> str:
    """`a | b` -> `a`, for a `|` outside quotes and `$(...)`."""
    quote, depth = None, 0
    for i, char in enumerate(command):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            return command[:i]
    return command


def check_parses(command: str, monkeypatch) -> None:
    # `python x.py | bash`: the script is what is checked.
    first = first_of_pipeline(command)
    words = shlex.split(first, comments=True)
    while re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=\S*", words[0]):  # VAR=value command
        words = words[1:]
    while words[0] in ("time", "/usr/bin/time"):  # a timed command: check the command
        words = words[1:]
        while words[0].startswith("-"):
            words = words[1:]
    if words[0] in EXTERNAL:
        return
    if words[0] == "make":
        proc = subprocess.run(
            ["make", "-n", "-o", ".venv/.installed", f"PY={sys.executable}", *words[1:]],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, f"{command}: {proc.stderr}"
        return
    assert words[0] in ("python", ".venv/bin/python"), f"unknown command in the docs: {command}"
    script = ROOT / words[1]
    assert script.is_file(), f"{command}: no script {words[1]}"
    monkeypatch.chdir(ROOT)  # flagfiles and paths as from the repository root
    parse_only(script, words[2:])


PARSE_BLOCKS = [b for b in ALL_BLOCKS if b[2] == "parse"]


@pytest.mark.parametrize("block", PARSE_BLOCKS, ids=[block_id(b) for b in PARSE_BLOCKS])
def test_commands_that_need_the_real_data_or_hours_parse(block, monkeypatch):
    for command in commands(block[3]):
        check_parses(command, monkeypatch)


def runnable(command: str) -> str | None:
    """The shell line a run block's command becomes in the scratch copy (None: not run)."""
    words = shlex.split(command)
    # A test suite is never run from inside the test suite: `make test` is what
    # CI runs, and any other form of it is refused here.
    assert words[:2] not in (["make", "test-fast"], ["make", "mutation"]), command
    if words[:2] == ["make", "test"]:
        assert command == CI_COMMAND, f"{command}: the README's test command must be {CI_COMMAND}"
        ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
        assert ci[-1] == CI_COMMAND, "the README's test command is not what .ci/run runs"
        return None
    command = command.replace("model_<hash>", "model_*")
    if command.startswith("make "):
        command = f"make -o .venv/.installed PY={shlex.quote(sys.executable)} " + command[5:]
    return command


RUN_BLOCKS = [b for b in ALL_BLOCKS if b[2] == "run"]


@pytest.mark.slow
@pytest.mark.parametrize("block", RUN_BLOCKS, ids=[block_id(b) for b in RUN_BLOCKS])
def test_quick_commands_run_as_written(block, tmp_path):
    repo = copy_repository(tmp_path / "repo")
    home = tmp_path / "home"
    home.mkdir()
    lines = [line for c in commands(block[3]) if (line := runnable(c))]
    if not lines:
        return
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", HOME=str(home))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    proc = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + "\n".join(lines)],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, f"{block_id(block)}: {proc.stderr[-3000:]}"


def test_the_course_block_trains_predicts_and_submits():
    """The README's course commands are the three course steps, in order."""
    (block,) = [
        b
        for b in ALL_BLOCKS
        if b[0].name == "README.md" and "create_kaggle_csv.py" in b[3] and b[2] == "run"
    ]
    assert [c.split()[1] for c in commands(block[3])] == [
        "tiles_train.py",
        "tiles_gen_predictions_csv.py",
        "create_kaggle_csv.py",
    ]


def test_generated_tables_match_the_code():
    sys.path.insert(0, str(ROOT / "tools"))
    import docs_tables

    assert docs_tables.stale_files(DOCS) == []
    # Every script and the kwargs have their table somewhere in the docs.
    text = "".join(path.read_text() for path in DOCS)
    for name in [*docs_tables.PARSERS, "model-kwargs"]:
        assert f"<!-- generated:{name}:start -->" in text, name


def test_the_readme_is_short_and_nothing_cites_outside_documents():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250
    # Built so that this file does not match itself.
    cited = re.compile("SP" + r"EC\b|issue #\d|issues? \d+\b")
    listed = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True
    ).stdout.split() or [str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py")]
    offenders = []
    for name in listed:
        path = ROOT / name
        if (
            path.suffix not in (".py", ".md", ".flags", ".toml", ".yml", ".txt", "")
            or not path.is_file()
        ):
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if cited.search(line):
                offenders.append(f"{name}:{number}: {line.strip()}")
    assert not offenders, offenders


def test_every_flag_of_every_script_has_one_help_and_one_default():
    """--help: each flag described, its default shown once (never as None)."""
    sys.path.insert(0, str(ROOT / "tools"))
    import docs_tables

    for script, make_parser in docs_tables.PARSERS.items():
        parser = make_parser()
        formatter = parser._get_formatter()
        for action in parser._actions:
            if not action.option_strings or action.option_strings[0] == "-h":
                continue
            assert action.help, f"{script} {action.option_strings[0]} has no help"
            text = formatter._get_help_string(action) % {"default": action.default}
            assert text.count("(default") <= 1, (script, text)
            assert "(default: None)" not in text, (script, text)
