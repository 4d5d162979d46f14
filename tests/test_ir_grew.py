"""Does the comment name what grew when an instruction count moved (issue 22, item 4)?

Synthetic callgrind files in the tool's own format (compressed names, ``calls=`` lines whose
next cost line is inclusive) and call-count files as the worker writes them: the parser
takes self costs only, the diff ranks growth with its share, an added operator or helper
is named, and hostile names or paths are refused or made inert. The real counter's
profiles, with a planted ``torch.sort`` and a planted helper, are in
``test_ir_grew_e2e.py``.
"""

from __future__ import annotations

import json

from vlmpath.compare.ir_grew import grew, self_costs
from vlmpath.render.ir_grew import render_grew

DUMP = """# callgrind format
version: 1
creator: callgrind-3.19.0
positions: line
events: Ir
summary: {total}

ob=(1) /lib/libtorch_cpu.so
fl=(1) ???
fn=(1) at::native::copy_
0 {copy}
cfn=(2) memcpy
calls=3 0
0 {inner}
fn=(2)
0 {inner}
fn=(3) _PyEval_EvalFrameDefault
0 {eval}
+2 5
totals: {total}
"""


def dump(copy: int, inner: int, eval_: int) -> str:
    return DUMP.format(copy=copy, inner=inner, eval=eval_ + 0, total=copy + inner + eval_ + 5)


def test_self_costs_leave_out_inclusive_call_costs_and_sum_to_the_total():
    costs, total = self_costs(dump(100, 40, 60))
    assert costs == {"at::native::copy_": 100, "memcpy": 40, "_PyEval_EvalFrameDefault": 65}
    assert sum(costs.values()) == total


def _write(d, name, text, calls=None):
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{name}.callgrind").write_text(text)
    if calls is not None:
        (d / f"{name}.calls.json").write_text(json.dumps(calls))


def test_the_functions_and_calls_that_grew_are_ranked_with_their_share(tmp_path):
    _write(tmp_path / "base", "c", dump(100, 40, 60), {"python": {"vlmpath/paths/inject.py:masked_scatter": 3},
                                                       "aten": {"aten::copy_": 4}})
    _write(tmp_path / "head", "c", dump(100, 120, 80), {"python": {"vlmpath/paths/inject.py:masked_scatter": 3,
                                                                   "vlmpath/paths/inject.py:_extra": 3},
                                                        "aten": {"aten::copy_": 4, "aten::sort": 3}})
    g = grew("EmbedRoutine(default, video)", tmp_path / "base", tmp_path / "head", "c.callgrind", "c.callgrind")
    assert [(r.name, r.delta) for r in g.functions] == [("memcpy", 80), ("_PyEval_EvalFrameDefault", 20)]
    assert [round(r.share, 2) for r in g.functions] == [0.8, 0.2]
    assert [(r.name, r.delta) for r in g.python] == [("vlmpath/paths/inject.py:_extra", 3)]
    assert [(r.name, r.delta) for r in g.aten] == [("aten::sort", 3)]
    text = render_grew([g])
    assert "`memcpy`" in text and "80%" in text and "`aten::sort`" in text and "inject.py:_extra" in text


def test_a_path_for_a_profile_name_is_refused_and_hostile_names_stay_inert(tmp_path):
    g = grew("c", tmp_path, tmp_path, "../../etc/passwd", "x.callgrind")
    assert g.functions == () and "refused" in g.notes[0]
    hostile = DUMP.replace("memcpy", "evil` | @here <b>\nrow").format(copy=1, inner=9, eval=1, total=16)
    _write(tmp_path / "base", "c", dump(1, 1, 1))
    _write(tmp_path / "head", "c", hostile)
    text = render_grew([grew("c", tmp_path / "base", tmp_path / "head", "c.callgrind", "c.callgrind")])
    row = next(line for line in text.splitlines() if "evil" in line)
    assert "`evil' \\| @here <b>`" in row  # one code span, the pipe escaped: a mention or tag is inert there


def test_the_merge_reads_what_grew_back_and_refuses_a_malformed_file(tmp_path):
    import pytest

    from vlmpath.compare.ir_grew import growths_from_json

    _write(tmp_path / "base", "c", dump(100, 40, 60))
    _write(tmp_path / "head", "c", dump(100, 120, 80))
    g = grew("c", tmp_path / "base", tmp_path / "head", "c.callgrind", "c.callgrind")
    assert growths_from_json(json.dumps([g.to_dict()])) == [g]
    for bad in ("{}", "[{\"case\": 1, \"functions\": [{\"name\": \"x\"}]}]", "not json"):
        with pytest.raises(ValueError, match="malformed what-grew"):
            growths_from_json(bad)


def test_grew_tops_names_what_grew_between_two_records_and_drops_what_is_not_a_count():
    from vlmpath.compare.ir_grew import grew_tops

    base = {"python": {"a.py:f": 10, "a.py:g": 5}, "aten": {"aten::mm": 100}}
    head = {"python": {"a.py:f": 10, "a.py:g": 9, "a.py:h": 6, "x": True, "y": -3, "z": "1"},
            "aten": {"aten::mm": 100, "aten::clone": 50}}
    g = grew_tops("routine_bytecodes(video)", base, head, "bytecodes")
    assert [(r.name, r.delta) for r in g.python] == [("a.py:h", 6), ("a.py:g", 4)]
    assert g.python[0].share == 0.6 and [r.name for r in g.aten] == ["aten::clone"] and g.unit == "bytecodes"
    empty = grew_tops("c", {}, "not a mapping", "elements")
    assert empty.python == () and empty.aten == () and "kept no per-function counts" in empty.notes[0]
