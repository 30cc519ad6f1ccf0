# rlnb: `make lab` opens the curriculum, `make train` is the terminal variant, `make test` runs every test.
# Each target creates its own virtual environment in .venv (idempotent: re-running installs nothing new).

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# torch 2.13.0: where a CPU wheel of it is on pip's search path (as on our workshop and CI machines) pip
# takes that; elsewhere set TORCH_INDEX=https://download.pytorch.org/whl/cpu to avoid a multi-GB CUDA build.
TORCH_SPEC  ?= torch==2.13.0
TORCH_INDEX ?=
EXTRAS ?= dev,triton,browser,trl,peft,site
# what a learner needs for every notebook (15_your_own_model runs TRL and PEFT); the wheelhouse and its README
# command use these, tests/test_wheelhouse.py keeps them equal
COURSE_EXTRAS ?= triton,trl,peft
# verl's wheel alone, without its dependencies (it pins ray, vllm-era packages ...): enough for the verl export's
# CPU tests (its config files, core_algos); the full stack is the `verl` extra
VERL_SPEC ?= verl==0.9.1
WHEELHOUSE ?= wheelhouse
# pytest workers: the suite runs each test on one thread, so two workers use both cores of a 2-core machine.
# --dist loadfile keeps each notebook (its cells share one kernel) and each test module whole on one worker.
WORKERS ?= 2
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)-$(EXTRAS)
# a learner's install (make lab, make train): the course's extras only, none of the developers' (pytest, playwright,
# mkdocs); a developer's `make install` is a superset of it
COURSE_STAMP := $(VENV)/.course-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)-$(COURSE_EXTRAS)

export OMP_WAIT_POLICY := PASSIVE
export TOKENIZERS_PARALLELISM := false
export HF_HUB_OFFLINE := 1

.PHONY: install install-course lab train test test-fast browser-soak site site-full wheelhouse clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH_SPEC)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(BIN)/python -m pip install -q -e ".[$(EXTRAS)]"
	$(BIN)/python -m pip install -q --no-deps "$(VERL_SPEC)"
	rm -f $(VENV)/.installed-*
	touch $@

install-course: $(COURSE_STAMP)

$(COURSE_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH_SPEC)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(BIN)/python -m pip install -q -e ".[$(COURSE_EXTRAS)]"
	rm -f $(VENV)/.course-*
	touch $@

lab: install-course  ## the curriculum in JupyterLab, on the embedded default model (rlnb course)
	$(BIN)/rlnb course

train: install-course  ## headless: GRPO on 3-digit addition in the terminal (progress bar, metrics, HTML report)
	$(BIN)/rlnb train --recipe grpo --task add --steps 200 --out runs/grpo-add

test: install  ## everything CI runs: unit tests, doctests, notebooks (smoke mode), browser test
	$(BIN)/python -m pytest -q -ra -n $(WORKERS) --dist loadfile --durations=15

test-fast: install  ## unit tests and doctests only
	$(BIN)/python -m pytest -q -ra -n $(WORKERS) --dist loadfile -m "not slow and not browser" tests rlnb

# The browser test of every notebook SOAK times in a row, each beside the 2-process CPU burner: each run's undrawn
# live figures (no drawing, or behind their model) and pytest's verdict, one line a run.
SOAK ?= 10
browser-soak: install  ## every notebook in JupyterLab SOAK times under load: undrawn figures per run
	$(BIN)/python tests/browser/soak.py --runs $(SOAK) --workers $(WORKERS)

# The course as a website in build/site/ (open build/site/index.html, or serve it for the search:
# python -m http.server -d build/site). Smoke mode: every notebook runs in seconds, the pages say so; executed notebooks
# are kept in build/ and reused while newer than their notebook (after changing rlnb itself: rm -rf build/site-*).
# site-full: the chapters' full-mode numbers (about 14 min on 2 cores: the sum of docs/results/runtimes.json).
site: install  ## the course website from every notebook in smoke mode, offline
	$(BIN)/python scripts/build_site.py --reuse

site-full: install  ## the course website from every notebook in full mode
	$(BIN)/python scripts/build_site.py --full --reuse

# Every wheel the course needs, CPU torch included, for a room without internet: copy the folder (and the repository)
# to a USB stick; learners run  pip install --no-index --find-links wheelhouse "rlnb[$(COURSE_EXTRAS)]".
# Wheels are for this platform and Python version: build it on the kind of laptop the learners bring.
# torch is downloaded first, from TORCH_INDEX when set (the CPU build), so that the resolve after it finds it in the
# folder; TORCH_SPEC is given again there so that a newer torch on PyPI cannot replace the pinned one.
wheelhouse:  ## download the course's wheels and build rlnb's own into $(WHEELHOUSE)/
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip download -q -d $(WHEELHOUSE) "$(TORCH_SPEC)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(BIN)/python -m pip wheel -q -w $(WHEELHOUSE) --find-links $(WHEELHOUSE) "$(TORCH_SPEC)" ".[$(COURSE_EXTRAS)]"
	@ls $(WHEELHOUSE) | wc -l | xargs printf "%s wheels in $(WHEELHOUSE)/\n"

clean:
	rm -rf $(VENV) runs test-artifacts
