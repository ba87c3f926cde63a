"""``--help`` and the docs name the same flags: every option of every command and subcommand
is in the README's option list, and every ``kafka-chaos`` flag the docs write is an option.

The docs are ``README.md`` and ``docs/*.md`` as markdown-it reads them, and only their code
(inline spans, fenced and indented blocks), where each flag belongs to the program of its
simple command. It is this tool's after ``kafka-chaos`` (any path to it, after ``sudo`` or
``VAR=value``) or one of its command names (``compare --resume DIR``), and when it starts
the code (``--keep-topics``); after another program (``spark-submit``, ``bench/*.py``,
``javac``) it is that program's, unless ``kafka-chaos`` comes later in the command (a YAML
``run:`` step, ``farm-bench -- kafka-chaos``).

The README's Commands table is the option list: a row per command, named in its first cell,
and every flag of the command in the row.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import typer
from markdown_it import MarkdownIt

from kafka_chaos.cli import app

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: Flags that start their code and are another program's: the only ones the rule above
#: cannot place, each with its program (named in the prose around it).
NOT_OURS = {
    ("docs/attach.md", "--command-config"): "Kafka's own command-line tools",
    ("docs/performance.md", "--sizes"): "bench/analysis_bench.py, whose figures the page holds",
    ("docs/performance.md", "--python"): "bench/analysis_bench.py, whose figures the page holds",
}

#: a flag, whole (``--no-`` alone is a prefix, not a flag)
FLAG = re.compile(r"--[a-z][a-z0-9]*(?:-[a-z0-9]+)*(?![\w-])")
#: what may stand before the program of a command line
PREFIX = re.compile(r"sudo|env|time|nohup|exec|[A-Za-z_][A-Za-z0-9_]*=\S*")
SEPARATORS = {"&&", "||", "|", ";"}
SUBSTITUTION = re.compile(r"\$\(([^()]*)\)")

CommandPath = tuple[str, ...]


@dataclass(frozen=True)
class Mention:
    """A ``flag`` of this tool in the docs, in ``file`` (``docs/report.md``) at ``line``,
    written ``after`` these commands (none: a bare flag, which may be any command's), in a
    table ``row`` whose first cell names these commands."""

    flag: str
    file: str
    line: int
    after: tuple[CommandPath, ...]
    row: tuple[CommandPath, ...]


def commands() -> dict[CommandPath, Any]:
    """Every command and group of the CLI by its path (``()`` the root, ``("cluster",
    "up")``), as click builds it."""
    found: dict[CommandPath, Any] = {}

    def walk(command: Any, path: CommandPath) -> None:
        found[path] = command
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, path + (name,))
    walk(typer.main.get_command(app), ())
    return found


def options(command: Any) -> set[str]:
    """Every flag a command takes, ``--no-x`` forms and ``--help`` included."""
    return {flag for p in command.params if p.param_type_name == "option"
            for flag in (*p.opts, *p.secondary_opts)} | {"--help"}


def needed(command: Any) -> list[str]:
    """The flags of a command the option list must name: each option's, and the ``--no-x``
    form of a switch whose default is not off (``--idempotence``: unset is the client's)."""
    return sorted({p.opts[0] for p in command.params if p.param_type_name == "option"}
                  | {p.secondary_opts[0] for p in command.params
                     if getattr(p, "secondary_opts", None) and p.default is not False})


def _resolve(starts: list[CommandPath], words: list[str],
             tree: dict[CommandPath, Any]) -> list[CommandPath]:
    """The command paths ``words`` lead to from ``starts``: each word a subcommand, or
    alternatives (``start|stop|status``); the first word that is none is an argument."""
    paths = starts
    for word in words:
        longer = [p + (w,) for p in paths for w in word.split("|") if p + (w,) in tree]
        if not longer:
            break
        paths = longer
    return paths


def _simple(words: list[str], tree: dict[CommandPath, Any]
            ) -> tuple[list[CommandPath], list[str]] | None:
    """The command paths and flags of one simple command: ``([], flags)`` for bare flags,
    None for another program's."""
    words = [w.strip("\"'[](){}") for w in words]
    while words and PREFIX.fullmatch(words[0]):
        words = words[1:]
    ours = [i for i, w in enumerate(words) if w.rsplit("/", 1)[-1] == "kafka-chaos"
            or (w == "kafka_chaos" and words[i - 1] == "-m")]
    named = [p for p in tree if p and words and p[-1] == words[0]]
    if ours:
        starts, rest = [()], words[ours[0] + 1:]
    elif words and words[0].startswith("--"):
        starts, rest = [], words
    elif named:
        starts, rest = named, words[1:]
    else:
        return None
    paths = _resolve(starts, [w for w in rest if not w.startswith("-")], tree)
    return paths, [m.group() for w in rest if (m := FLAG.match(w))]


def command_lines(code: str, tree: dict[CommandPath, Any]
                  ) -> Iterator[tuple[list[CommandPath], list[str]]]:
    """This tool's simple commands in a line of code (``$(...)`` ones too), each as its
    command paths and flags."""
    while (inner := SUBSTITUTION.search(code)) is not None:
        yield from command_lines(inner.group(1), tree)
        code = code[:inner.start()] + "OUTPUT" + code[inner.end():]
    words: list[str] = []
    for word in [*code.split(), ";"]:
        comment = word.startswith("#")
        if not comment and word not in SEPARATORS:
            words.append(word)
            continue
        if (simple := _simple(words, tree)) is not None:
            yield simple
        if comment:
            return
        words = []


def _code(path: Path) -> Iterator[tuple[int, str, tuple[str, ...]]]:
    """Every piece of code of a markdown file: (its line, its text, the code of the first
    cell of its table row: none outside tables). A block is one text per line, a line
    ending in ``\\`` joined to the next."""
    lines = path.read_text().splitlines()
    cells: list[str] | None = None
    first: tuple[str, ...] = ()
    for token in MarkdownIt("commonmark").enable("table").parse("\n".join(lines)):
        if token.type == "tr_open":
            cells = []
        elif token.type == "tr_close":
            cells, first = None, ()
        elif token.type in ("fence", "code_block"):
            begun, joined = None, ""
            for n, text in enumerate(token.content.splitlines(),
                                     token.map[0] + (2 if token.type == "fence" else 1)):
                begun, joined = begun or n, joined + text.removesuffix("\\") + " "
                if not text.endswith("\\"):
                    yield begun, joined, ()
                    begun, joined = None, ""
        elif token.type == "inline":
            spans = tuple(c.content for c in token.children or [] if c.type == "code_inline")
            if cells is not None:
                cells.append(token.content)
                first = spans if len(cells) == 1 else first
            for span in spans:  # on the line where it starts (a wrapped one: the paragraph's)
                yield next((n + 1 for n in range(*token.map) if span[:20] in lines[n]),
                           token.map[0] + 1), span, first


def mentions() -> list[Mention]:
    """Every flag of this tool the docs write (``NOT_OURS`` among them)."""
    tree = commands()
    found = []
    for path in DOCS:
        name = path.relative_to(ROOT).as_posix()
        for line, code, first in _code(path):
            row = tuple(p for text in first for paths, _ in command_lines(text, tree)
                        for p in paths)
            for paths, flags in command_lines(code, tree):
                found += [Mention(flag, name, line, tuple(paths), row) for flag in flags]
    return found


def _named(path: CommandPath) -> str:
    return " ".join(("kafka-chaos", *path))


#: The commands that take every ``run`` option besides their own.
PASS_ON = {("compare",), ("bisect",)}


def test_every_flag_the_docs_write_is_an_option_of_its_command() -> None:
    """A flag after ``compare`` or ``bisect`` may also be any ``run`` option (it sets every
    run's configuration)."""
    tree = commands()
    anywhere = set().union(*map(options, tree.values()))
    found = mentions()
    wrong = [f"NOT_OURS{key}: no longer in the docs, remove it" for key in NOT_OURS
             if key not in {(m.file, m.flag) for m in found}]
    for m in found:
        if (m.file, m.flag) in NOT_OURS:
            continue
        valid = set().union(*(options(tree[p]) | (options(tree[("run",)]) if p in PASS_ON
                                                   else set()) for p in m.after)) or anywhere
        if m.flag not in valid:
            wrong.append(f"{m.file}:{m.line}: {m.flag} is no option of "
                         f"{' or '.join(map(_named, m.after)) or 'any command'}: fix the doc, "
                         "or the flag's name in the code")
    assert not wrong, "\n".join(wrong)


def test_every_option_of_every_command_is_in_the_readmes_commands_table() -> None:
    """A flag written after a command documents it for that command; a bare flag, for each
    command the first cell of its row names."""
    tree = commands()
    rows = {p for _, _, first in _code(ROOT / "README.md") for text in first
            for paths, _ in command_lines(text, tree) for p in paths}
    missing = [f"{_named(path)}: no row of the README's Commands table names it"
               for path, command in tree.items()
               if not hasattr(command, "commands") and path not in rows]
    documented = {(p, m.flag) for m in mentions() if m.file == "README.md"
                  for p in m.after or m.row if m.row}
    missing += [f"{_named(path)} {flag}: not in the command's row of the README's Commands "
                "table (its option list)"
                for path, command in tree.items() for flag in needed(command)
                if (path, flag) not in documented]
    assert len(tree) >= 21, sorted(tree)  # every command and group was walked
    assert not missing, "\n".join(missing)


def test_no_help_text_shows_a_source_file_or_markup() -> None:
    """A user reads docs and commands in ``--help``: never a ``.py`` path, a module or
    docstring markup (typer prints ``x`` as is)."""
    # not ``history``: history.jsonl is a file the user reads
    source = re.compile(r"\w\.py\b|``|\b(kafka_chaos|clusters|analysis|nemesis|workloads)"
                        r"[./][a-z_]")
    shown = [f"{_named(path)} {where}: {found.group()!r} in {text!r}"
             for path, command in commands().items()
             for where, text in [("help", command.help), ("epilog", command.epilog),
                                 *[(p.opts[0] if p.param_type_name == "option" else p.name,
                                    getattr(p, "help", None)) for p in command.params]]
             if text and (found := source.search(text))]
    assert not shown, "\n".join(shown)
