"""Are the presets' chat requests the presets' images, and is a serve run file believed only in shape?

Fast (no server): each preset request's images have the pixel sizes of its patch grids (so
the served processor makes the same grids), videos are their frames, multi-region items one
image per region, equal content equal bytes, the same seed the same bytes; the statistics
(percentiles, agreement, first difference); the run file refuses what is not a run.
"""

from __future__ import annotations

import base64
import io
import json
import math

import pytest
from PIL import Image

from vlmpath.core.errors import VlmpathError
from vlmpath.measure.workload import preset
from vlmpath.serving.chat_requests import PATCH_PX, chat_requests
from vlmpath.serving.run_file import SCHEMA, load_run, parse_run, write_run
from vlmpath.serving.stats import agreement, first_difference, percentile


def _sizes(req) -> list[tuple[int, int]]:
    out = []
    for part in req.content:
        if part["type"] == "image_url":
            raw = base64.b64decode(part["image_url"]["url"].split(",", 1)[1])
            out.append(Image.open(io.BytesIO(raw)).size)
    return out


@pytest.mark.parametrize("name", ["many_small_images", "video", "multi_region", "few_large_images"])
def test_each_image_is_its_grid_at_the_patch_size(name):
    wl = preset(name, "tiny", 0)
    for req, chat in zip(wl.requests, chat_requests(name)):
        want = [(w * PATCH_PX, h * PATCH_PX) for it in req.items for t, h, w in it.grid_thw
                for _ in range(t if it.modality == "video" else 1)]
        assert _sizes(chat) == want and chat.images == len(want)


def test_video_is_its_frames_and_regions_one_image_each():
    video = chat_requests("video")[0]
    assert video.images == preset("video").requests[0].items[0].grid_thw[0][0] > 1
    regions = chat_requests("multi_region")
    assert [r.images for r in regions] == [len(r.items[0].grid_thw) for r in preset("multi_region").requests]


def test_equal_content_is_equal_images_and_the_seed_decides_the_bytes():
    reuse = chat_requests("cache_reuse")
    urls = lambda r: [p["image_url"]["url"] for p in r.content if p["type"] == "image_url"]  # noqa: E731
    assert urls(reuse[0]) == urls(reuse[2]) and urls(reuse[0]) != urls(reuse[1])
    assert chat_requests("video", seed=0) == chat_requests("video", seed=0)
    assert urls(chat_requests("video", seed=1)[0]) != urls(chat_requests("video", seed=0)[0])


def test_a_request_body_is_greedy_with_fixed_length():
    body = chat_requests("video")[0].body(model=None, max_tokens=8, stream=True, extra={"ignore_eos": True})
    assert body["temperature"] == 0 and body["max_tokens"] == 8 and body["ignore_eos"] and "model" not in body


def test_percentiles_and_agreement():
    assert percentile([], 50) is None
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0 and percentile([0.0, 10.0], 99) == pytest.approx(9.9)
    assert first_difference("abc", "abc") is None and first_difference("abc", "abd") == 2
    assert first_difference("ab", "abc") == 2
    assert agreement(["a", "b"], ["a", "b"]) == (1.0, None)
    assert agreement(["a", "bx", None], ["a", "by", "c"]) == (pytest.approx(1 / 3), 0)
    assert agreement(["a", "bx"], ["a", "by"]) == (0.5, 1)


def _doc(**case) -> dict:
    c = {"workload": "video", "concurrency": 1, "prompts": 2, "repeats": 1, "completed": 2, "errors": 0,
         "early_stops": 0, "request_per_s": 1.0, "input_tok_per_s": 100.0, "output_tok_per_s": 8.0,
         "ttft_p50_s": 0.1, "ttft_p99_s": 0.2, "itl_p50_s": 0.01, "itl_p99_s": 0.02, "agreement_solo": 1.0,
         "first_diff_solo": None, "error": None, "samples": {"output_tok_per_s": [8.0]}, "rids": [0, 1],
         "outputs": ["ab", "cd"]}
    c.update(case)
    return {"schema": SCHEMA, "server": {"kind": "transformers"}, "solo": {"video": ["ab", "cd"]}, "cases": [c]}


def test_a_run_file_round_trips(tmp_path):
    path = tmp_path / "run.json"
    write_run(path, _doc())
    run = load_run(path)
    assert run["cases"][0]["output_tok_per_s"] == 8.0 and run["solo"]["video"] == ["ab", "cd"]


@pytest.mark.parametrize("bad, says", [
    ({"workload": "../../etc"}, "workload"),
    ({"workload": "x" * 65}, "workload"),
    ({"concurrency": 0}, "concurrency"),
    ({"output_tok_per_s": math.inf}, "output_tok_per_s"),
    ({"output_tok_per_s": "fast"}, "output_tok_per_s"),
    ({"errors": True}, "errors"),
    ({"agreement_solo": 1.5}, "agreement_solo"),
    ({"outputs": ["x" * 70000]}, "outputs"),
    ({"samples": {"made_up": [1.0]}}, "samples"),
])
def test_a_run_file_out_of_shape_is_one_line_naming_the_field(bad, says):
    with pytest.raises(VlmpathError) as err:
        parse_run(json.loads(json.dumps(_doc(**bad), allow_nan=True)), "serve run 'x.json'")
    assert says in str(err.value) and "x.json" in str(err.value)


def test_not_a_run_and_a_level_twice_are_refused():
    with pytest.raises(VlmpathError, match="not a serve run"):
        parse_run({"schema": "other"}, "f")
    doc = _doc()
    doc["cases"] = doc["cases"] * 2
    with pytest.raises(VlmpathError, match="appears twice"):
        parse_run(doc, "f")
