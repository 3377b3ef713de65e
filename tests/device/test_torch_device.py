"""`fingrav.device.torch_device` without a GPU: its torch-free helpers (kernel sizes, input-set rotation, graph
pieces), the preparation of each kernel kind through the kind registry, and `TorchGPUDevice`'s bookkeeping on the
fake torch (`fingrav.testing.fakes.fake_torch`: executions stamped, graphs captured and cached, adaptive unstamped
runs, clock reads, the stream fallback). Attention and user kernels: tests/device/test_torch_kernels.py; the NVML
device on top: tests/device/test_nvml.py; collectives: tests/collect/test_collectives.py."""

from __future__ import annotations

import sys
import time

import numpy as np
import pytest

from fingrav.config import AllGatherKernel, AllReduceKernel, AttentionKernel, CallableKernel, GemmKernel, GemvKernel
from fingrav.device.torch_device import (
    chunk_size,
    collective_sizes,
    input_sets_needed,
    kernel_sizes,
    plan_pieces,
)
from fingrav.errors import DeviceError
from fingrav.kinds import KINDS
from fingrav.testing.fakes.fake_torch import FakeGPUClock, device_class, fake_torch_module


@pytest.fixture
def fake_torch(monkeypatch):
    clock = FakeGPUClock()
    monkeypatch.setitem(sys.modules, "torch", fake_torch_module(clock))
    return clock


# --------------------------------------------------------------------------- torch-free helpers
def test_input_set_rotation():
    l2 = 50 * 2**20
    gemm2k = kernel_sizes(GemmKernel(m=2048, n=2048, k=2048))["set_bytes"]  # 16 MiB
    assert input_sets_needed(gemm2k, l2) == 7  # 112 MiB >= 2 x L2
    gemm8k = kernel_sizes(GemmKernel(m=8192, n=8192, k=8192))["set_bytes"]
    assert input_sets_needed(gemm8k, l2) == 1
    assert input_sets_needed(gemm2k, l2, budget_bytes=3 * gemm2k) == 3
    assert input_sets_needed(1, l2) == 64  # capped
    assert input_sets_needed(gemm2k, 0) == 1  # unknown L2
    # at least min_sets placements (results/h200-card-state), within the memory budget and the cap
    assert input_sets_needed(gemm8k, l2, min_sets=4) == 4
    assert input_sets_needed(gemm2k, l2, min_sets=4) == 7  # L2 rotation needs more already
    assert input_sets_needed(gemm8k, l2, min_sets=4, budget_bytes=2 * gemm8k) == 2
    assert input_sets_needed(gemm8k, 0, min_sets=4) == 4
    assert input_sets_needed(gemm8k, l2, min_sets=100) == 64


def test_kernel_sizes():
    g = kernel_sizes(GemmKernel(m=4, n=5, k=6))
    assert g["a"] == (4, 6) and g["b"] == (6, 5) and g["out"] == (4, 5) and g["flops"] == 240
    v = kernel_sizes(GemvKernel(m=4096, k=4096, dtype="fp32"))
    assert v["b"] == (4096,) and v["out"] == (4096,) and v["set_bytes"] == (4096 * 4096 + 4096) * 4
    with pytest.raises(DeviceError, match="has no entry in fingrav.kinds.KINDS"):
        kernel_sizes(object())  # a kind without a registry entry
    with pytest.raises(DeviceError, match="cannot run kernel kind 'callable'"):
        kernel_sizes(CallableKernel(target="json:dumps", dtype="fp32"))  # a user kernel has no shapes


@pytest.mark.parametrize("count", [0, 1, 4, 5, 255, 256, 257, 1000, 2403])
@pytest.mark.parametrize("n_sets", [1, 7, 13])
def test_graph_pieces_cover_the_count_and_keep_the_rotation(count, n_sets):
    chunk = chunk_size(n_sets)
    assert chunk % n_sets == 0 and chunk >= 256
    pieces = plan_pieces(count, chunk, n_sets)
    assert sum(size for size, _ in pieces) == count
    done = 0
    for size, offset in pieces:
        assert offset == done % n_sets  # execution j of the segment uses input set j % n_sets
        done += size
    rest = [size for size, _ in pieces if size != chunk]
    assert len(rest) == len(set(rest)) and all(s & (s - 1) == 0 for s in rest)  # distinct powers of two


def test_collective_sizes() -> None:
    ar = collective_sizes(AllReduceKernel(size_bytes=1 << 20), 4)
    assert ar["a"] == ar["out"] == (1 << 19,) and ar["bytes"] == ar["set_bytes"] == 1 << 20 and ar["world_size"] == 4
    ag = collective_sizes(AllGatherKernel(size_bytes=1 << 20, dtype="fp32"), 4)
    assert ag["a"] == (1 << 16,) and ag["out"] == (1 << 18,) and ag["set_bytes"] == 1 << 18
    assert kernel_sizes(AllReduceKernel(size_bytes=1024))["world_size"] == 1
    with pytest.raises(DeviceError, match="do not split into 3 equal parts"):
        collective_sizes(AllGatherKernel(size_bytes=1024), 3)
    with pytest.raises(DeviceError, match="not a collective"):
        collective_sizes(GemmKernel(m=2, n=2, k=2), 2)


def test_kernel_sizes_agree_with_the_work_model() -> None:
    for k in (GemmKernel(m=64, n=32, k=16), GemvKernel(m=64, k=32, dtype="fp16"),
              AttentionKernel(batch=1, heads=2, q_len=8, kv_len=16, head_dim=8)):  # fmt: skip
        sz, work = kernel_sizes(k), k.work()
        assert sz["flops"] == work.flop and sz["bytes"] == work.bytes


# --------------------------------------------------------------------------- preparation through the kind registry
def test_prepare_calls_the_method_the_kind_registry_names(fake_torch, monkeypatch) -> None:
    cls = device_class(fake_torch)
    called: list[tuple[str, str]] = []
    for name in {k.torch_prepare for k in KINDS.values()}:
        monkeypatch.setattr(cls, name, lambda self, kernel, _n=name: called.append((_n, kernel.kind)) or _n)
    dev = cls()
    kernels = [GemmKernel(m=8, n=8, k=8), GemvKernel(m=8, k=8), AllReduceKernel(size_bytes=64),
               AllGatherKernel(size_bytes=64), AttentionKernel(batch=1, heads=1, q_len=4, kv_len=4, head_dim=4),
               CallableKernel(target="json:dumps")]  # fmt: skip
    assert sorted(k.kind for k in kernels) == sorted(KINDS)
    for k in kernels:
        assert dev.prepare(k) == KINDS[k.kind].torch_prepare
    assert called == [(KINDS[k.kind].torch_prepare, k.kind) for k in kernels]
    with pytest.raises(DeviceError, match="no entry"):
        dev.prepare(type("Conv", (), {"kind": "conv"})())
    dev.close()


def test_a_prepared_gemm_describes_itself_and_runs_on_the_device_stream(fake_torch) -> None:
    dev = device_class(fake_torch)()
    k = dev.prepare(GemmKernel(m=16, n=8, k=8))
    d = k.describe()
    assert d["label"] == "gemm 16x8x8 bf16" and k.n_sets >= 1
    rec = dev.execute([(k, 5)])
    assert np.all(rec.duration_ns == 2000 + 10)  # the fake matmul: 1000 ns per 8 rows, + one stamp
    dev.close()


# --------------------------------------------------------------------------- TorchGPUDevice on a fake torch
def test_every_kernel_rotates_through_placement_sets(fake_torch):
    """A kernel too big for L2 rotation still gets PLACEMENT_SETS input sets (results/h200-card-state); fewer only
    when asked (min_input_sets) or when they would not fit in memory."""
    from fingrav.device.base import PLACEMENT_SETS

    big = GemvKernel(m=64, k=64)  # 8 KiB a set, the fake's L2 1000 B: no L2 rotation needed
    dev = device_class(fake_torch)()
    h = dev.prepare(big)
    assert PLACEMENT_SETS == 4 and h.n_sets == PLACEMENT_SETS and h.describe()["input_sets"] == PLACEMENT_SETS
    assert len({id(a.a) for a, _ in h.sets}) == PLACEMENT_SETS  # separately allocated
    dev.close()
    one = device_class(fake_torch)(min_input_sets=1)
    assert one.prepare(big).n_sets == 1
    one.close()


def test_execute_records_rotation_and_graph_cache(fake_torch):
    dev = device_class(fake_torch)(stamp_capacity=16)
    k8 = dev.prepare(GemmKernel(m=8, n=8, k=8))  # 256 B a set, L2 1000 B -> 8 sets
    k16 = dev.prepare(GemvKernel(m=16, k=16))
    assert k8.n_sets == 8 and k8.chunk == 256
    assert all(np.any(a.a != 0) for a, _ in k8.sets)  # random, never zeros
    fake_torch.sets.clear()
    rec = dev.execute([(k16, 3), (k8, 1000)])
    assert len(rec) == 1003
    assert rec.segment.tolist() == [0] * 3 + [1] * 1000
    assert rec.exec_index.tolist() == [0, 1, 2] + list(range(1000))
    assert np.all(rec.duration_ns[:3] == 2010) and np.all(rec.duration_ns[3:] == 1010)  # kernel + one stamp
    assert np.all(rec.gpu_start_ns[1:] - rec.gpu_end_ns[:-1] == 10)  # back to back: only a stamp between
    set_ids = [id(a) for a, _ in k8.sets]
    assert fake_torch.sets[3:] == [set_ids[j % 8] for j in range(1000)]  # rotation across graph pieces
    captures = fake_torch.captures
    assert captures == len(plan_pieces(3, k16.chunk, 1)) + len(set(plan_pieces(1000, 256, 8)))
    again = dev.execute([(k16, 3), (k8, 1000)])
    assert fake_torch.captures == captures  # cached
    assert np.array_equal(again.duration_ns, rec.duration_ns)
    dev.launch_mode = "stream"
    stream = dev.execute([(k16, 3), (k8, 1000)])
    assert np.array_equal(stream.duration_ns, rec.duration_ns) and fake_torch.captures == captures
    assert len(dev.execute([(k8, 0)])) == 0
    dev.close()


def test_adaptive_unstamped_run_asks_more_with_one_part_queued_and_counts_every_execution(fake_torch):
    dev = device_class(fake_torch)()
    k = dev.prepare(GemmKernel(m=8, n=8, k=8))
    asked: list[int] = []

    def more(done: int) -> int:
        asked.append(done)
        return 300 if len(asked) < 3 else 0  # rounded up to whole parts

    events = fake_torch.events
    rec = dev.run_unstamped(k, 1000, more=more, part=k.chunk)
    n = int(rec.exec_index[-1]) + 1
    parts = -(-1000 // k.chunk)
    # asked once the last planned part is the only one left: after parts - 1 parts, then after each part added
    assert asked[0] == (parts - 1) * k.chunk and len(asked) == 3
    assert n == 1000 + 2 * -(-300 // k.chunk) * k.chunk
    assert rec.duration_ns.tolist() == [n * 1000 + 10]  # back to back, one stamp at each end
    assert fake_torch.events - events == parts + 2 * -(-300 // k.chunk)  # one event per part
    dev.close()


def test_an_adaptive_run_of_a_long_kernel_asks_within_a_graph_chunk(fake_torch):
    dev = device_class(fake_torch)()
    k = dev.prepare(GemmKernel(m=8, n=8, k=8))
    asked: list[int] = []
    rec = dev.run_unstamped(k, 140, more=lambda done: asked.append(done) or 0, part=12)  # 12 executions < one chunk
    assert asked and asked[0] < 140 and int(rec.exec_index[-1]) + 1 == 140
    unit = max(1, k.n_sets)
    assert asked[0] % unit == 0  # parts are whole rounds of the input sets: the rotation stays seamless
    dev.close()


def test_unstamped_spin_series_and_clock_reads(fake_torch):
    dev = device_class(fake_torch)()
    k = dev.prepare(GemmKernel(m=8, n=8, k=8))
    one = dev.run_unstamped(k, 100)
    assert one.duration_ns.tolist() == [100 * 1000 + 10] and one.exec_index.tolist() == [99]
    assert dev.spin(123_456).duration_ns.tolist() == [123_456]  # deadline anchored to the start stamp
    assert np.all(np.diff(dev.stamp_series(50)) == 10)
    assert np.all(np.diff(dev.stamp_series(50, use_graph=False)) == 10)
    reads = dev.read_gpu_clock(20)
    assert len(reads) == 20 and np.all(np.diff(reads.gpu_ns) == 10)
    assert np.all(reads.host_after_ns >= reads.host_before_ns)
    t0 = time.perf_counter_ns()
    dev.sleep_ns(2_000_000)
    assert time.perf_counter_ns() - t0 >= 2_000_000
    d = dev.describe()
    assert d["stamp_kernel"] == "fake-stamp" and d["launch_mode"] == "graph" and d["sm_count"] == 132
    assert dev.gpu_uuid() == "00000000-1111-2222-3333-444444444444"


def test_capture_failure_falls_back_to_stream_launches(fake_torch):
    dev = device_class(fake_torch)()
    k = dev.prepare(GemmKernel(m=8, n=8, k=8))
    fake_torch.fail_capture = True
    rec = dev.execute([(k, 5)])
    assert dev.launch_mode == "stream" and np.all(rec.duration_ns == 1010)


def test_missing_stamps_and_foreign_handles_are_errors(fake_torch):
    dev = device_class(fake_torch, skip_every=7)(launch_mode="stream")
    k = dev.prepare(GemmKernel(m=8, n=8, k=8))
    with pytest.raises(DeviceError, match="written where"):
        dev.execute([(k, 10)])
    other = device_class(fake_torch)()
    with pytest.raises(DeviceError, match="not prepared by this device"):
        other.execute([(k, 1)])
    with pytest.raises(DeviceError, match="kernel kind 'conv' has no entry in fingrav.kinds.KINDS"):
        other.prepare(types_namespace(kind="conv"))  # the kind registry names the preparation of every kind


def types_namespace(**kw):
    import types

    return types.SimpleNamespace(**kw)


def test_released_kernels_free_their_inputs_and_a_reset_device_prepares_as_a_new_one(fake_torch, monkeypatch):
    """A device kept open across scenarios (`fingrav.stages.collect.KeptDevice`): `release_kernels` drops every
    prepared kernel's input sets, output and graphs (even while a handle is still referenced) and empties torch's
    cache; after `reset_for_next_scenario` the next kernel gets the inputs, the launch mode and the idle a newly
    opened device would give it."""
    emptied: list[int] = []
    monkeypatch.setattr(sys.modules["torch"].cuda, "empty_cache", lambda: emptied.append(1), raising=False)
    cls = device_class(fake_torch)
    dev = cls(seed=5)
    k = dev.prepare(GemmKernel(m=8, n=8, k=8))
    v = dev.prepare(GemvKernel(m=16, k=16))
    dev.execute([(k, 3)])
    assert k.graphs and k.n_sets > 1
    dev.mark_busy_end()
    fake_torch.fail_capture = True
    dev.execute([(v, 2)])  # a capture failure switches this device to stream launches
    assert dev.launch_mode == "stream" and dev.graph_capture_error
    fake_torch.fail_capture = False
    dev.reset_for_next_scenario()
    assert emptied == [1]
    for h in (k, v):  # still referenced here, but holding nothing, and refused
        assert h.sets == [] and h.out is None and h.graphs == {}
        with pytest.raises(DeviceError, match="released"):
            dev.execute([(h, 1)])
    assert dev.launch_mode == "graph" and dev.graph_capture_error is None
    assert dev.idle_left_ns(10**9) == 10**9  # no run has ended on the device as reset
    again = dev.prepare(GemmKernel(m=8, n=8, k=8))
    new = cls(seed=5).prepare(GemmKernel(m=8, n=8, k=8))
    assert again.n_sets == new.n_sets
    for (a, b), (c, d) in zip(again.sets, new.sets, strict=True):  # the first kernel's inputs of a new device
        assert np.array_equal(a.a, c.a) and np.array_equal(b.a, d.a)
    dev.close()
    dev.release_kernels()  # a closed device has nothing left to release: a no-op
