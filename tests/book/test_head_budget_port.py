"""book_static/head_budget.js, the head-budget calculator's JavaScript port (issue 27), against the Python it ports.

The port runs in headless Chromium (a small page served over HTTP, as the book is); every configuration goes to
both manyheads.costs.head_budget and manyheads.viz.widgets.head_budget_html and to their ports, and the numbers, the
error (class and message) and the whole HTML must be the same. A port with one wrong formula, rounding or message
(a planted mutant) must fail the same comparison.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict
from pathlib import Path

import pytest
from helpers.browser import CHROMIUM, serve

from manyheads.costs import head_budget
from manyheads.course.layout import REPO
from manyheads.viz.widgets import head_budget_html

PORT = REPO.root / "book_static" / "head_budget.js"
HTML_ARGS = ("d_model", "n_heads", "n_kv_heads", "seq_len", "n_layers", "batch")

# Runs every configuration through the port; returns, per configuration, the budget (integers as decimal strings)
# or the error's class and message, and the HTML.
RUN_PORT = """(configs) => configs.map(({budget, html}) => {
  const costs = window.manyheadsCosts;
  let b;
  try {
    const r = costs.headBudget(budget);
    b = {ok: Object.fromEntries(Object.entries(r).map(([k, v]) => [k, typeof v === 'bigint' ? v.toString() : v]))};
  } catch (e) {
    b = {error: e.name, message: e.message};
  }
  return {budget: b, html: costs.headBudgetHtml(html)};
})"""


def _python(config: dict) -> dict:
    try:
        found = asdict(head_budget(**config["budget"]))
        budget = {"ok": {k: v if isinstance(v, bool) else str(v) for k, v in found.items()}}
    except ValueError as exc:
        budget = {"error": "ValueError", "message": str(exc)}
    return {"budget": budget, "html": head_budget_html(**config["html"])}


def _divisor(rng: random.Random, n: int) -> int:
    return rng.choice([d for d in range(1, n + 1) if n % d == 0])


def _not_an_int(rng: random.Random):
    """What a caller may pass by mistake; integer-valued floats are left out: JSON (and JavaScript) cannot tell
    1024.0 from 1024, and the page's boxes hold integers only."""
    return rng.choice([rng.randint(1, 4096) + 0.5, 1e-05, 3.25e-07, 0.0001, "512", "abc", True, False, None])


def configurations(count: int = 320, seed: int = 27) -> list[dict]:
    """Random configurations, about half valid; ``kind`` says which: valid, or which check it should fail."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        d_head = rng.choice([1, 2, 3, 8, 16, 32, 48, 64, 80, 96, 128, 256])
        n_heads = rng.choice([1, 2, 3, 4, 6, 8, 9, 12, 16, 32, 40, 64, 96, 128])
        config = {
            "d_model": d_head * n_heads,
            "n_heads": n_heads,
            "n_kv_heads": _divisor(rng, n_heads),
            "seq_len": rng.choice([1, 7, 64, 100, 512, 1000, 1024, 4096, 8192, 131072, 1_048_576]),
            "n_layers": rng.choice([1, 1, 2, 12, 30, 32, 80, 96, 256]),
            "batch": rng.choice([1, 1, 2, 3, 8, 64, 4096]),
        }
        kind = "valid"
        if i % 2:
            kind = rng.choice(["zero or negative", "not an int", "n_heads does not divide", "n_kv does not divide"])
            if kind == "zero or negative":
                config[rng.choice(HTML_ARGS)] = rng.choice([0, -1, -rng.randint(2, 10_000)])
            elif kind == "not an int":
                argument = rng.choice(HTML_ARGS)
                value = _not_an_int(rng)
                config[argument] = 0.5 if value is None and argument == "n_kv_heads" else value  # None: the default
            elif kind == "n_heads does not divide":
                config["d_model"] = rng.choice([7, 100, 511, 513, 1000, 4097, 65535])
                config["n_heads"] = rng.choice([2, 3, 6, 8, 16, 64])
                if config["d_model"] % config["n_heads"] == 0:
                    config["d_model"] += 1
            else:
                config["n_kv_heads"] = n_heads + rng.randint(1, 5) if rng.random() < 0.5 else 0
                if n_heads > 2 and rng.random() < 0.5:
                    config["n_kv_heads"] = next(k for k in range(2, n_heads + 1) if n_heads % k)
        elif rng.random() < 0.15:
            config["n_kv_heads"] = None  # the default: as many K/V heads as query heads
        budget = dict(config)
        if kind == "valid" and rng.random() < 0.3:  # the arguments the widget leaves at their defaults
            budget["bias"] = rng.choice([True, False])
            budget["attention_bytes"] = rng.choice([1, 2, 4, 8])
            budget["cache_bytes"] = rng.choice([1, 2, 4])
        elif kind == "not an int" and rng.random() < 0.3:
            budget[rng.choice(["attention_bytes", "cache_bytes"])] = rng.choice([0, -2, 1.5, "2"])
            kind = "not an int"
        out.append({"kind": kind, "budget": budget, "html": config})
    return out


def in_chromium(source: str, tmp: Path, script: str, argument: object) -> tuple[object, list[str]]:
    """``script(argument)`` evaluated in Chromium on a page that loads ``source`` (the port's JavaScript) over HTTP;
    returns its result and the page's console errors."""
    from playwright.sync_api import sync_playwright

    if CHROMIUM is None:
        pytest.fail("headless Chromium is needed for this test: apt-get install chromium (make test does it as root)")
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "head_budget.js").write_text(source, encoding="utf-8")
    page_html = (
        '<!doctype html><meta charset="utf-8"><link rel="icon" href="data:,"><script src="head_budget.js"></script>'
    )
    (tmp / "index.html").write_text(page_html, encoding="utf-8")
    errors: list[str] = []
    with serve(tmp) as root, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page()
            page.on("console", lambda m: m.type == "error" and errors.append(m.text))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(root + "index.html", wait_until="load")
            result = page.evaluate(script, argument)
        finally:
            browser.close()
    return result, errors


def mismatches(source: str, configs: list[dict], tmp: Path) -> list[str]:
    """Every configuration where the port (``source``) and Python disagree, said in one line each."""
    answers, errors = in_chromium(source, tmp, RUN_PORT, [{"budget": c["budget"], "html": c["html"]} for c in configs])
    found = [f"console: {e}" for e in errors]
    for config, js in zip(configs, answers, strict=True):
        py = _python(config)
        for part in ("budget", "html"):
            if js[part] != py[part]:
                found.append(f"{config['kind']} {json.dumps(config[part])}: {part} python {py[part]} != js {js[part]}")
    return found


@pytest.fixture(scope="module")
def configs() -> list[dict]:
    return configurations()


@pytest.mark.browser
def test_the_port_gives_python_s_numbers_errors_and_html_on_random_configurations(configs, tmp_path):
    kinds = [c["kind"] for c in configs]
    valid = kinds.count("valid")
    print(
        f"{len(configs)} configurations: {valid} valid, {len(configs) - valid} invalid",
        {k: kinds.count(k) for k in set(kinds)},
    )
    assert valid >= 100 and len(configs) - valid >= 100
    assert all(("error" in _python(c)["budget"]) == (c["kind"] != "valid") for c in configs), "a config's kind is wrong"
    assert mismatches(PORT.read_text(encoding="utf-8"), configs, tmp_path) == []


# Python rounds half to even (1,152 bytes are "1.12 KiB", 1.125 exactly) and 999.9e9 FLOPs are "1e+03 G"; the second
# configuration's attention weights are 1,152 bytes, the third is wrong twice (d_model is the one Python names).
EDGES = [
    {"kind": "edge", "budget": {"d_model": 1, "n_heads": 1}, "html": {"d_model": 1, "n_heads": 1}},
    {
        "kind": "edge",
        "budget": {"d_model": 2, "n_heads": 2, "seq_len": 12},
        "html": {"d_model": 2, "n_heads": 2, "seq_len": 12},
    },
    {
        "kind": "edge",
        "budget": {"d_model": 0, "n_heads": 8, "batch": 0},
        "html": {"d_model": 0, "n_heads": 8, "batch": 0},
    },
    {
        "kind": "edge",
        "budget": {"d_model": 65536, "n_heads": 4096},
        "html": {"d_model": 65536, "n_heads": 1, "n_kv_heads": 1, "seq_len": 1_048_576, "n_layers": 256, "batch": 4096},
    },
]


@pytest.mark.browser
def test_the_port_formats_and_rounds_as_python_at_the_edges(tmp_path):
    from manyheads.viz.tables import format_bytes, format_count

    assert format_bytes(1152) == "1.12 KiB" and format_count(999_900_000_000) == "1e+03 G"  # what the port must say
    probe = "(ns) => ns.map(n => [manyheadsCosts.formatBytes(BigInt(n)), manyheadsCosts.formatCount(BigInt(n))])"
    numbers = [
        0,
        1,
        999,
        1000,
        1023,
        1024,
        1152,
        1153,
        2560,
        99_950,
        999_500,
        999_900_000_000,
        2**53 + 1,
        3 * 2**61,
        10**22 + 5,
        123_456_789_012_345_678_901,
    ]
    numbers += [random.Random(n).randrange(1, 10 ** random.Random(-n).randint(1, 24)) for n in range(200)]
    shown, errors = in_chromium(PORT.read_text(encoding="utf-8"), tmp_path, probe, [str(n) for n in numbers])
    assert errors == []
    assert [tuple(s) for s in shown] == [(format_bytes(n), format_count(n)) for n in numbers]
    assert mismatches(PORT.read_text(encoding="utf-8"), EDGES, tmp_path / "edges") == []


# Planted faults, each a one-place change of the port: a formula off by one, a constant off by one, rounding half up
# instead of half to even, a message that names another value, a check made in another order.
MUTANTS = {
    "kv cache off by one": (
        "return 2n * nLayers * nKvHeads * dHead * seqLen * batch * size;",
        "return 2n * nLayers * nKvHeads * dHead * seqLen * batch * size + 1n;",
    ),
    "softmax constant off by one": ("var softmax = 5n *", "var softmax = 6n *"),
    "rounding half up": ("(twice === d && q % 2n === 1n)", "(twice === d)"),
    "message off by one": (
        '"n_kv_heads=" + nKvHeads + " does not divide',
        '"n_kv_heads=" + (nKvHeads + 1n) + " does not divide',
    ),
    "batch checked first": (
        'var batch = given(args, "batch", 1);\n    var bias',
        'var batch = positiveInt("batch", given(args, "batch", 1));\n    var bias',
    ),
}


@pytest.mark.browser
@pytest.mark.parametrize("mutant", MUTANTS, ids=list(MUTANTS))
def test_a_port_with_a_planted_fault_fails_the_comparison(configs, tmp_path, mutant):
    before, after = MUTANTS[mutant]
    source = PORT.read_text(encoding="utf-8")
    assert source.count(before) == 1, f"the mutant {mutant!r} no longer applies: update it to the port"
    found = mismatches(source.replace(before, after), configs + EDGES, tmp_path)
    assert found, f"the comparison did not notice {mutant!r}"
