"""A Sphinx extension for the book: pages that moved keep their old address.

``manyheads_redirects`` (in _config.yml) maps an old page name to its new one, both without ``.html``. After the build,
each old name gets a small page that sends the reader on (a meta refresh, so it works without JavaScript, and a link
for anyone whose browser does not follow it) and tells search engines where the page lives now. Links that readers
bookmarked or shared, and other sites' links to the published book, keep working.
"""

from __future__ import annotations

import html
import os
from pathlib import Path

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>This page has moved</title>
<meta http-equiv="refresh" content="0; url={url}">
<link rel="canonical" href="{url}">
<meta name="robots" content="noindex">
</head>
<body>
<p>This page has moved to <a href="{url}">{url}</a>.</p>
</body>
</html>
"""


def redirect_page(old: str, new: str) -> str:
    """The HTML written at ``old``.html: a relative link to ``new``.html, so the book works under any base URL."""
    url = os.path.relpath(f"{new}.html", start=os.path.dirname(old) or ".").replace(os.sep, "/")
    return PAGE.format(url=html.escape(url, quote=True))


def _write_redirects(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    write_redirects(Path(app.outdir), app.config.manyheads_redirects, app.env.found_docs)


def write_redirects(out: Path, moved: dict[str, str], pages: set[str]) -> None:
    """Write each redirect page into ``out``. ``pages``: the names Sphinx built from a source; an old name among them
    is a real page. A file already at an old name is the redirect of the last build (``make book`` again), rewritten."""
    for old, new in moved.items():
        if old in pages:
            raise RuntimeError(f"redirect {old} -> {new}: {old} is a real page; remove the redirect or the page")
        target = out / f"{old}.html"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(redirect_page(old, new), encoding="utf-8")


def setup(app):
    app.add_config_value("manyheads_redirects", {}, "html")
    app.connect("build-finished", _write_redirects)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
