"""The files a course ships, damaged: `rlnb doctor` on a cut-short or oddly shaped runtimes.json, `load_result` and
the README's claims table on a truncated or non-gzip results file, `build_site.py` without the site extra. Each
is one clear line naming the file and what is wrong, found before any long work."""

import gzip
import shutil
import sys
from pathlib import Path

import pytest

from rlnb.cli import doctor, main
from rlnb.studies import claims
from rlnb.studies.results import load_result

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"


@pytest.mark.parametrize("text, what", [
    ('{"00_start_here": {"seconds": 24', "is not valid JSON"),
    ('["00_start_here"]', "holds list, expected an object"),
    ('{"00_start_here": 240}', "chapter '00_start_here' has 240, expected an object"),
    ('{"00_start_here": {"seconds": "4 min"}}', 'expected an object with "seconds"'),
    ('{"00_start_here": {"seconds": 240, "step_seconds": 0}}', "step_seconds=0, expected a number > 0"),
])
def test_doctor_names_a_broken_runtimes_file_before_timing(tmp_path, monkeypatch, capsys, text, what):
    path = tmp_path / "runtimes.json"
    path.write_text(text)
    monkeypatch.setattr(doctor.notebook, "course_path", lambda rel: path)
    monkeypatch.setattr(doctor, "step_seconds", lambda *a, **k: pytest.fail("timed before reading runtimes.json"))
    with pytest.raises(ValueError, match=rf"^{path}.*{what}"):
        doctor.probe_runtimes()
    monkeypatch.setattr(doctor, "probe_runtimes", lambda: doctor.read_runtimes(path))
    code = main(["doctor", "--no-timing"])
    lines = capsys.readouterr().out.splitlines()
    bad = [ln for ln in lines if ln.startswith("PROBLEM  chapters:")]
    assert code == 1 and len(bad) == 1 and str(path) in bad[0] and "Traceback" not in "\n".join(lines)


def damaged_results(tmp_path, name: str, how: str) -> Path:
    src = RESULTS / f"{name}.json.gz"
    dest = tmp_path / src.name
    if how == "truncated":
        dest.write_bytes(src.read_bytes()[: src.stat().st_size // 2])
    else:  # not gzip: the plain JSON under the .gz name
        dest.write_bytes(gzip.decompress(src.read_bytes()))
    return tmp_path


@pytest.mark.parametrize("how, what", [("truncated", "is cut short"), ("plain", "cannot be read as gzipped JSON")])
def test_load_result_names_a_damaged_results_file(tmp_path, how, what):
    root = damaged_results(tmp_path, "beta", how)
    with pytest.raises(ValueError, match=rf"^name: {root / 'beta.json.gz'} {what}"):
        load_result("beta", root=root)


def test_a_truncated_plain_json_result_is_named(tmp_path):
    (tmp_path / "x.json").write_text('{"config": {"name": "x"}, "runs": [')
    with pytest.raises(ValueError, match=rf"^name: {tmp_path / 'x.json'} cannot be read as JSON"):
        load_result("x", root=tmp_path)


def test_the_claims_table_names_a_truncated_results_file(tmp_path):
    root = tmp_path / "results"
    shutil.copytree(RESULTS, root)
    for f in root.glob("*.json.gz"):
        f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    with pytest.raises(ValueError, match=rf"^name: {root}/\w+\.json\.gz is cut short"):
        claims.table_markdown(root)


def test_build_site_without_the_extra_is_one_line_before_executing_anything(monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    import build_site

    real = build_site.missing_extra
    monkeypatch.setattr(build_site, "build", lambda *a, **k: pytest.fail("executed without the site extra"))
    monkeypatch.setattr("importlib.util.find_spec", lambda m, *a: None if m == "mkdocs_jupyter" else sys)
    assert real() == ["mkdocs_jupyter"]
    assert build_site.main(["--only", "00"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no module mkdocs_jupyter" in err[0] and "pip install -e '.[site]'" in err[0]
