# Kairos — the two commands: `make demo` and `make test`.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
HOST ?= 127.0.0.1
PORT ?= 8000
export DEBUG ?= 1

.PHONY: demo test venv test-venv migrate check serve clean

$(VENV)/.installed: requirements.txt requirements-scrcpy.txt
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "Kairos needs $(PYTHON) on PATH (or run: make PYTHON=python3 ...)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -r requirements.txt
	$(PIP) install --quiet --no-deps -r requirements-scrcpy.txt
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed requirements-test.txt
	$(PIP) install --quiet -r requirements-test.txt
	touch $@

venv: $(VENV)/.installed
test-venv: $(VENV)/.installed-test

migrate: venv
	$(PY) manage.py migrate --noinput

# Fresh machine → running product: venv, migrations, demo data, server.
demo: migrate
	$(PY) manage.py seed_demo $(if $(PASSWORD),--password $(PASSWORD),)
	@echo "Open http://$(HOST):$(PORT)/login/ and log in with a demo login above."
	$(PY) manage.py serve --host $(HOST) --port $(PORT)

serve: venv
	$(PY) manage.py serve --host $(HOST) --port $(PORT)

check: test-venv
	$(PY) manage.py check
	$(PY) manage.py makemigrations --check --dry-run

# The whole suite. With DATABASE_URL / REDIS_URL set the service tests use them; without,
# they are skipped with a message (KAIROS_REQUIRE_SERVICES=1 makes them fail instead).
test: check
	$(VENV)/bin/pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) var .pytest_cache
