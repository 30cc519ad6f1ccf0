"""A throwaway JupyterLab server on loopback, and headless Debian Chromium driven by Playwright.

Nothing here touches the user's Jupyter setup or the repository's notebooks: the server serves a temporary
copy (``stage``) with its own settings, config, runtime and workspace folders, and with the news toast,
autosave and cell windowing off. The data dir is NOT overridden, so the labextensions installed in the
environment (ipywidgets, anywidget, plotly) are found. Playwright is imported lazily so that this module
imports (and pytest collects) on a machine without it.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
FIXTURES = sorted((REPO / "tests" / "browser" / "fixtures").glob("*.ipynb"))
CHROMIUM = os.environ.get("RLNB_CHROMIUM", "/usr/bin/chromium")  # Debian's; never a downloaded one
# Without the background-networking flags Chromium keeps dialing Google services, which a closed network
# refuses; --no-sandbox because CI runs as root.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic", "--disable-dev-shm-usage"]

# JupyterLab user settings: no news/update toast (it covers the page and asks for a click), no autosave
# (the kernel's outputs must never be written back), every cell attached to the DOM (the default windowing
# detaches cells that are scrolled out of view, and the checks read every cell).
SETTINGS = {
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False,
                                                    "doNotDisturbMode": True},
    "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
}


def missing_requirements() -> str | None:
    """Why the browser test cannot run here, or None when it can."""
    if not Path(CHROMIUM).exists():
        return f"{CHROMIUM} not found (Debian: apt-get install chromium; elsewhere set RLNB_CHROMIUM)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "python playwright is not installed (pip install -e '.[browser]')"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stage(root: Path, sources: dict[str, list[Path]]) -> None:
    """Copy notebooks into ``root/<folder>/`` (``sources``: folder -> files)."""
    for folder, files in sources.items():
        (root / folder).mkdir(parents=True, exist_ok=True)
        for f in files:
            shutil.copy2(f, root / folder / f.name)


def write_settings(settings_dir: Path) -> None:
    for plugin, values in SETTINGS.items():
        path = settings_dir / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))


class LabServer:
    """``jupyter lab`` serving ``root`` on 127.0.0.1 with a random token; ``url(path)``; ``stop()``.

    ``env`` is added to the server's environment, which its kernels inherit (``RLNB_SMOKE``, ``PYTHONPATH``).
    The server's log goes to ``work/lab.log`` (shown when it fails to start).
    """

    def __init__(self, root: Path, work: Path, *, env: dict[str, str], timeout: float = 90.0):
        self.root, self.token, self.port = Path(root), secrets.token_hex(16), free_port()
        dirs = {k: work / k for k in ("config", "settings", "runtime", "workspaces")}
        for d in dirs.values():
            d.mkdir(parents=True, exist_ok=True)
        write_settings(dirs["settings"])
        # the server side of the news and update checks: never fetched (the page must not wait on them)
        (dirs["config"] / "jupyter_server_config.json").write_text(json.dumps(
            {"LabApp": {"news_url": None, "check_for_updates_class": "jupyterlab.NeverCheckForUpdate"}}))
        full_env = {**os.environ, **env, "JUPYTER_CONFIG_DIR": str(dirs["config"]),
                    "JUPYTERLAB_SETTINGS_DIR": str(dirs["settings"]), "JUPYTER_RUNTIME_DIR": str(dirs["runtime"]),
                    "JUPYTERLAB_WORKSPACES_DIR": str(dirs["workspaces"]), "JUPYTER_PLATFORM_DIRS": "1"}
        cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
               f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
               f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={self.root}",
               "--ServerApp.allow_root=True", "--LabApp.expose_app_in_browser=True",
               f"--LabApp.workspaces_dir={dirs['workspaces']}", "--ServerApp.log_level=WARN"]
        self.log_path = work / "lab.log"
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, env=full_env, stdout=self._log, stderr=subprocess.STDOUT,
                                     cwd=self.root, start_new_session=True)
        self._wait_ready(timeout)

    def url(self, path: str = "lab") -> str:
        return f"http://127.0.0.1:{self.port}/{path}?token={self.token}"

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited with {self.proc.returncode}:\n{self.log()}")
            try:
                with urllib.request.urlopen(self.url("api/status"), timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"jupyter lab did not answer within {timeout:.0f} s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text()[-4000:] if self.log_path.exists() else ""

    def stop(self) -> None:
        """Stop the server and its kernels (SIGTERM to its process group, SIGKILL if it lingers)."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, 15)
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait(timeout=5)
            except ProcessLookupError:
                pass
        self._log.close()


def launch_chromium(playwright):
    """Headless Debian Chromium (never a downloaded browser: no ``playwright install``)."""
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
