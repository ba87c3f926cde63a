"""Markdown tables as a reader renders them (markdown-it, GitHub's table syntax): the rows
of every table in a text, each a list of its cells' text."""

from __future__ import annotations

from markdown_it import MarkdownIt


def markdown_rows(text: str) -> list[list[str]]:
    """Every row of every table in ``text`` (header rows included), cells as plain text (the
    content of inline code kept, markup dropped). A line that is not a well-formed table
    row yields no row."""
    rows: list[list[str]] = []
    for token in MarkdownIt("commonmark").enable("table").parse(text):
        if token.type == "tr_open":
            rows.append([])
        elif token.type == "inline" and rows is not None and token.level >= 3:
            rows[-1].append("".join(c.content for c in token.children or []
                                    if c.type in ("text", "code_inline")))
    return rows
