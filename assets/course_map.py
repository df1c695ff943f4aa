"""Draw the course map: the data flow of one multi-head attention layer, with each chapter pinned to the box it
takes apart. Writes assets/course_map.svg, shown on the landing page (intro.md, section "Course map").

Run `.venv/bin/python assets/course_map.py` after changing the drawing and commit the SVG;
tests/book/test_course_frame.py redraws it and fails if the committed file is out of date.
The output is byte-for-byte reproducible: no date in the metadata, a fixed hash salt, text kept as text.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

SVG = Path(__file__).with_suffix(".svg")

# Okabe-Ito colours (safe for the common colour-vision deficiencies); every box is also labelled in words.
FILL = {"data": "#FFFFFF", "proj": "#E8F1FA", "head": "#FDF0D9", "merge": "#E5F4EE", "gate": "#F7E6EF"}
EDGE = {"data": "#555555", "proj": "#0072B2", "head": "#E69F00", "merge": "#009E73", "gate": "#CC79A7"}

# (key, y centre, kind, title, detail). The y axis runs downwards, in the order the data flows.
BOXES = [
    ("input", 0.5, "data", "input $X$", "(batch, seq, d_model)"),
    ("proj", 1.7, "proj", "projections", r"$Q = XW_Q,\;\; K = XW_K,\;\; V = XW_V$"),
    ("split", 2.9, "merge", "split into $h$ heads", r"$d_k = d_\mathrm{model}\,/\,h$ dimensions each"),
    ("heads", 4.35, "head", "attention in every head", r"softmax($Q_m K_m^\top$ / √$d_k$) $V_m$,  $m = 1, \dots, h$"),
    ("gates", 5.8, "gate", r"head gates $\xi_m$", "1 keeps a head, 0 removes it"),
    ("concat", 7.0, "merge", "concatenate the heads", "(batch, seq, h · d_head)"),
    ("out", 8.2, "proj", r"output projection $W_O$", "back to (batch, seq, d_model)"),
    ("stack", 9.4, "data", "residual stream, next layer", "the same block, layer after layer"),
]

# Chapter badges: (label, box key). The interlude is "i".
BADGES = [
    ("1", "heads"),
    ("2", "proj"),
    ("3", "split"),
    ("3", "concat"),
    ("4", "heads"),
    ("5", "gates"),
    ("i", "heads"),
    ("6", "stack"),
    ("7", "proj"),
]

WIDTH = 6.4  # box width in data units; the figure is 8 x 10 units


def draw() -> plt.Figure:
    """The course map as a matplotlib figure."""
    fig, ax = plt.subplots(figsize=(7.2, 9.0))
    ax.set_xlim(0, 8)
    ax.set_ylim(10.1, -0.2)
    ax.axis("off")
    x0 = 0.4
    for key, y, kind, title, detail in BOXES:
        height = 1.2 if key == "heads" else 0.8
        if key == "heads":
            # The h heads run side by side: draw three stacked cards behind the box.
            for k in (2, 1):
                ax.add_patch(
                    FancyBboxPatch(
                        (x0 + 0.12 * k, y - height / 2 - 0.12 * k),
                        WIDTH,
                        height,
                        boxstyle="round,pad=0.02,rounding_size=0.12",
                        facecolor=FILL[kind],
                        edgecolor=EDGE[kind],
                        linewidth=1.2,
                    )
                )
        ax.add_patch(
            FancyBboxPatch(
                (x0, y - height / 2),
                WIDTH,
                height,
                boxstyle="round,pad=0.02,rounding_size=0.12",
                facecolor=FILL[kind],
                edgecolor=EDGE[kind],
                linewidth=2.0,
            )
        )
        ax.text(x0 + WIDTH / 2, y - 0.14, title, ha="center", va="center", fontsize=14, fontweight="bold")
        ax.text(x0 + WIDTH / 2, y + 0.2, detail, ha="center", va="center", fontsize=12)
    centres = {key: y for key, y, *_ in BOXES}
    for (key_a, y_a, *_), (key_b, y_b, *_) in zip(BOXES, BOXES[1:]):
        top = y_a + (0.6 if key_a == "heads" else 0.4)
        bottom = y_b - (0.6 if key_b == "heads" else 0.4) - (0.26 if key_b == "heads" else 0.0)
        ax.add_patch(
            FancyArrowPatch(
                (x0 + WIDTH / 2, top + 0.03),
                (x0 + WIDTH / 2, bottom - 0.03),
                arrowstyle="-|>",
                mutation_scale=16,
                color="#333333",
                linewidth=1.5,
            )
        )
    # Badges sit in a column at the right edge, several per box when several chapters share it.
    per_box: dict[str, int] = {}
    for label, key in BADGES:
        k = per_box.get(key, 0)
        per_box[key] = k + 1
        bx, by = x0 + WIDTH + 0.55 + 0.0 * k, centres[key] - 0.32 + 0.42 * k
        if key == "heads":
            by -= 0.1
        ax.add_patch(plt.Circle((bx, by), 0.19, facecolor="#000000", edgecolor="none"))
        ax.text(bx, by, label, ha="center", va="center", fontsize=12, fontweight="bold", color="#FFFFFF")
    ax.text(
        x0,
        10.0,
        "numbered circles: the chapters (i = interlude) that take that box apart",
        ha="left",
        va="center",
        fontsize=11,
        style="italic",
    )
    return fig


def render() -> bytes:
    """The SVG bytes, reproducibly: fixed hash salt, no date, text as text."""
    with matplotlib.rc_context({"svg.hashsalt": "manyheads-course-map", "svg.fonttype": "none"}):
        fig = draw()
        buffer = io.BytesIO()
        fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
        plt.close(fig)
    return buffer.getvalue()


def main() -> int:
    SVG.write_bytes(render())
    print(f"wrote {SVG}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
