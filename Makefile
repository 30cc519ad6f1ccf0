# rlnb: `make lab` opens the curriculum, `make train` is the terminal variant, `make test` runs every test.
# Each target creates its own virtual environment in .venv (idempotent: re-running installs nothing new).

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# torch 2.13.0: where a CPU wheel of it is on pip's search path (as on our workshop and CI machines) pip
# takes that; elsewhere set TORCH_INDEX=https://download.pytorch.org/whl/cpu to avoid a multi-GB CUDA build.
TORCH_SPEC  ?= torch==2.13.0
TORCH_INDEX ?=
EXTRAS ?= dev,triton,browser,trl,peft
# pytest workers: the suite runs each test on one thread, so two workers use both cores of a 2-core machine.
# --dist loadfile keeps each notebook (its cells share one kernel) and each test module whole on one worker.
WORKERS ?= 2
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)-$(EXTRAS)

export OMP_WAIT_POLICY := PASSIVE
export TOKENIZERS_PARALLELISM := false
export HF_HUB_OFFLINE := 1

.PHONY: install lab train test test-fast clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH_SPEC)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(BIN)/python -m pip install -q -e ".[$(EXTRAS)]"
	rm -f $(VENV)/.installed-*
	touch $@

lab: install  ## the curriculum in JupyterLab, on the embedded default model
	$(BIN)/jupyter lab notebooks/00_start_here.ipynb

train: install  ## headless: GRPO on 3-digit addition in the terminal (progress bar, metrics, HTML report)
	$(BIN)/rlnb train --recipe grpo --task add --steps 200 --out runs/grpo-add

test: install  ## everything CI runs: unit tests, doctests, notebooks (smoke mode), browser test
	$(BIN)/python -m pytest -q -ra -n $(WORKERS) --dist loadfile --durations=15

test-fast: install  ## unit tests and doctests only
	$(BIN)/python -m pytest -q -ra -n $(WORKERS) --dist loadfile -m "not slow and not browser" tests rlnb

clean:
	rm -rf $(VENV) runs test-artifacts
