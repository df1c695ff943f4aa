"""The grader's HTML pages from Jinja2 templates (``templates/``), with Markdown rendered by markdown-it-py: every
value is escaped by the template, never by hand, and no raw HTML in a Markdown line reaches the page."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import jinja2
from markdown_it import MarkdownIt
from markupsafe import Markup

TEMPLATES = Path(__file__).resolve().parent / "templates"


def _column_header(renderer, tokens, idx, options, env) -> str:
    tokens[idx].attrSet("scope", "col")  # a screen reader reads each cell with its column's name
    return renderer.renderToken(tokens, idx, options, env)


@cache
def _markdown() -> MarkdownIt:
    """CommonMark with pipe tables and no raw HTML; a table scrolls sideways on a narrow screen, not the page."""
    md = MarkdownIt("commonmark", {"html": False, "breaks": True}).enable("table")
    md.add_render_rule("table_open", lambda *args: '<div class="scroll"><table>\n')
    md.add_render_rule("table_close", lambda *args: "</table></div>\n")
    md.add_render_rule("th_open", _column_header)
    return md


def markdown(text: str) -> Markup:
    """Markdown blocks (headings, paragraphs, lists, pipe tables) as HTML; the text's own HTML is escaped."""
    return Markup(_markdown().render(text))


def markdown_inline(text: str) -> Markup:
    """One line of Markdown (`code`, **bold**) as inline HTML, escaped."""
    return Markup(_markdown().renderInline(text))


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,  # every page is HTML
        undefined=jinja2.StrictUndefined,  # a name the code forgot to pass is an error, not an empty cell
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["markdown"] = markdown
    env.filters["g"] = lambda value: f"{value:g}"  # a number as short as it is exact: 2, 0.5
    env.filters["mean"] = lambda value, none="": none if value is None else f"{value:.2f}"
    env.filters["md"] = markdown_inline
    return env


def render(template: str, **context) -> str:
    """The page ``templates/<template>`` filled with ``context``."""
    return environment().get_template(template).render(**context)
