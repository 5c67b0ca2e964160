"""The mutation list (tools/mutations.toml) still applies to the code: `make mutation`
is not part of `make test`, so a moved line or a broken entry would otherwise only
show when someone runs it."""

from __future__ import annotations

import tomllib

from conftest import ROOT

KEYS = {"name", "area", "file", "find", "replace", "tests"}
OPTIONAL = {"rename_to"}


def test_every_mutation_applies_once_and_names_existing_tests():
    with open(ROOT / "tools" / "mutations.toml", "rb") as f:
        entries = tomllib.load(f)["mutation"]
    names = [e.get("name") for e in entries]
    assert len(names) == len(set(names)), "a mutation name is used twice"
    problems = []
    for e in entries:
        if not KEYS <= set(e) <= KEYS | OPTIONAL:
            problems.append(f"{e.get('name')}: keys {sorted(e)}")
            continue
        path = ROOT / e["file"]
        text = path.read_text() if path.is_file() else ""
        if text.count(e["find"]) != 1:
            problems.append(
                f"{e['name']}: `find` occurs {text.count(e['find'])} times in {e['file']}"
            )
        if e["find"] == e["replace"] and "rename_to" not in e:
            problems.append(f"{e['name']}: `replace` changes nothing")
        if "rename_to" in e and (ROOT / e["rename_to"]).exists():
            problems.append(f"{e['name']}: `rename_to` {e['rename_to']} exists already")
        tests = list(e["tests"])
        # pytest options ride along ("-m", "not slow"): only the paths are checked.
        paths = [t for i, t in enumerate(tests) if not t.startswith("-")
                 and not (i and tests[i - 1] in ("-m", "-k"))]  # fmt: skip
        for test in paths:
            file, _, function = test.partition("::")
            if not (ROOT / file).is_file():
                problems.append(f"{e['name']}: no test file {file}")
            elif function and f"def {function.split('[')[0]}(" not in (ROOT / file).read_text():
                problems.append(f"{e['name']}: no test {function} in {file}")
    assert not problems, problems
