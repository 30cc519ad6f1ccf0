"""The measured full-size studies shipped with the repository (``docs/results/<name>.json.gz``).

The notebooks run a reduced version of each study live and load the full 3-seed result to show the
whole picture without half an hour of training: ``load_result("beta")``. The files live next to the
package in a clone (``<repo>/docs/results``), not inside it; ``RLNB_RESULTS`` or ``root=`` points
elsewhere (e.g. an installed package with the folder copied somewhere).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from rlnb.studies.runner import StudyResult

SUFFIXES = (".json.gz", ".json")


def results_dir(root=None) -> Path:
    """``root`` if given, else ``$RLNB_RESULTS`` if set, else ``docs/results`` of the course folder (this checkout,
    or the copied course a wheelhouse install runs in: ``rlnb.notebook.course_path``)."""
    if root is not None:
        return Path(root)
    if os.environ.get("RLNB_RESULTS"):
        return Path(os.environ["RLNB_RESULTS"])
    from rlnb.notebook import course_path

    return course_path("docs/results")


def result_names(root=None) -> list[str]:
    """The stored results in ``results_dir(root)`` (names without suffix), sorted; [] if there is none."""
    folder = results_dir(root)
    if not folder.is_dir():
        return []
    return sorted({p.name[: -len(s)] for p in folder.iterdir() for s in SUFFIXES if p.name.endswith(s)})


def load_result(name: str, *, root=None) -> StudyResult:
    """The stored ``StudyResult`` called ``name`` (``<name>.json.gz`` or ``<name>.json``).

    Raises FileNotFoundError naming the folder searched and the results it holds, so a notebook run
    outside a clone says what is missing rather than failing somewhere later.
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"name: expected a study name such as 'beta', got {name!r}")
    folder = results_dir(root)
    for suffix in SUFFIXES:
        path = folder / f"{name}{suffix}"
        if path.is_file():
            return _read(path)
    known = result_names(root)
    where = "it does not exist" if not folder.is_dir() else f"it holds {known}"
    raise FileNotFoundError(
        f"name: no stored result {name!r} in {folder} ({where}). The measured results ship with the "
        "repository in docs/results; run from a clone, or set RLNB_RESULTS to a folder holding them.")


def _read(path: Path) -> StudyResult:
    """``path`` as a StudyResult; ``ValueError`` naming the file and what is wrong with it (a cut-short copy, a
    ``.gz`` that is not gzip, JSON of another shape), so a notebook or the README's table says which file."""
    try:
        return StudyResult.from_json(path)
    except (KeyError, TypeError) as e:
        raise ValueError(f"name: {path} is not a StudyResult (no 'runs' of arm/seed results)") from e
    except EOFError:  # gzip's stream ended before its end marker
        raise ValueError(f"name: {path} is cut short (the gzip stream ends early); restore it from the "
                         "repository") from None
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:  # BadGzipFile is an OSError
        raise ValueError(f"name: {path} cannot be read as {'gzipped ' if path.name.endswith('.gz') else ''}JSON "
                         f"({type(e).__name__}: {str(e)[:120]}); it is cut short or corrupt: restore it from the "
                         "repository") from None
