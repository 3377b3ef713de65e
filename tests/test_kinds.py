"""The kernel-kind registry (`fingrav.kinds`): every member of the config's `Kernel` union has one complete entry,
and each entry's hooks exist and work on its example (the config model, the work model, the torch preparation,
the simulator model on every preset, the export fields); a kind without an entry fails loudly.

The "new kernel kind" drill of docs/ARCHITECTURE.md is what these tests enforce."""

from __future__ import annotations

import dataclasses

import pytest
from pydantic import TypeAdapter

from fingrav import config as C
from fingrav.contracts.work import Work
from fingrav.errors import ConfigError
from fingrav.kinds import KINDS, KernelKind, is_collective, kind_of
from fingrav.testing.drills import drill_files

UNION_KINDS = [m.model_fields["kind"].default for m in C.KERNEL_MODELS]
KERNEL = TypeAdapter(C.Kernel)


def test_every_kind_of_the_union_has_an_entry_and_every_entry_a_member() -> None:
    assert sorted(UNION_KINDS) == sorted(KINDS)
    assert len(set(UNION_KINDS)) == len(UNION_KINDS)
    assert all(name == k.kind for name, k in KINDS.items())


@pytest.mark.parametrize("kind", UNION_KINDS)
def test_each_entry_is_complete(kind: str) -> None:
    entry = kind_of(kind)
    for f in dataclasses.fields(KernelKind):
        value = getattr(entry, f.name)
        assert value is not None and value != "", f"{kind}: {f.name} is empty"
    model_cls = getattr(C, entry.model)
    assert model_cls in C.KERNEL_MODELS and model_cls.model_fields["kind"].default == kind
    kernel = KERNEL.validate_python(dict(entry.example))
    assert type(kernel) is model_cls and kind_of(kernel) is entry and kind_of(kernel.model_dump()) is entry
    assert kernel.label(), "a label for figures and tables"


@pytest.mark.parametrize("kind", UNION_KINDS)
def test_work_model(kind: str) -> None:
    entry = kind_of(kind)
    kernel = KERNEL.validate_python(dict(entry.example))
    work = entry.work(kernel)
    assert work == kernel.work()  # the config model's work() is the registry's
    if entry.collective:
        assert work is None  # a bus bandwidth, not a memory one: no throughput columns
    else:
        assert isinstance(work, Work) and (work.flop or 0) + (work.bytes or 0) > 0


def test_work_formulas() -> None:
    assert C.GemmKernel(m=2, n=3, k=4, dtype="fp32").work() == Work(flop=48.0, bytes=4.0 * (8 + 12 + 6), source="model")
    assert C.GemvKernel(m=4, k=8).work() == Work(flop=64.0, bytes=2.0 * (32 + 8 + 4), source="model")
    causal = C.AttentionKernel(batch=1, heads=2, q_len=4, kv_len=4, head_dim=8, causal=True).work()
    assert causal.flop == 4.0 * 2 * 4 * 4 * 8 * 0.5 and causal.bytes == 2.0 * 2 * 8 * 16
    assert C.CallableKernel(target="json:dumps").work() is None
    assert C.CallableKernel(target="json:dumps", bytes=5.0).work() == Work(flop=None, bytes=5.0, source="declared")


@pytest.mark.parametrize("kind", UNION_KINDS)
def test_torch_preparation_exists(kind: str) -> None:
    from fingrav.device.torch_device import TorchGPUDevice  # no torch needed to import it

    assert callable(getattr(TorchGPUDevice, kind_of(kind).torch_prepare, None))


@pytest.mark.parametrize("kind", UNION_KINDS)
def test_simulator_models_it_on_every_preset(kind: str) -> None:
    from fingrav.device.sim import PRESETS, SimulatedGPU

    entry = kind_of(kind)
    kernel = KERNEL.validate_python(dict(entry.example))
    for name, preset in PRESETS.items():
        assert kind in preset.shapes, f"preset {name} has no kernel shape for {kind}"
        dev = SimulatedGPU(C.SimConfig(preset=name), world_size=2 if entry.collective else 1)
        sk = dev.prepare(kernel)
        assert sk.kind == kind and sk.base_ns > 0 and sk.shape is preset.shapes[kind]


@pytest.mark.parametrize("kind", UNION_KINDS)
def test_export_fields(kind: str) -> None:
    entry = kind_of(kind)
    kernel = KERNEL.validate_python(dict(entry.example))
    d = kernel.model_dump()
    names = [n for n, _ in entry.export_shape(d)]
    if kind == "callable":
        assert names == sorted(kernel.args)
    else:
        assert names and set(names) <= set(type(kernel).model_fields)
    assert entry.export_source(d, {"sdpa_backend": "flash"})


def test_a_kind_without_an_entry_fails_loudly() -> None:
    with pytest.raises(ConfigError, match=r"kernel kind 'conv' has no entry in fingrav.kinds.KINDS"):
        kind_of({"kind": "conv"})
    with pytest.raises(ConfigError):
        is_collective({"kind": "conv"})  # never "not a collective" by default
    from fingrav.export import _kernel_source

    with pytest.raises(ConfigError):
        _kernel_source({"kind": "conv"}, {}, None)  # never "torch.distributed" by default
    assert is_collective(C.AllGatherKernel(size_bytes=1024)) and not is_collective({"kind": "gemm"})


# --------------------------------------------------------------------------- the drill in docs/ARCHITECTURE.md
KIND_DRILL = (
    "fingrav/config.py",  # the model in the union (test_every_kind_of_the_union_has_an_entry_and_every_entry_a_member)
    "fingrav/kinds.py",  # the entry and its work model (test_each_entry_is_complete, test_work_model)
    "fingrav/device/torch_device.py",  # torch_prepare (test_torch_preparation_exists)
    "fingrav/device/sim/kernels.py",  # the simulator model (test_simulator_models_it_on_every_preset)
    "fingrav/device/sim/presets.py",  # its shape on every preset (test_simulator_models_it_on_every_preset)
    "config/schema.json",  # tests/test_config.py::test_schema_file_in_sync_with_models
)


def test_the_documented_drill_is_what_these_tests_check() -> None:
    assert drill_files("Adding a kernel kind") == list(KIND_DRILL)
