"""Unit test: every ./kml command line that README.md and docs/*.md show
is accepted by the real argument parser.

Lines are taken from inline code spans and from code blocks.  Words in
capitals (FILE, NAME, CMD, MODEL, ...) are the docs' placeholders: they
are replaced by a value of the kind the option takes before parsing, and
synopses with alternatives or optional parts ([...], a|b) are checked in
each form.  A documented option the parser rejects fails here, as
`./kml verify --json` did while verify parsed its arguments as REMAINDER.
"""
import re
import shlex

import pytest

from conftest import ROOT
from kmltool import cli

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# placeholder -> what the docs mean by it
PLACEHOLDERS = {"FILE": "/bin/true", "FILE...": "/bin/true", "CMD": "true", "NAME": "default",
                "MODEL": "EPYC-Milan", "N": "2", "S": "1", "M": "1", "ARGS": "pti=off",
                "MIB": "64", "HOST[:GUEST]": "/bin/true", "HOST:GUEST": "/bin/true",
                "SECONDS": "1", "SIZE": "512M", "EXPR": "x", "LIST": "hole"}
# ./kml test --config NAME / soak --config NAME / bench --config NAME take
# a configuration name, not a kernel name
CONFIG_OF = {"test": "smp2-pti-off", "soak": "pti-off", "bench": "debian-pti-off",
             "apps": "pti-off", "fuzz": "smp2-pti-off"}


def documented_lines():
    out = set()
    for doc in DOCS:
        text = doc.read_text()
        for m in re.finditer(r"`(\./kml [^`\n]*)`", text):
            out.add((doc.name, m.group(1)))
        for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S):
            for line in block.splitlines():
                line = line.split("#", 1)[0].strip()
                if line.startswith("./kml "):
                    out.add((doc.name, line))
    return sorted(out)


def forms(line):
    """The concrete command lines a synopsis stands for: every optional
    part ([...]) in, and every one out; each alternative (a|b) once."""
    line = line.replace("\\|", "|").replace("[VM options]", "")
    out = []
    for keep in (True, False):
        text = line
        while True:
            m = re.search(r"\[([^\[\]]*)\]", text)
            if not m:
                break
            text = text[:m.start()] + (m.group(1) if keep else "") + text[m.end():]
        words = text.split()
        alts = [i for i, w in enumerate(words) if "|" in w and w[0] not in "'\""]
        first = [w.split("|")[0] if i in alts else w for i, w in enumerate(words)]
        out.append(" ".join(first))
        for i in alts:
            for alt in words[i].split("|")[1:]:
                out.append(" ".join(first[:i] + [alt] + first[i + 1:]))
    return sorted(set(out))


def concrete(line):
    # a quoted "..." is a value left to the reader
    argv = shlex.split(line.replace('"..."', "x"))[1:]
    cmd = argv[0] if argv else ""
    out = []
    for i, w in enumerate(argv):
        if w.endswith("...") and w != "...":
            w = w[:-3]              # NAME...: one or more
            if w == "ARGS" or w == "CMD":
                if w == "CMD":
                    out.append("true")
                continue
        if w in PLACEHOLDERS:
            prev = argv[i - 1] if i else ""
            if w == "NAME" and prev == "--config":
                w = CONFIG_OF.get(cmd, "default")
            else:
                w = PLACEHOLDERS[w]
        elif w == "...":
            continue        # "more of the same"
        out.append(w)
    return out


CASES = [(doc, form) for doc, line in documented_lines() for form in forms(line)]


def test_the_docs_show_commands():
    assert len(CASES) > 50


@pytest.mark.parametrize("doc,line", CASES, ids=[f"{d}:{l}" for d, l in CASES])
def test_documented_command_parses(doc, line):
    argv = concrete(line)
    if argv[:1] == ["COMMAND"]:
        pytest.skip("the generic synopsis")
    if len(argv) == 1:
        # the command named in prose: it exists
        assert argv[0] in cli.build_parser()._subparsers._group_actions[0].choices, line
        return
    try:
        cli.build_parser().parse_args(argv)
    except SystemExit as e:
        # --help exits 0; anything else is a rejected documented line
        assert e.code == 0, f"{doc}: {line!r} is rejected by ./kml's parser"
