"""One scale table (vlmpath.core.scales): every per-scale table covers exactly its names,
every ``--scale`` choice comes from it, and a bad scale is one error naming the choices."""

from __future__ import annotations

import argparse

import pytest

from vlmpath.cli import build_parser
from vlmpath.core.errors import VlmpathError
from vlmpath.core.scales import DEFAULT_SCALE, SCALES, Scale
from vlmpath.core.validate import LIMITS
from vlmpath.measure.encoders import FAMILIES
from vlmpath.measure.workload import SHAPES


def per_scale_tables() -> dict[str, object]:
    tables = {"workload SHAPES": SHAPES, "validate LIMITS": LIMITS}
    tables.update({f"family {name} towers": fam.towers for name, fam in FAMILIES.items()})
    return tables


def uncovered(tables: dict[str, object]) -> list[str]:
    """Tables whose keys are not exactly the scale names."""
    return [f"{what}: {sorted(t)}" for what, t in tables.items() if set(t) != set(SCALES)]


def test_every_per_scale_table_covers_exactly_the_scales():
    assert uncovered(per_scale_tables()) == []


def test_a_table_missing_a_scale_is_found():
    tables = per_scale_tables()
    tables["planted"] = {DEFAULT_SCALE: 1}
    assert uncovered(tables) == [f"planted: {[DEFAULT_SCALE]}"]


def test_the_scale_records():
    assert DEFAULT_SCALE in SCALES and not SCALES[DEFAULT_SCALE].gpu
    assert all(s.value == name and s.description for name, s in SCALES.items())
    with pytest.raises(TypeError):
        SCALES["huge"] = SCALES[DEFAULT_SCALE]  # read-only: no global mutable state


def test_scale_parse_names_every_choice_and_round_trips():
    for name, scale in SCALES.items():
        assert Scale.parse(name) is scale and Scale.parse(str(scale)) is scale and Scale.parse(scale) is scale
        assert f"{scale}" == name and repr(scale) == repr(name)  # messages and records show the name
    with pytest.raises(VlmpathError, match="huge") as e:
        Scale.parse("huge")
    assert all(name in str(e.value) for name in SCALES)
    assert "did you mean 'tiny'" in str(pytest.raises(VlmpathError, Scale.parse, "tiyn").value)
    for bad in (None, 3, "", "TINY"):
        with pytest.raises(VlmpathError, match="is not a scale"):
            Scale.parse(bad)


def _scale_actions(parser: argparse.ArgumentParser, where: str = "vlmpath"):
    for action in parser._actions:
        if "--scale" in action.option_strings:
            yield where, action
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _scale_actions(sub, f"{where} {name}")


def test_every_scale_option_offers_the_registry():
    found = list(_scale_actions(build_parser()))
    assert len(found) >= 5  # measure, profile, run, ci pr, ci history at least
    wrong = [where for where, action in found if list(action.choices or ()) != list(SCALES)]
    assert wrong == []
