# Two jobs, each sets up its own environment first (README): `make book` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: book test env vendor browser exercises clean-notebooks benchmarks clean

# Reinstall only when the pinned list or the package metadata change.
$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

env: $(STAMP)

# Build the book into _build/html, executing the chapters (cached in _build/.jupyter_cache); any warning fails it.
book: $(STAMP) vendor
	$(BIN)/jupyter-book build . -W -n --keep-going

# The JavaScript the pages need (MathJax, require.js, the widget manager), pinned and checked, into _vendor/.
vendor:
	$(BIN)/python assets/vendor.py

# Every test: package, notebook hygiene, exercise pipeline with real nbgrader, chapter execution.
test: $(STAMP) vendor browser
	$(BIN)/python -m pytest -n 2 --dist loadfile --timeout=1800

# Headless Chromium from Debian, for the tests that open built pages.
browser:
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && apt-get update -qq && apt-get install -y -qq chromium >/dev/null; } \
	  || { echo "Install Debian's chromium package (sudo apt-get install chromium) and run make test again"; exit 1; }

# Regenerate the student versions in exercises/ from the nbgrader sources in solutions/.
exercises: $(STAMP)
	$(BIN)/python -m manyheads.release

# Canonical JSON, no outputs, Colab set-up cell first, for chapters/ and solutions/.
clean-notebooks: $(STAMP)
	$(BIN)/python -m manyheads.hygiene clean

benchmarks: $(STAMP)
	for b in benchmarks/[!_]*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf _build
