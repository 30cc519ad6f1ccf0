"""``python -m rlnb.bench`` is the one entry to the benchmarks; the scripts the docs name are thin entry points."""

from pathlib import Path

import pytest

from rlnb import bench

ROOT = Path(__file__).resolve().parents[1]


def test_every_command_names_a_module_with_a_main(capsys):
    import importlib

    assert set(bench.COMMANDS) == {"loss", "step", "padding", "trl", "waits", "rows"}
    for module in bench.COMMANDS.values():
        assert callable(importlib.import_module(f"rlnb.bench.{module}").main)
    assert bench.main(["nope"]) == 2 and "padding" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["padding", "trl", "waits", "rows"])
def test_a_command_reaches_its_module(command, capsys):
    with pytest.raises(SystemExit) as e:
        bench.main([command, "--help"])
    assert e.value.code == 0 and "usage" in capsys.readouterr().out


@pytest.mark.parametrize(("script", "module"), [("bench_padding", "padding"), ("bench_vs_trl", "vs_trl")])
def test_the_scripts_are_entry_points_of_the_library(script, module):
    text = (ROOT / "scripts" / f"{script}.py").read_text()
    assert f"from rlnb.bench.{module} import main" in text and len(text.splitlines()) < 15
