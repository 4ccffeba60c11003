# Two entry points for people: `make dev` and `make test`. Everything else is plumbing.
VENV ?= .venv
PY := $(VENV)/bin/python
UV_VERSION := 0.13.8
STAMP := $(VENV)/.installed

.PHONY: dev test install lint typecheck pytest lock crds bench tools clean

# Create the virtualenv from the lock file; re-run only when the inputs change. It is byte-compiled once:
# with PYTHONDONTWRITEBYTECODE set (as on CI) every process would otherwise recompile Ray, kubernetes and
# our modules from source (~1 s per subprocess the tests start).
$(STAMP): pyproject.toml requirements.lock
	python3 -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --disable-pip-version-check uv==$(UV_VERSION)
	$(VENV)/bin/uv pip install -q --python $(PY) -r requirements.lock
	$(VENV)/bin/uv pip install -q --python $(PY) --no-deps -e .
	$(PY) -m compileall -q -j 0 $(VENV)/lib kaiwo_ray kaiwo_sandbox actors serve >/dev/null || true
	touch $(STAMP)

install: $(STAMP)

# kubectl drives the sandbox in the CLI tests, tmux runs `kaiwo manage` in a real terminal; Debian's when absent.
tools:
	@command -v kubectl >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && apt-get install -y -qq kubernetes-client >/dev/null) || echo "kubectl unavailable: its tests will skip"; \
	  else echo "kubectl unavailable: its tests will skip"; fi; }
	@command -v tmux >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && apt-get install -y -qq tmux >/dev/null) || echo "tmux unavailable: the kaiwo manage terminal test will skip"; \
	  else echo "tmux unavailable: the kaiwo manage terminal test will skip"; fi; }

dev: install
	$(VENV)/bin/kaiwo-ray dev

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports

typecheck: install
	$(VENV)/bin/mypy kaiwo_ray kaiwo_sandbox actors

pytest: install tools
	$(VENV)/bin/pytest

test: lint typecheck pytest

crds: install
	$(VENV)/bin/kaiwo-ray crds

bench: install
	for b in benchmarks/[!_]*.py; do $(PY) $$b || exit 1; done

# Refresh the pinned lock file after editing pyproject.toml dependencies.
lock:
	$(VENV)/bin/uv pip compile pyproject.toml --extra dev --extra sandbox --extra nvidia --python-version 3.11 -o requirements.lock

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
