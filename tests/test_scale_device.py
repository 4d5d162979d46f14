"""Is a GPU scale refused on a CPU before any case runs, with the fix (and an explicit override)?

``vlmpath measure --scale full`` on a CPU used to run for minutes and take 2.4 GB. Now the
real CLI exits 2 with one line naming the scale, the device and both ways out.
"""

from __future__ import annotations

import pytest

from vlmpath.cli import main
from vlmpath.core.errors import VlmpathError
from vlmpath.core.scales import DEFAULT_SCALE, SCALES
from vlmpath.suite.inputs import check_scale_device

GPU_SCALES = [name for name, s in SCALES.items() if s.gpu]


@pytest.mark.parametrize("scale", GPU_SCALES)
def test_measure_at_a_gpu_scale_on_a_cpu_exits_2_with_the_fix(scale, capsys, tmp_path):
    out = tmp_path / "m.jsonl"
    rc = main(["measure", "--scale", scale, "--device", "cpu", "--repeat", "1", "--json", str(out)])
    err = capsys.readouterr().err
    assert rc == 2
    assert f"--scale {scale} needs a" in err and "on cpu" in err
    assert f"--scale {DEFAULT_SCALE}" in err and "--allow-cpu" in err
    assert "Traceback" not in err and not out.exists()  # refused before any case ran


def test_the_check_lets_gpu_devices_cpu_scales_and_the_override_through():
    assert GPU_SCALES  # the table still has a scale that needs a GPU
    for scale in GPU_SCALES:
        check_scale_device(scale, "cuda:0")
        check_scale_device(scale, "cpu", allow_cpu=True)
        with pytest.raises(VlmpathError):
            check_scale_device(scale, "cpu")
    check_scale_device(DEFAULT_SCALE, "cpu")
