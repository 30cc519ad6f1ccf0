"""The browser test's other half of the notebooks (the test itself is in test_jupyterlab.py): a second file so
that ``make test``'s two pytest workers (``--dist loadfile``) each drive half of them in their own JupyterLab."""

import pytest
import test_jupyterlab as base

pytestmark = pytest.mark.browser

MORE = base.CASES[1::2]


def test_the_two_halves_cover_every_notebook_once():
    assert sorted(base.HERE + MORE) == sorted(base.CASES) and not set(base.HERE) & set(MORE)


@pytest.mark.parametrize("folder,name", MORE, ids=[f"{f}/{n}" for f, n in MORE])
def test_notebook_in_jupyterlab(lab, page, artifacts, folder, name):
    base.test_notebook_in_jupyterlab(lab, page, artifacts, folder, name)
