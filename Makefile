# Entry points. `make build` and `make test` do all set-up on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
TARGET ?= cpu
PY     := $(VENV)/bin/python

.PHONY: setup render check test build list show clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[test]'
	touch $@

setup: $(VENV)/.installed
	scripts/ensure-debian-packages shellcheck

render: setup
	$(PY) -m builder render --all

check: setup
	$(PY) -m builder check

test: setup
	$(PY) -m builder check
	$(PY) -m pytest

# Renders containers/$(TARGET).def. Building the image with Apptainer is the next step
# (see README: "What works today").
build: setup
	$(PY) -m builder render $(TARGET)

list: setup
	$(PY) -m builder list

show: setup
	$(PY) -m builder show $(TARGET)

clean:
	rm -rf $(VENV) .pytest_cache
