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
# Commands of other tools a parse block may hold (a download, a Kaggle CLI, a shell, a Dask
# worker).
EXTERNAL = {"kaggle", "tensorboard", "bash", "pip", "conda", "git", "cd", "curl", "tar", "cp"}
EXTERNAL |= {"mkdir", "chmod", "dask"}
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


README_LINES = 180
PAGE_LINES = 400
PARAGRAPH_LINES = 8  # the README's longest paragraph
EXPERIMENTS_PROSE_LINES = 5  # experiments.md is tables: its longest paragraph outside them


def paragraphs(text: str) -> list[tuple[int, list[str]]]:
    """(first line number, lines) of every paragraph of prose: a run of non-blank lines that are
    not in a fenced block, a table, a heading, an image or an HTML comment; each list item
    (with its continuation lines) is a paragraph of its own."""
    found: list[tuple[int, list[str]]] = []
    current: list[str] = []
    start = 0
    fenced = False

    def close():
        nonlocal current
        if current:
            found.append((start, current))
        current = []

    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("```"):
            close()
            fenced = not fenced
            continue
        if fenced or not stripped or stripped.startswith(("|", "#", "<!--", "![")):
            close()
            continue
        if re.match(r"([-*]|\d+\.) ", stripped):  # a list item starts a paragraph of its own
            close()
        if not current:
            start = number
        current.append(line)
    close()
    return found


def long_paragraphs(text: str, limit: int) -> list[str]:
    return [f"line {n}: {len(lines)} lines" for n, lines in paragraphs(text) if len(lines) > limit]


def test_paragraphs_are_found_outside_tables_and_code():
    text = "a\nb\n\n| t |\n|---|\n\n```bash\nx\ny\nz\n```\n- item\n  more\n- item2\n"
    assert [(n, len(lines)) for n, lines in paragraphs(text)] == [(1, 2), (12, 2), (14, 1)]
    assert long_paragraphs("x\n" * 9, 8) == ["line 1: 9 lines"]
    assert long_paragraphs("x\n" * 8, 8) == []


def test_the_readme_is_short_with_short_paragraphs():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= README_LINES
    assert not long_paragraphs(text, PARAGRAPH_LINES)


@pytest.mark.parametrize("path", sorted((ROOT / "docs").glob("*.md")), ids=lambda p: p.name)
def test_every_reference_page_is_at_most_400_lines(path):
    assert len(path.read_text().splitlines()) <= PAGE_LINES, path.name


def test_experiments_holds_tables_not_prose():
    text = (ROOT / "docs" / "experiments.md").read_text()
    assert not long_paragraphs(text, EXPERIMENTS_PROSE_LINES)
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    prose = [line for _, lines in paragraphs(text) for line in lines]
    assert len(rows) > 2 * len(prose), (len(rows), len(prose))
    # One table per collection.
    for collection in [
        "tile:xla",
        *(f"layout:{s}:{x}" for s in ("xla", "nlp") for x in ("default", "random")),
    ]:
        assert f"\n## {collection}\n" in text, collection


FLAGFILE = re.compile(r"configs/[\w/]+\.flags")
RECIPE_LIST = re.compile(r"--recipes[ =]([\w/,.]+)")


def cited_recipes() -> set[str]:
    """Flagfiles (paths relative to configs/, without .flags) that the docs name."""
    cited = set()
    for path in DOCS:
        text = path.read_text()
        cited |= {m[len("configs/") : -len(".flags")] for m in FLAGFILE.findall(text)}
        # `ablation/x` in a table cell or a --recipes list: tile names are relative to
        # configs/, layout ones (bench/layout_*.py) to configs/layout/.
        for name in re.findall(r"`(ablation/\w+)`", text):
            cited |= {name, f"layout/{name}"}
        for names in RECIPE_LIST.findall(text):
            for name in names.split(","):
                cited |= {name, f"layout/{name}"}
    return cited


def test_every_flagfile_is_cited_by_a_doc_and_every_cited_flagfile_exists():
    shipped = {str(p.relative_to(ROOT / "configs"))[:-6] for p in ROOT.glob("configs/**/*.flags")}
    cited = cited_recipes()
    assert sorted(shipped - cited) == [], "flagfiles no doc cites"
    named = set()
    for path in DOCS:
        named |= {m[len("configs/") : -len(".flags")] for m in FLAGFILE.findall(path.read_text())}
    assert sorted(named - shipped) == [], "docs name flagfiles that do not exist"


def anchor(heading: str) -> str:
    """GitHub's anchor of a markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)
    return {anchor(m) for m in re.findall(r"^#{1,6} (.+)$", text, re.M)}


def test_anchor_is_githubs():
    assert (
        anchor("Layout collections: `bench/layout_scale.py`")
        == "layout-collections-benchlayout_scalepy"
    )
    assert anchor("layout:xla:default") == "layoutxladefault"


LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_every_link_between_docs_reaches_its_file_and_anchor():
    sources = [*DOCS, ROOT / "data" / "README.md"]
    broken = []
    for path in sources:
        for target in LINK.findall(path.read_text()):
            if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
                continue
            file, _, fragment = target.partition("#")
            dest = (path.parent / file).resolve() if file else path
            if not dest.exists():
                broken.append(f"{path.relative_to(ROOT)}: {target}")
            elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
                broken.append(f"{path.relative_to(ROOT)}: {target}")
    assert not broken, broken


def test_nothing_cites_outside_documents():
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


# Reference pages state facts, not a diary: they hold no path of a developer's
# machine and cite no commit; the history (with its commits) lives in these two.
HISTORY_PAGES = {"results.md", "experiments.md"}
PROSE_PAGES = [*DOCS, ROOT / "data" / "README.md"]
# The rule: test_no_page_holds_a_path_of_a_developers_machine's docstring.
DEVELOPER_PATH = re.compile(r"(?<![\w.~<>/-])/(?:work|tmp|root|home|Users)/")


def developer_paths(text: str) -> list[str]:
    return [
        f"line {number}: {line.strip()}"
        for number, line in enumerate(text.splitlines(), 1)
        if DEVELOPER_PATH.search(line)
    ]


def test_the_developer_path_rule():
    for line in [
        "--data_root=/work/rel/data",
        "`/tmp/stepcache`",
        "python x.py --out /root/a",
        "cd /home/me/tpu",
        "/Users/me/data",
    ]:
        assert developer_paths(line), line
    for line in [
        "~/data/tpugraphs/npz/tile/xla",
        "out/tmp/x and ../shared/real_samples",
        "--data_root <data>/npz --work <work>",
        "https://example.com/home/page",
        "/shared/tpugraphs on every worker",
    ]:
        assert not developer_paths(line), line


def test_no_page_holds_a_path_of_a_developers_machine():
    """README.md, docs/*.md and data/README.md name no folder of one developer's machine.

    A path of such a machine is an absolute path under `/work/`, `/tmp/`, `/root/`,
    `/home/` or `/Users/`: the slash not preceded by a word character, `.`, `~`, `<`,
    `>`, `/` or `-`, so `~/data/...`, `out/tmp/...`, `../shared/...`, `<data>/...` and
    the path part of a URL (`example.com/home/`) do not count. Commands write
    placeholders instead (`<data>`, `<cache>`, `<out>`, `<work>`); a cluster's shared
    mount (`/shared/...`) names no one's machine.
    """
    offenders = {
        str(path.relative_to(ROOT)): found
        for path in PROSE_PAGES
        if (found := developer_paths(path.read_text()))
    }
    assert not offenders, f"use placeholders such as <data>, <out>, <work>: {offenders}"


# The rule: test_commit_hashes_only_in_results_and_experiments's docstring.
COMMIT = re.compile(
    r"(?<![\w-])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])(?:[0-9a-f]{40}|[0-9a-f]{7,12})(?![\w-])"
)


def commits(text: str) -> list[str]:
    return COMMIT.findall(text)


def test_the_commit_rule():
    cited = (
        "at 4cb77e9, (commit d59d96f) `git show 44a1000:configs/x.flags` "
        "cf57733 → e027276 " + "0123456789abcdef0123456789abcdef01234567"
    )
    assert commits(cited) == [
        "4cb77e9",
        "d59d96f",
        "44a1000",
        "cf57733",
        "e027276",
        "0123456789abcdef0123456789abcdef01234567",
    ]
    not_cited = (
        "out/model_3f2a9c1d7e; run_ab12cd34ef.jsonz; sets/standard-2e379689; "
        "retinanet_-3e297930bbff28ea.npz; 3a0c5517a87df8d82fd637b83298a3ba.npz; "
        "0x1f2e3d4c; 1234567 configurations; defaced; 12.9 M; sigma 1e-4"
    )
    assert commits(not_cited) == []


def test_commit_hashes_only_in_results_and_experiments():
    """Only docs/results.md and docs/experiments.md (the history) cite commits.

    A commit is what the docs cite as one: 7 to 12 hex digits (a short hash) or 40 (a
    full one), with at least one digit and one letter a-f (so neither a number nor a
    word such as "defaced"), standing alone: no word character (`_` included) or `-`
    on either side. So `model_<md5>` run folders and `run_<hash>` files, benchmark set
    folders (`standard-2e379689`), the release's file-name hashes
    (`..._-3e297930bbff28ea`), 16-digit digests, 32-digit md5 test-file names and
    `0x...` literals are not commits; `test_the_commit_rule` holds the examples.
    """
    offenders = {
        str(path.relative_to(ROOT)): found
        for path in PROSE_PAGES
        if path.name not in HISTORY_PAGES and (found := commits(path.read_text()))
    }
    assert not offenders, f"commits belong in docs/experiments.md or docs/results.md: {offenders}"
    # The history pages do cite them: the rule would see a commit there.
    for name in HISTORY_PAGES:
        assert commits((ROOT / "docs" / name).read_text()), name


GLOSSARY = ROOT / "docs" / "glossary.md"
# Each term, and how the README would use it.
GLOSSARY_TERMS = {
    "OPA": r"\bOPA\b",
    "Top-K error": r"\btop-(?:K|k|\d+) error",
    "Slowdown": r"\bslowdown",
    "Kendall's tau": r"Kendall's tau",
    "World": r"\bworlds?\b",
    "Cost model": r"\bcost models?\b",
    "Decisions": r"\bdecisions\b",
    "Vector-tile padding": r"\bvector-tile padding\b",
    "Analytic estimates": r"\banalytic estimates\b",
    "Architecture inputs": r"\barchitecture inputs\b",
    "Codebook": r"\bcodebooks?\b",
}


def glossary_entries(text: str) -> list[tuple[str, str]]:
    """(term, its definition) of every entry: a heading with the paragraphs under it, a
    `**term**: ...` paragraph, or a definition-list item (`term` then `: ...`)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    entries = []
    for match in re.finditer(r"^#{2,6} (.+)\n((?:(?!#{1,6} ).*\n?)*)", text, re.M):
        entries.append((match.group(1).strip(), match.group(2).strip()))
    for match in re.finditer(r"^\*\*(.+?)\*\*:?[ \t]*(.*)$", text, re.M):
        entries.append((match.group(1).strip().rstrip(":"), match.group(2).strip()))
    for match in re.finditer(r"^([^\n:#|*-][^\n]*)\n: (.+)$", text, re.M):
        entries.append((match.group(1).strip(), match.group(2).strip()))
    return entries


def test_glossary_entries_are_found_in_each_form():
    text = "# G\n\n## One\n\nfirst.\n\n**Two**: second.\n\nThree\n: third.\n\n## Four\n"
    assert glossary_entries(text) == [
        ("One", "first.\n\n**Two**: second.\n\nThree\n: third."),
        ("Four", ""),
        ("Two", "second."),
        ("Three", "third."),
    ]


def test_the_glossary_defines_each_term_once():
    entries = glossary_entries(GLOSSARY.read_text())
    names = [name.lower() for name, _ in entries]
    duplicated = sorted({name for name in names if names.count(name) > 1})
    assert not duplicated, f"terms defined more than once: {duplicated}"
    assert sorted(names) == sorted(term.lower() for term in GLOSSARY_TERMS)
    empty = [name for name, definition in entries if len(definition.split()) < 10]
    assert not empty, f"entries without a definition: {empty}"


def test_the_readme_links_the_glossary_for_the_terms_it_uses():
    readme = (ROOT / "README.md").read_text()
    assert "](docs/glossary.md)" in readme, "the README's documentation list names the glossary"
    # That list item names every term; the README's own uses are elsewhere.
    readme = re.sub(
        r"^- \[docs/glossary\.md\]\(docs/glossary\.md\).*?(?=^- |^$)", "", readme, flags=re.S | re.M
    )
    unlinked = [
        term
        for term, used in GLOSSARY_TERMS.items()
        if re.search(used, readme, re.I) and f"](docs/glossary.md#{anchor(term)})" not in readme
    ]
    assert not unlinked, f"the README uses these without linking their glossary entry: {unlinked}"


def test_the_license_and_the_citation():
    license_text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert "END OF TERMS AND CONDITIONS" in license_text  # the whole text, not a pointer
    readme = (ROOT / "README.md").read_text()
    assert "](LICENSE)" in readme
    (bibtex,) = re.findall(r"^```bibtex\n(.*?)^```", readme, re.S | re.M)
    for part in ("TpuGraphs", "Phothilimthana", "Perozzi", "2308.13490", "2023"):
        assert part in bibtex, part
