"""A Sphinx extension for the book: each page loads each script once.

sphinx-thebe 0.3 adds its inline configuration (``const THEBE_JS_URL = ...``) every time Sphinx emits
``env-before-read-docs``, which happens more than once in a Jupyter Book build; the page then declares the same
``const`` twice and the browser reports "Uncaught SyntaxError: Identifier 'THEBE_JS_URL' has already been declared".
Dropping duplicates (same file or inline body, same attributes) leaves every page with one copy.
"""

from __future__ import annotations


def _drop_duplicate_scripts(app, pagename, templatename, context, doctree) -> None:
    scripts = context.get("script_files")
    if isinstance(scripts, list):
        # Compare what the page gets: the file, or the inline body (an attribute), and the other attributes. Copies of
        # one inline script may name their absent file differently (None or "").
        seen, unique = set(), []
        for script in scripts:
            key = (str(script.filename or ""), tuple(sorted(script.attributes.items())))
            if key not in seen:
                seen.add(key)
                unique.append(script)
        context["script_files"] = unique


def setup(app):
    app.connect("html-page-context", _drop_duplicate_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
