"""Fixtures of the browser test: one throwaway JupyterLab server and one headless Chromium per session.

Without ``/usr/bin/chromium`` or Python playwright these tests skip, saying why (a laptop still passes
``make test``); with ``RLNB_REQUIRE_BROWSER=1`` (CI) they fail instead, since CI must run them.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the browser_* helper modules

from browser_lab import (  # noqa: E402
    FIXTURES,
    NOTEBOOKS,
    REPO,
    LabServer,
    launch_chromium,
    missing_requirements,
    stage,
)

ARTIFACTS = REPO / "test-artifacts"

collect_ignore_glob = ["fixtures/*"]  # the fixture notebooks are run in the browser, not by nbval


@pytest.fixture(scope="session")
def browser_requirements():
    why = missing_requirements()
    if why is None:
        return
    if os.environ.get("RLNB_REQUIRE_BROWSER") == "1":
        pytest.fail(f"RLNB_REQUIRE_BROWSER=1 but the browser test cannot run: {why}")
    pytest.skip(f"browser test skipped: {why}")


# a busy laptop: processes that only spin, each ending by itself when the test process that started it is gone
BURN = "import os, sys\nparent = int(sys.argv[1])\nwhile os.getppid() == parent:\n    sum(range(200_000))\n"


def burner_count(env=None) -> int:
    """CPU burners this test process starts: ``RLNB_BROWSER_BURNERS`` in all (default 2, as a busy 2-core
    laptop), shared among pytest-xdist's workers."""
    env = os.environ if env is None else env
    total = int(env.get("RLNB_BROWSER_BURNERS", "2"))
    workers = int(env.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    index = int(env.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
    return total // workers + (index < total % workers)


@pytest.fixture(scope="session")
def cpu_burner(browser_requirements):
    """Every browser test runs beside spinning processes: live figures must draw on a busy machine, with no retry."""
    procs = [subprocess.Popen([sys.executable, "-c", BURN, str(os.getpid())]) for _ in range(burner_count())]
    yield len(procs)
    for p in procs:
        p.kill()
        p.wait()


@pytest.fixture(scope="session")
def lab(browser_requirements, cpu_burner, tmp_path_factory):
    """JupyterLab serving copies of ``notebooks/`` and the fixtures; kernels import this working tree's
    rlnb and run in smoke mode."""
    work = tmp_path_factory.mktemp("jupyterlab")
    root = work / "root"
    stage(root, {"notebooks": NOTEBOOKS, "fixtures": FIXTURES})
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    # kernels use one thread, like the rest of the suite: on a shared 2-core machine small multi-threaded
    # ops stall at thread barriers
    server = LabServer(root, work, env={"RLNB_SMOKE": "1", "PYTHONPATH": path, "HF_HUB_OFFLINE": "1",
                                        "TOKENIZERS_PARALLELISM": "false", "OMP_WAIT_POLICY": "PASSIVE",
                                        "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
    yield server
    server.stop()


@pytest.fixture(scope="session")
def chromium(browser_requirements):
    from playwright.sync_api import sync_playwright

    pw = sync_playwright().start()
    browser = launch_chromium(pw)
    yield browser
    browser.close()
    pw.stop()


@pytest.fixture
def page(chromium):
    """A fresh page, tall enough for one explorer; ``page.rlnb_errors`` collects uncaught page errors and
    ``page.rlnb_console`` console errors."""
    context = chromium.new_context(viewport={"width": 1280, "height": 1300})
    pg = context.new_page()
    pg.rlnb_errors, pg.rlnb_console = [], []
    pg.on("pageerror", lambda e: pg.rlnb_errors.append(str(e)))
    pg.on("console", lambda m: pg.rlnb_console.append(m.text) if m.type == "error" else None)
    pg.set_default_timeout(30_000)
    yield pg
    context.close()


@pytest.fixture(scope="session")
def artifacts():
    for sub in ("screenshots", "browser"):
        (ARTIFACTS / sub).mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
