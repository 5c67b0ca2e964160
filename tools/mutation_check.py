#!/usr/bin/env python3
"""Checks that the test suite catches a curated list of one-line wrong changes.

    python tools/mutation_check.py                  # every mutation in tools/mutations.toml
    python tools/mutation_check.py --only cache     # names or areas containing "cache"

The repository's files (tracked and untracked, less what git ignores) are
copied to a scratch folder with no `../shared` beside it, so the check runs as
on a clean clone without the real samples. The tests each mutation names are
first run unmutated (they must pass), then once per mutation with its one-line
change applied. A mutation is caught when its tests fail; it survives when
they pass. With `rename_to`, the changed file is moved there (a module renamed). A
mutation whose text is not found exactly once, or whose tests end
in an error other than failing tests (collection error, timeout), is reported
as broken: the list needs fixing. Writes `<out>/mutation.{json,md}` and exits
non-zero unless every mutation was caught.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import tqdm

REPO = Path(__file__).resolve().parents[1]
DEFAULT_LIST = REPO / "tools" / "mutations.toml"
# pytest's exit code when tests ran and some failed.
TESTS_FAILED = 1


@dataclasses.dataclass(frozen=True)
class Mutation:
    name: str
    area: str
    file: str
    find: str
    replace: str
    tests: tuple[str, ...]
    rename_to: str = ""  # the changed file moves here (a module renamed)


def read_mutations(path: Path) -> list[Mutation]:
    with open(path, "rb") as f:
        entries = tomllib.load(f)["mutation"]
    return [Mutation(**{**e, "tests": tuple(e["tests"])}) for e in entries]


def copy_repository(dest: Path) -> None:
    """Copies what a clean clone plus uncommitted work holds: no .venv, no ignored files."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, (n.decode() for n in listed)):
        source = REPO / name
        if source.is_file():
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def run_tests(repo: Path, tests: tuple[str, ...], timeout: float) -> tuple[int, float, str]:
    """(pytest exit code, seconds, last lines of output); exit code -1 on timeout."""
    started = time.perf_counter()
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests],
            cwd=repo,
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return -1, time.perf_counter() - started, "timeout"
    tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-3:])
    return proc.returncode, time.perf_counter() - started, tail


def check(mutations: list[Mutation], scratch: Path, timeout: float) -> list[dict]:
    repo = scratch / "repo"
    copy_repository(repo)
    all_tests = tuple(sorted({t for m in mutations for t in m.tests}))
    code, seconds, tail = run_tests(repo, all_tests, timeout * 3)
    if code != 0:
        raise SystemExit(f"error: the unmutated tests do not pass ({seconds:.0f} s):\n{tail}")
    print(f"unmutated tests pass ({seconds:.0f} s)", flush=True)
    results = []
    for m in tqdm.tqdm(mutations, desc="mutations", unit="mutation"):
        path = repo / m.file
        original = path.read_text()
        found = original.count(m.find)
        if found != 1:
            results.append(
                dict(
                    name=m.name,
                    area=m.area,
                    result="broken",
                    seconds=0.0,
                    detail=f"text found {found} times in {m.file}",
                )
            )
            continue
        target = repo / m.rename_to if m.rename_to else path
        if m.rename_to:
            path.unlink()
        target.write_text(original.replace(m.find, m.replace))
        try:
            code, seconds, tail = run_tests(repo, m.tests, timeout)
        finally:
            target.unlink()
            path.write_text(original)
        if code == TESTS_FAILED:
            result = "caught"
        elif code == 0:
            result = "SURVIVED"
        else:
            result = "broken"
        results.append(
            dict(
                name=m.name,
                area=m.area,
                result=result,
                seconds=round(seconds, 1),
                detail=tail.splitlines()[-1] if tail else "",
            )
        )
    return results


def markdown(results: list[dict], wall: float) -> str:
    caught = sum(r["result"] == "caught" for r in results)
    lines = [
        f"{caught} of {len(results)} mutations caught ({wall / 60:.1f} min).",
        "",
        "| mutation | area | result | s |",
        "|---|---|---|---|",
    ]
    lines += [f"| {r['name']} | {r['area']} | {r['result']} | {r['seconds']} |" for r in results]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--mutations", type=Path, default=DEFAULT_LIST)
    parser.add_argument("--only", default="", help="run mutations whose name or area contains this")
    parser.add_argument("--out", type=Path, default=REPO / "out" / "mutation")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per mutation")
    args = parser.parse_args()
    mutations = [m for m in read_mutations(args.mutations) if args.only in m.name + " " + m.area]
    if not mutations:
        print(f"error: no mutation matches --only {args.only!r}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mutation-") as scratch:
        results = check(mutations, Path(scratch), args.timeout)
    wall = time.perf_counter() - started
    args.out.mkdir(parents=True, exist_ok=True)
    report = markdown(results, wall)
    (args.out / "mutation.md").write_text(report)
    (args.out / "mutation.json").write_text(json.dumps(results, indent=1) + "\n")
    print(report)
    for r in results:
        if r["result"] != "caught":
            print(f"{r['result']}: {r['name']} ({r['detail']})")
    return 0 if all(r["result"] == "caught" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
