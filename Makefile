# Shardscope — `make run` serves the app, `make test` runs every test, `make bench` measures,
# `make docs` builds the documentation site into site/.
# Each target installs what it needs into .venv and static/vendor first; a second run only
# re-installs when pyproject.toml or package-lock.json changed.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
HOST   ?= 127.0.0.1
PORT   ?= 8000
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run test bench docs setup setup-test browser nginx export-deps clean

run: setup
	HOST=$(HOST) PORT=$(PORT) $(VENV)/bin/shardscope serve

setup: export-deps $(VENV)/.installed-app static/vendor/htmx.min.js static/vendor/swagger-ui/swagger-ui-bundle.js

setup-test: setup $(VENV)/.installed-test $(VENV)/.installed-docs browser nginx static/vendor/axe.min.js

test: setup-test
	$(PY) -m pytest

# The site is built offline (no CDN, no web fonts: mkdocs.yml); tests/docs/ builds it again
# under `make test` and holds its links, so CI checks the docs too.
docs: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

bench: setup-test
	@command -v wrk >/dev/null 2>&1 || $(SUDO) apt-get install -y wrk || ($(SUDO) apt-get update && $(SUDO) apt-get install -y wrk)
	$(PY) -m bench.run

$(VENV)/bin/python:
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is needed"'
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed-app: pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install --quiet --disable-pip-version-check -e .
	touch $@

# torch is pinned to 2.13.0: an unpinned torch would pull a multi-GB CUDA build.
$(VENV)/.installed-test: pyproject.toml $(VENV)/.installed-app
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[verify,test]'
	touch $@

$(VENV)/.installed-docs: pyproject.toml $(VENV)/.installed-app
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[docs]'
	touch $@

# htmx and Swagger UI (for /api/docs) come from the npm registry (package.json +
# package-lock.json) and are served from our origin: no CDN at run time.
node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

static/vendor/htmx.min.js: node_modules/.installed
	mkdir -p static/vendor
	cp node_modules/htmx.org/dist/htmx.min.js static/vendor/htmx.min.js

static/vendor/swagger-ui/swagger-ui-bundle.js: node_modules/.installed
	mkdir -p static/vendor/swagger-ui
	cp node_modules/swagger-ui-dist/swagger-ui-bundle.js node_modules/swagger-ui-dist/swagger-ui.css \
	   static/vendor/swagger-ui/

# axe-core (a devDependency) checks the pages' accessibility in the browser tests
# (tests/browser/test_a11y.py): copied for the tests only; no page of the app loads it.
static/vendor/axe.min.js: node_modules/.installed
	mkdir -p static/vendor
	cp node_modules/axe-core/axe.min.js static/vendor/axe.min.js

# Browser tests drive Debian's Chromium; elsewhere tests fall back to Playwright's own browser.
browser:
	@if [ ! -x /usr/bin/chromium ]; then \
	  if command -v apt-get >/dev/null 2>&1; then \
	    $(SUDO) apt-get install -y chromium fonts-dejavu-core || \
	    ($(SUDO) apt-get update && $(SUDO) apt-get install -y chromium fonts-dejavu-core); \
	  else echo "No /usr/bin/chromium: browser tests will use 'playwright install chromium'."; fi; \
	fi

# The proxy in front of the workers (deploy/nginx.conf): tests/api/test_proxy_cache.py starts it
# on loopback, bench/hall.py measures a class behind it. Debian's nginx; its service is not used.
nginx:
	@if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then \
	  if command -v apt-get >/dev/null 2>&1; then \
	    $(SUDO) apt-get install -y nginx || ($(SUDO) apt-get update && $(SUDO) apt-get install -y nginx); \
	  else echo "No nginx: the proxy tests are skipped (install nginx with your package manager)."; fi; \
	fi

# Exports (app/export/) set text in DejaVu Sans, the first font of every deck's font stack, so
# exported pixels look like the page and −, ×, ≤, Greek letters and subscripts have glyphs;
# CairoSVG (SVG → vector PDF) needs Debian's libcairo2.
export-deps:
	@if [ ! -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || ! (ldconfig -p 2>/dev/null | grep -q 'libcairo.so.2 '); then \
	  if command -v apt-get >/dev/null 2>&1; then \
	    $(SUDO) apt-get install -y fonts-dejavu-core libcairo2 || \
	    ($(SUDO) apt-get update && $(SUDO) apt-get install -y fonts-dejavu-core libcairo2); \
	  else echo "Exports need the DejaVu Sans font and libcairo2: install them with your package manager."; fi; \
	fi

clean:
	rm -rf $(VENV) node_modules static/vendor .pytest_cache .hypothesis site
