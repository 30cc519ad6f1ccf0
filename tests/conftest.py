"""Shared fixtures. Tests run on CPU; Triton code runs under its interpreter when there is no GPU."""

import os

import pytest
import torch

if not torch.cuda.is_available():  # must be set before triton is imported anywhere in this process
    os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# One thread: on a shared 2-core machine multi-threaded small ops stall at thread barriers (4x slower).
torch.set_num_threads(1)


@pytest.fixture
def two_threads():
    """Two torch threads for one test (this conftest runs tests on one): rlnb's default layout on a 2-core laptop,
    where the step's rows run as two parallel parts (rlnb.models.row_split); the count comes back afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def default_model():
    import rlnb

    return rlnb.load_default()


@pytest.fixture
def model_and_tokenizer(default_model):
    """A fresh copy of the default model for tests that train it."""
    import copy

    model, tok = default_model
    return copy.deepcopy(model), tok


@pytest.fixture
def backend(request):
    """The viz backend for one test: "widget" unless parametrized indirectly (e.g. ["widget", "static"]);
    restored to "auto" afterwards so no test leaks its choice into another."""
    from rlnb.viz import set_backend

    name = getattr(request, "param", "widget")
    set_backend(name)
    yield name
    set_backend("auto")
