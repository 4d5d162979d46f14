"""count_syncs(): which ops count as device-to-host syncs, host marks, nesting, GPU cross-check."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

from vlmpath.core.errors import VlmpathError
from vlmpath.measure.syncs import SyncCount, count_syncs, host, is_host, syncs_of


def _x() -> torch.Tensor:
    return torch.arange(12.0).reshape(3, 4)


def _mask() -> torch.Tensor:
    return _x() > 5


def _assign_bool(dest, mask):
    dest[mask] = torch.zeros(int(mask.sum().item()))


def _if_tensor(t):
    if t:
        return 1
    return 0


SYNCING = {
    # name: (fn, expected event)
    "nonzero": (lambda x, m: torch.nonzero(m), "aten.nonzero"),
    "where_one_arg": (lambda x, m: torch.where(m), "aten.nonzero"),
    "masked_select": (lambda x, m: x.masked_select(m), "aten.masked_select"),
    "unique": (lambda x, m: torch.unique(m.long()), "aten._unique2"),
    "bool_mask_index": (lambda x, m: x[m], "aten.index"),
    "bool_mask_assign_scalar": (lambda x, m: x.__setitem__(m, 1.0), "aten.index_put_"),
    "item": (lambda x, m: x.sum().item(), "Tensor.item"),
    "tolist": (lambda x, m: x.tolist(), "Tensor.tolist"),
    "cpu": (lambda x, m: x.cpu(), "Tensor.cpu"),
    "numpy": (lambda x, m: x.numpy(), "Tensor.numpy"),
    "bool": (lambda x, m: bool(m.any()), "Tensor.__bool__"),
    "if_tensor": (lambda x, m: _if_tensor(m.any()), "Tensor.__bool__"),
    "int": (lambda x, m: int(x.sum()), "Tensor.__int__"),
    "float": (lambda x, m: float(x.sum()), "Tensor.__float__"),
    "repeat_interleave_tensor": (lambda x, m: torch.repeat_interleave(m.sum(1)), "aten.repeat_interleave"),
    "equal": (lambda x, m: torch.equal(x, x), "aten.equal"),
    "one_hot_no_classes": (lambda x, m: F.one_hot(m.long().flatten()), "F.one_hot"),
    "masked_fill_device_value": (lambda x, m: x.masked_fill_(m, x[0, 0]), "aten.masked_fill_"),
    "format_0dim": (lambda x, m: f"{x.sum():.1f}", "Tensor.__format__"),
}

SYNC_FREE = {
    "where_three_args": lambda x, m: torch.where(m, x, 0.0),
    "masked_fill_": lambda x, m: x.masked_fill_(m, 0.0),
    "masked_scatter_": lambda x, m: x.masked_scatter_(m, torch.ones(12)),
    "split_by_list": lambda x, m: torch.split(x, [1, 2]),
    "isin": lambda x, m: torch.isin(m.long(), torch.tensor([1])),
    "clamp_": lambda x, m: x.clamp_(0, 3),
    "embedding": lambda x, m: F.embedding(torch.tensor([0, 2]), x),
    "index_select_long": lambda x, m: x.index_select(0, torch.tensor([0, 2])),
    "long_index_read": lambda x, m: x[torch.tensor([0, 2])],
    "long_index_assign": lambda x, m: x.__setitem__(torch.tensor([0, 2]), 1.0),
    "cat": lambda x, m: torch.cat([x, x]),
    "repeat_interleave_output_size": lambda x, m: torch.repeat_interleave(
        torch.tensor([1, 2]), output_size=3
    ),
    "one_hot_num_classes": lambda x, m: F.one_hot(m.long().flatten(), 2),
    "nonzero_static": lambda x, m: torch.nonzero_static(m, size=4),
}


@pytest.mark.parametrize("name", sorted(SYNCING))
def test_sync_op_is_counted(name):
    fn, event = SYNCING[name]
    x, m = _x(), _mask()
    with count_syncs() as sc:
        fn(x, m)
    assert sc.count >= 1
    assert event in sc.events


@pytest.mark.parametrize("name", sorted(SYNC_FREE))
def test_sync_free_op_is_not_counted(name):
    x, m = _x(), _mask()
    with count_syncs() as sc:
        SYNC_FREE[name](x, m)
    assert sc.count == 0, sc.events


def test_bool_mask_assign_from_tensor_counts_the_assign():
    x, m = _x(), _mask()
    with count_syncs() as sc:
        _assign_bool(x, m)
    # .item() for the length, then the index_put_ with a bool index.
    assert sc.events == {"Tensor.item": 1, "aten.index_put_": 1}


@pytest.mark.parametrize(
    "fn, event",
    [
        (lambda t: t.item(), "Tensor.item"),
        (lambda t: bool(t), "Tensor.__bool__"),
        (lambda t: int(t), "Tensor.__int__"),
        (lambda t: 3 in t, "Tensor.__contains__"),
    ],
    ids=["item", "bool", "int", "contains"],
)
def test_one_user_call_is_one_event(fn, event):
    t = torch.tensor(3)
    with count_syncs() as sc:
        fn(t)
    assert sc.events == {event: 1}  # not also aten._local_scalar_dense


def test_count_is_live_inside_the_block():
    x = _x()
    with count_syncs() as sc:
        x.sum().item()
        assert sc.count == 1
        x.tolist()
        assert sc.count == 2
    assert sc.events == {"Tensor.item": 1, "Tensor.tolist": 1}


def test_nothing_counted_after_the_block():
    x = _x()
    with count_syncs() as sc:
        pass
    x.sum().item()
    torch.nonzero(x)
    assert sc.count == 0


def test_block_exits_cleanly_on_error():
    x = _x()
    with pytest.raises(ValueError), count_syncs() as sc:
        x.sum().item()
        raise ValueError("boom")
    x.tolist()
    assert sc.events == {"Tensor.item": 1}


def test_host_grid_tolist_is_free_unmarked_costs_one():
    grid = torch.tensor([[1, 4, 4], [2, 6, 6]])
    plain = torch.tensor([[1, 4, 4], [2, 6, 6]])
    with count_syncs() as marked:
        lens = host(grid).prod(-1) // 4
        assert lens.tolist() == [4, 18]
    with count_syncs() as unmarked:
        (plain.prod(-1) // 4).tolist()
    assert marked.count == 0
    assert unmarked.count == 1
    assert unmarked.events == {"Tensor.tolist": 1}


def test_host_of_new_tensor_inside_block():
    with count_syncs() as sc:
        offsets = host(torch.tensor([0, 4, 10]))
        spans = offsets[1:] - offsets[:-1]
        n = int(spans.sum())
        if spans.max() > 5:
            n += spans.tolist()[0]
        idx = torch.nonzero(spans > 4)
    assert n == 14 and idx.tolist() == [[1]]
    assert sc.count == 0


def test_host_returns_same_tensor_and_marks_it():
    t = torch.tensor([1, 2])
    assert host(t) is t
    assert is_host(t)
    assert not is_host(torch.tensor([1, 2]))


def test_host_rejects_non_tensor():
    with pytest.raises(VlmpathError, match="list"):
        host([1, 2])


def test_host_propagation_stops_at_device_inputs():
    grid, x = host(torch.tensor([2, 3])), torch.tensor([5, 7])
    with count_syncs() as sc:
        pure = grid * 2
        mixed = grid + x
        mixed.tolist()
    assert is_host(pure)
    assert not is_host(mixed)
    assert sc.events == {"Tensor.tolist": 1}


def test_device_tensor_indexed_by_host_mask_is_free():
    x, mask = _x(), host(_mask())
    with count_syncs() as sc:
        x[mask]
        x[mask] = 0.0
    assert sc.count == 0


def test_cpu_result_is_host_and_input_stays_device():
    x = _x()
    with count_syncs() as sc:
        y = x.cpu()
        y.tolist()
        int(y.sum())
    assert sc.events == {"Tensor.cpu": 1}
    assert is_host(y) and not is_host(x)
    assert torch.equal(y, x)


def test_copy_device_into_host_buffer_is_a_readback():
    buf, x = host(torch.zeros(3)), torch.ones(3)
    with count_syncs() as sc:
        buf.copy_(x)  # D2H
        x.copy_(buf)  # H2D: not a readback
    assert sc.events == {"aten.copy_": 1}


def test_masked_fill_with_host_value_tensor_is_free():
    x, m = _x(), _mask()
    with count_syncs() as sc:
        x.masked_fill_(m, host(torch.tensor(0.0)))
    assert sc.count == 0


def test_nested_block_is_excluded_from_outer():
    x, m = _x(), _mask()
    with count_syncs() as outer:
        x.sum().item()
        with count_syncs() as inner:
            torch.nonzero(m)
            x.tolist()
            assert outer.count == 1
        bool(m.any())
    assert inner.events == {"aten.nonzero": 1, "Tensor.tolist": 1}
    assert outer.events == {"Tensor.item": 1, "Tensor.__bool__": 1}


def test_paused_region_is_not_counted():
    x = _x()
    with count_syncs() as sc:
        with sc.paused():
            x.tolist()
            g = host(torch.tensor([1, 2])) * 2
        x.sum().item()
    assert sc.events == {"Tensor.item": 1}
    assert is_host(g)  # marks still propagate while paused


def test_record_stacks_names_this_file():
    x = _x()
    with count_syncs(record_stacks=True) as sc:
        x.sum().item()
    assert len(sc.sites) == 1
    site = sc.sites[0]
    assert site.op == "Tensor.item"
    assert site.stack and "test_syncs.py" in site.stack[-1]
    assert "test_record_stacks_names_this_file" in site.stack[-1]


def test_stacks_not_recorded_by_default():
    with count_syncs() as sc:
        _x().tolist()
    assert sc.count == 1 and sc.sites == []


def test_syncs_of_forwards_arguments():
    calls = []

    def fn(t, *, k):
        calls.append(k)
        return torch.nonzero(t)

    sc = syncs_of(fn, _mask(), k=3)
    assert isinstance(sc, SyncCount)
    assert calls == [3]
    assert sc.events == {"aten.nonzero": 1}


def test_driver_count_is_none_on_cpu():
    assert not torch.cuda.is_available()
    with count_syncs() as sc:
        _x().tolist()
    assert sc.driver_count is None
    assert sc.to_dict() == {"count": 1, "events": {"Tensor.tolist": 1}, "driver_count": None}


class _FakeCuda:
    """Stands in for torch.cuda's sync debug API; ``sync()`` warns like c10 does in "warn"."""

    def __init__(self) -> None:
        self.mode = 0
        self.set_calls: list = []

    def get(self):
        return self.mode

    def set(self, mode):
        self.set_calls.append(mode)
        self.mode = {"default": 0, "warn": 1, "error": 2}.get(mode, mode)

    def sync(self):
        if self.mode == 1:
            warnings.warn("called a synchronizing CUDA operation (Triggered internally)")


@pytest.fixture
def fake_cuda(monkeypatch):
    fake = _FakeCuda()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_sync_debug_mode", fake.get)
    monkeypatch.setattr(torch.cuda, "set_sync_debug_mode", fake.set)
    return fake


def test_gpu_branch_arms_counts_and_restores(fake_cuda):
    x = _x()
    with count_syncs() as sc:
        assert fake_cuda.mode == 1  # armed in "warn"
        x.sum().item()
        fake_cuda.sync()
        fake_cuda.sync()  # same line twice: both must count
    assert sc.driver_count == 2
    assert sc.count == 1
    assert fake_cuda.set_calls == ["warn", 0]
    assert fake_cuda.mode == 0


def test_gpu_branch_restores_previous_mode_on_error(fake_cuda):
    fake_cuda.mode = 2
    with pytest.raises(RuntimeError), count_syncs():
        raise RuntimeError("boom")
    assert fake_cuda.mode == 2


def test_gpu_branch_passes_other_warnings_on(fake_cuda):
    with pytest.warns(DeprecationWarning, match="unrelated"):
        with count_syncs() as sc:
            fake_cuda.sync()
            warnings.warn("unrelated", DeprecationWarning)
    assert sc.driver_count == 1


def test_gpu_branch_nested_driver_counts_split(fake_cuda):
    with count_syncs() as outer:
        fake_cuda.sync()
        with count_syncs() as inner:
            fake_cuda.sync()
            fake_cuda.sync()
        assert fake_cuda.mode == 1  # inner restored the outer's "warn"
    assert (outer.driver_count, inner.driver_count) == (1, 2)
    assert fake_cuda.mode == 0
