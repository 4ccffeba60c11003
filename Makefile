# Two entry points for people: `make dev` and `make test`. Everything else is plumbing.
VENV ?= .venv
PY := $(VENV)/bin/python
UV_VERSION := 0.13.8
STAMP := $(VENV)/.installed

.PHONY: dev test install lint typecheck pytest lock crds bench tools browser vendor clean

# Create the virtualenv from the lock file; re-run only when the inputs change. It is byte-compiled once:
# with PYTHONDONTWRITEBYTECODE set (as on CI) every process would otherwise recompile Ray, kubernetes and
# our modules from source (~1 s per subprocess the tests start).
$(STAMP): pyproject.toml requirements.lock
	python3 -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --disable-pip-version-check uv==$(UV_VERSION)
	$(VENV)/bin/uv pip install -q --python $(PY) -r requirements.lock
	$(VENV)/bin/uv pip install -q --python $(PY) --no-deps -e .
	$(PY) -m compileall -q -j 0 $(VENV)/lib kaiwo_ray actors serve >/dev/null || true
	touch $(STAMP)

install: $(STAMP)

# kubectl drives the sandbox in the CLI tests; install Debian's client when none is on PATH.
tools:
	@command -v kubectl >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && apt-get install -y -qq kubernetes-client >/dev/null) || echo "kubectl unavailable: its tests will skip"; \
	  else echo "kubectl unavailable: its tests will skip"; fi; }

# The dashboard's chart library, vendored from its npm package at build time (never a CDN at run time).
CHARTJS_VERSION := 4.6.1
VENDOR_DIR := serve/static/vendor
$(VENDOR_DIR)/chart.umd.min.js:
	@command -v npm >/dev/null 2>&1 || { echo "npm unavailable: the dashboard has no charts and its browser tests skip"; exit 0; }; \
	mkdir -p $(VENDOR_DIR) && cd $(VENDOR_DIR) && npm pack --silent chart.js@$(CHARTJS_VERSION) >/dev/null \
	  && tar -xzf chart.js-$(CHARTJS_VERSION).tgz package/dist/chart.umd.min.js package/LICENSE.md \
	  && mv package/dist/chart.umd.min.js chart.umd.min.js && mv package/LICENSE.md chart.js-LICENSE.md \
	  && rm -rf package chart.js-$(CHARTJS_VERSION).tgz

vendor: $(VENDOR_DIR)/chart.umd.min.js

# The dashboard tests drive a real headless Chromium: Debian's, installed when missing (like kubectl).
browser:
	@{ command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; } || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null) || echo "chromium unavailable: the dashboard browser tests will skip"; \
	  else echo "chromium unavailable: the dashboard browser tests will skip"; fi; }

dev: install vendor
	$(VENV)/bin/kaiwo-ray dev

lint: install
	$(VENV)/bin/ruff check .

typecheck: install
	$(VENV)/bin/mypy kaiwo_ray

pytest: install tools browser vendor
	$(VENV)/bin/pytest

test: lint typecheck pytest

crds: install
	$(VENV)/bin/kaiwo-ray crds

bench: install
	for b in benchmarks/[!_]*.py; do $(PY) $$b || exit 1; done

# Refresh the pinned lock file after editing pyproject.toml dependencies.
lock:
	$(VENV)/bin/uv pip compile pyproject.toml --extra dev --extra nvidia --python-version 3.11 -o requirements.lock

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
