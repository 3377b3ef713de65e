"""A fake torch for `fingrav.device.torch_device` without a GPU: a numpy-backed tensor, CUDA graphs that record
and replay Python operations, and a GPU clock (`FakeGPUClock`, ns) that each fake kernel advances; the fake
stamper and spinner of a `TorchGPUDevice` subclass (`device_class`). Shared by tests/device/test_nvml.py,
test_torch_device.py, test_torch_kernels.py and tests/collect/test_collectives.py."""

from __future__ import annotations

import numpy as np

from fingrav.device.base import PowerSamples


class FakeGPUClock:
    """The fake GPU's clock (ns) and its log of matmul input sets."""

    def __init__(self) -> None:
        self.t = 1_000_000_000
        self.sets: list[int] = []
        self.capturing: list | None = None
        self.captures = 0
        self.fail_capture = False
        self.events = 0


class FTensor:
    """A numpy-backed stand-in for the few torch.Tensor methods the device uses."""

    def __init__(self, a: np.ndarray) -> None:
        self.a = a

    def __getitem__(self, key):
        return FTensor(self.a[key])

    def copy_(self, other, non_blocking=False):
        self.a[...] = other.a
        return self

    def zero_(self):
        self.a[...] = 0
        return self

    def numpy(self):
        return self.a

    def to(self, dtype):
        return FTensor(self.a.astype(dtype))

    def item(self):
        return self.a.item()

    def __int__(self):
        return int(self.a)

    def data_ptr(self):
        return self.a.ctypes.data


def fake_torch_module(clock: FakeGPUClock, l2_bytes: int = 1000):
    import contextlib
    import types

    def run_or_record(op):
        if clock.capturing is not None:
            clock.capturing.append(op)
        else:
            op()

    def matmul(a, b, out):
        def op():
            out.a[...] = a.a @ b.a
            clock.sets.append(id(a))
            clock.t += 1000 * (a.a.shape[0] // 8)

        run_or_record(op)

    class CUDAGraph:
        def __init__(self):
            self.ops = []

        def replay(self):
            for op in self.ops:
                op()

    @contextlib.contextmanager
    def graph(g, pool=None, stream=None):
        if clock.fail_capture:
            raise RuntimeError("capture is not supported here")
        clock.capturing = g.ops
        clock.captures += 1
        try:
            yield
        finally:
            clock.capturing = None

    class Stream:
        def __init__(self, device=None):
            pass

        def synchronize(self):
            pass

    class Event:  # the fake GPU runs every op at launch: an event is complete when recorded
        def record(self, stream=None):
            clock.events += 1

        def synchronize(self):
            pass

    class Generator:
        def __init__(self, device=None):
            self.seed = 0

        def manual_seed(self, seed):
            self.seed = seed

    def randn(size, generator=None, device=None, dtype=None):
        rng = np.random.default_rng(generator.seed if generator else 0)
        generator.seed += 1
        return FTensor(rng.standard_normal(size).astype(dtype or np.float32))

    props = types.SimpleNamespace(
        name="Fake H200",
        multi_processor_count=132,
        L2_cache_size=l2_bytes,
        total_memory=141 * 2**30,
        major=9,
        minor=0,
        uuid=types.SimpleNamespace(bytes=list(bytes.fromhex("00000000111122223333444444444444"))),
    )
    cuda = types.SimpleNamespace(
        is_available=lambda: True,
        device_count=lambda: 1,
        get_device_properties=lambda i: props,
        Stream=Stream,
        stream=lambda s: contextlib.nullcontext(),
        device=lambda i: contextlib.nullcontext(),
        mem_get_info=lambda i=None: (100 * 2**30, 141 * 2**30),
        CUDAGraph=CUDAGraph,
        Event=Event,
        graph=graph,
        graph_pool_handle=lambda: object(),
        synchronize=lambda device=None: None,
    )
    torch = types.ModuleType("torch")
    torch.__dict__.update(
        __version__="2.11.0+fake",
        version=types.SimpleNamespace(cuda="13.0", hip=None),
        cuda=cuda,
        device=lambda kind, idx=None: f"{kind}:{idx}",
        int64=np.int64,
        int32=np.int32,
        float32=np.float32,
        bfloat16=np.float32,
        float16=np.float16,
        Generator=Generator,
        randn=randn,
        matmul=matmul,
        zeros=lambda size, dtype=None, device=None, pin_memory=False: FTensor(np.zeros(size, dtype)),
        empty=lambda size, dtype=None, device=None, pin_memory=False: FTensor(np.zeros(size, dtype)),
        backends=types.SimpleNamespace(cuda=types.SimpleNamespace(matmul=types.SimpleNamespace(allow_tf32=False))),
    )
    return torch


class FakeStamper:
    name = "fake-stamp"

    def __init__(self, clock: FakeGPUClock, skip_every: int = 0) -> None:
        self.clock, self.skip_every, self.calls = clock, skip_every, 0

    def stamp(self, buf, counter):
        self.calls += 1
        if self.skip_every and self.calls % self.skip_every == 0:
            return

        def op():
            i = int(counter.a[0])
            buf.a[i] = self.clock.t
            counter.a[0] = i + 1
            self.clock.t += 10

        if self.clock.capturing is not None:
            self.clock.capturing.append(op)
        else:
            op()

    def to_ns(self, raw):
        return np.asarray(raw, np.int64)


class FakeSpinner:
    name = "fake-spin"

    def __init__(self, clock: FakeGPUClock) -> None:
        self.clock = clock

    def launch(self, t0, duration_ns):
        self.clock.t = max(self.clock.t, int(t0.a[0]) + duration_ns)


def device_class(clock: FakeGPUClock, base=None, skip_every: int = 0):
    from fingrav.device.torch_device import TorchGPUDevice

    class TestDevice(base or TorchGPUDevice):
        def _make_stamper(self):
            return FakeStamper(clock, skip_every)

        def _make_spinner(self):
            return FakeSpinner(clock)

    if base is None:
        TestDevice.channels = property(lambda self: ("total",))
        for name in ("start_sampling", "drain_samples", "stop_sampling"):
            setattr(TestDevice, name, lambda self: PowerSamples.empty())
        TestDevice.__abstractmethods__ = frozenset()
    return TestDevice
