# numa.kube developer commands. `make test` and `make demo` set up everything they need.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := $(CURDIR)/.venv
BIN := $(VENV)/bin
COLLECTIONS := $(VENV)/collections
SANITY_ROOT := $(VENV)/sanity/ansible_collections/numa/kube
STAMP := $(VENV)/.requirements-$(shell sha256sum requirements.txt | cut -c1-16)

export ANSIBLE_COLLECTIONS_PATH := $(COLLECTIONS):$(VENV)/lib/python3.11/site-packages
export PYTHONPATH := $(COLLECTIONS)
export PATH := $(BIN):$(PATH)
export ANSIBLE_PIPELINING := true
export ANSIBLE_HOST_KEY_CHECKING := false
export ANSIBLE_NOCOLOR := true

.PHONY: help venv test test-fast lint yamllint ansible-lint sanity units demo clean

help:
	@echo "make test       set up .venv (pinned) and run every test tier"
	@echo "make test-fast  the same (until the VM tiers exist, every tier is fast)"
	@echo "make demo       read this machine's NUMA topology and print the kubelet reservation it needs"
	@echo "make lint | sanity | units   one tier"

$(STAMP): requirements.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -r requirements.txt
	rm -f $(VENV)/.requirements-* && touch $@

# The collection is importable as ansible_collections.numa.kube through a link into .venv.
$(COLLECTIONS)/ansible_collections/numa/kube:
	mkdir -p $(COLLECTIONS)/ansible_collections/numa
	ln -sfn $(CURDIR) $@

venv: $(STAMP) $(COLLECTIONS)/ansible_collections/numa/kube

test: venv
	@bash tools/run-tiers lint sanity units

test-fast: test

lint: venv
	@bash tools/run-tiers lint

sanity: venv
	@bash tools/run-tiers sanity

units: venv
	@bash tools/run-tiers units

demo: venv
	$(BIN)/ansible-playbook -i inventories/localhost/hosts.yml playbooks/demo_local.yml

clean:
	rm -rf $(VENV) tests/output .pytest_cache .coverage coverage.xml

# VM tiers (molecule on qemu guests with an emulated NUMA topology). Needs root for apt-get.
.PHONY: vm-deps
vm-deps:
	bash tools/vm-deps

molecule-%: venv vm-deps
	$(BIN)/molecule test -s $*
