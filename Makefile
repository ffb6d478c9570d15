# numa.kube developer commands. `make test` and `make demo` set up everything they need.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := $(CURDIR)/.venv
BIN := $(VENV)/bin
COLLECTIONS := $(VENV)/collections
SANITY_ROOT := $(VENV)/sanity/ansible_collections/numa/kube
STAMP := $(VENV)/.requirements-$(shell sha256sum requirements-dev.txt | cut -c1-16)

export ANSIBLE_COLLECTIONS_PATH := $(COLLECTIONS):$(VENV)/lib/python3.11/site-packages
export PYTHONPATH := $(COLLECTIONS)
export PATH := $(BIN):$(PATH)
export ANSIBLE_PIPELINING := true
export ANSIBLE_HOST_KEY_CHECKING := false
export ANSIBLE_NOCOLOR := true

.PHONY: help venv test test-fast test-vm lint yamllint ansible-lint sanity units bench differential demo demo-local docs clean

help:
	@echo "make test       set up .venv (pinned) and the VM tools, run every test tier (what CI runs)"
	@echo "make test-fast  only lint, sanity and units (no VMs), for quick iteration"
	@echo "make test-vm    only the VM tiers; make molecule-<scenario> runs one scenario"
	@echo "make demo       boot two NUMA VMs and an API server, run site.yml, print the report, destroy them"
	@echo "make demo-local read this machine's NUMA topology and print the kubelet reservation it needs"
	@echo "make docs       build the modules', filters' and roles' reference as HTML (tests/output/docs/html)"
	@echo "make lint | sanity | units | bench | differential   one tier (differential: against kubelet's Go code)"

# (a fresh clone's .venv is a copy of the one kept in ~/.cache/numa-kube/venvs for these requirements)
$(STAMP): requirements-dev.txt
	$(PYTHON) tools/venv.py $(VENV) requirements-dev.txt
	rm -f $(VENV)/.requirements-* && touch $@

# The collection is importable as ansible_collections.numa.kube through a link into .venv.
$(COLLECTIONS)/ansible_collections/numa/kube: | $(STAMP)
	mkdir -p $(COLLECTIONS)/ansible_collections/numa
	ln -sfn $(CURDIR) $@

venv: $(STAMP) $(COLLECTIONS)/ansible_collections/numa/kube

FAST_TIERS := lint sanity units bench
VM_TIERS := vm-bed differential molecule-cluster
# the whole run: what keeps no clock (the unit tests but those marked wall_clock, lint, sanity) runs
# beside the others at idle CPU priority (tools/run-tiers --beside), in the cores the guests leave
# idle; the unit tests that time themselves ("timed") and bench's figures keep cores of their own
BESIDE_TIERS := untimed,lint,sanity

test: venv vm-deps
	@bash tools/run-tiers --beside $(BESIDE_TIERS) timed bench $(VM_TIERS)

test-fast: venv
	@bash tools/run-tiers $(FAST_TIERS)

test-vm: venv vm-deps
	@bash tools/run-tiers $(VM_TIERS)

lint: venv
	@bash tools/run-tiers lint

sanity: venv
	@bash tools/run-tiers sanity

units: venv
	@bash tools/run-tiers units

differential: venv
	@bash tools/run-tiers differential

bench: venv
	@bash tools/run-tiers bench

# The whole job on a local fleet: boot the cluster scenario's two NUMA guests and the API server,
# make them kubeadm-style workers with a pod each, run site.yml (the closing report shows the
# result), tear it all down. `molecule converge` creates and prepares the guests first.
demo: venv vm-deps
	@trap '$(BIN)/molecule destroy -s cluster >/dev/null' EXIT; \
	  $(BIN)/molecule converge -s cluster

docs: venv
	@bash tools/build-docs

# Read-only look at this machine's own topology and the reservation it would need.
demo-local: venv
	$(BIN)/ansible-playbook -i inventories/localhost/hosts.yml playbooks/demo_local.yml

clean:
	rm -rf $(VENV) tests/output .pytest_cache .coverage coverage.xml

# VM tiers (molecule on qemu guests with an emulated NUMA topology). Needs root for apt-get.
.PHONY: vm-deps
vm-deps:
	bash tools/vm-deps

molecule-%: venv vm-deps
	$(BIN)/molecule test -s $*
