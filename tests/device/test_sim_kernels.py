"""The simulator's roofline of attention and of user callables (fingrav/device/sim/kernels.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fingrav.config import AttentionKernel, CallableKernel, GemmKernel, SimConfig
from fingrav.device.sim import PRESETS, SimulatedGPU
from fingrav.device.sim.kernels import build_kernel
from fingrav.errors import ConfigError, DeviceError

PREFILL = AttentionKernel(batch=1, heads=32, q_len=4096, kv_len=4096, head_dim=128, causal=True)
DECODE = AttentionKernel(batch=16, heads=32, q_len=1, kv_len=4096, head_dim=128)


@pytest.mark.parametrize("preset", ["mi300x", "h200"])
def test_attention_roofline_prefill_compute_bound_decode_memory_bound(preset: str) -> None:
    p = PRESETS[preset]
    pre, dec = build_kernel(p, PREFILL), build_kernel(p, DECODE)
    assert pre.flops == PREFILL.work().flop and dec.bytes == DECODE.work().bytes
    assert pre.u_compute > 2 * pre.u_memory and dec.u_memory > 100 * dec.u_compute  # compute- vs memory-bound
    # the decode step is memory time: bytes at the size-dependent bandwidth efficiency, + the fixed overhead
    eff_m = p.eff_memory_max * dec.bytes / (dec.bytes + p.eff_memory_half_bytes)
    assert dec.base_ns == pytest.approx(dec.bytes / (p.peak_bw_bytes_s * eff_m) * 1e9 + p.overhead_ns)
    # the prefill is compute time: a GEMM of the same shape's efficiency x the preset's attention efficiency
    size = (1 * 32 * 4096 * 4096 * 128) ** (1 / 3)
    eff_c = p.eff_compute_max * size / (size + p.eff_compute_half_size) * p.attention_efficiency
    assert pre.base_ns == pytest.approx(pre.flops / (p.peak_flops["bf16"] * eff_c) * 1e9 + p.overhead_ns)
    full = build_kernel(p, PREFILL.model_copy(update={"causal": False}))
    assert full.base_ns - p.overhead_ns == pytest.approx(2 * (pre.base_ns - p.overhead_ns))  # causal: half the work


def test_gemm_roofline_is_unchanged_by_the_work_refactor() -> None:
    """GEMM time from its work: 2 m n k flop over the size-dependent compute efficiency (the pre-refactor formula)."""
    p = PRESETS["mi300x"]
    k = build_kernel(p, GemmKernel(m=4096, n=4096, k=4096))
    eff_c = p.eff_compute_max * 4096.0 / (4096.0 + p.eff_compute_half_size)
    assert k.flops == 2.0 * 4096**3 and k.bytes == 2.0 * 3 * 4096**2
    assert k.base_ns == pytest.approx(2.0 * 4096**3 / (p.peak_flops["bf16"] * eff_c) * 1e9 + p.overhead_ns, rel=1e-12)


def test_callable_roofline_uses_its_declared_work_and_efficiencies() -> None:
    p = PRESETS["h200"]
    n = 1 << 26
    c = CallableKernel(target="pkg.mod:make", flops=float(n), bytes=12.0 * n, dtype="fp32")
    k = build_kernel(p, c)
    t_m = 12.0 * n / (p.peak_bw_bytes_s * c.sim.memory_efficiency) * 1e9
    assert k.base_ns == pytest.approx(t_m + p.overhead_ns) and k.kind == "callable"
    slow = c.model_copy(update={"sim": c.sim.model_copy(update={"memory_efficiency": 0.4})})
    assert build_kernel(p, slow).base_ns - p.overhead_ns == pytest.approx(2 * t_m)
    with pytest.raises(DeviceError, match="needs its flops and/or bytes"):
        build_kernel(p, CallableKernel(target="pkg.mod:make"))


def test_simulated_gpu_imports_a_callable_but_never_calls_it(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "user_kernels_sim.py").write_text(
        "CALLS = []\ndef make(n):\n    CALLS.append(n)\n    raise RuntimeError('needs a GPU')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    dev = SimulatedGPU(SimConfig(preset="h200"))
    k = dev.prepare(CallableKernel(target="user_kernels_sim:make", args={"n": 4}, bytes=1e9))
    import user_kernels_sim

    assert user_kernels_sim.CALLS == [] and k.label == "callable make"
    assert len(dev.execute([(k, 3)])) == 3
    with pytest.raises(ConfigError, match="'user_kernels_sim:nothing'.*has no attribute 'nothing'"):
        dev.prepare(CallableKernel(target="user_kernels_sim:nothing", bytes=1e9))


def test_placement_per_input_set() -> None:
    """Every GEMM / GEMV / attention rotates through PLACEMENT_SETS input sets (as on a torch device); with the
    preset's placement_sd each set has its own time factor, drawn per preparation, the excess power moving against it
    (the energy per execution stays); with 0 (mi300x) every set is alike and nothing else changes."""
    import numpy as np

    from fingrav.config import GemvKernel
    from fingrav.device.base import PLACEMENT_SETS

    gemv = GemvKernel(m=16384, k=16384)
    flat = SimulatedGPU(SimConfig(preset="mi300x"), seed=3)
    k0 = flat.prepare(gemv)
    assert k0.describe() == {"label": k0.label, "input_sets": PLACEMENT_SETS} and np.all(k0.placement == 1.0)
    dev = SimulatedGPU(SimConfig(preset="h200"), seed=3)
    a, b = dev.prepare(gemv), dev.prepare(gemv)
    assert a.placement.size == PLACEMENT_SETS and not np.allclose(a.placement, b.placement)  # each preparation its own
    assert 0.0 < float(np.std(a.placement)) < 0.03
    again = SimulatedGPU(SimConfig(preset="h200"), seed=3).prepare(gemv)
    assert np.array_equal(again.placement, a.placement)  # from the seed alone
    rec = dev.execute([(a, 400)])
    d = rec.duration_ns[8:].astype(float)  # past the warm-ups; execution j uses set j mod 4
    per_set = np.array([d[j::PLACEMENT_SETS].mean() for j in range(PLACEMENT_SETS)])  # d[j] is set (8 + j) mod 4 = j
    assert np.corrcoef(per_set, a.placement)[0, 1] > 0.9
    with pytest.raises(ValueError):
        SimConfig(preset="h200", overrides={"placement_sd_pct": -1.0})


def test_the_card_state_moves_below_cap_kernels_per_scenario() -> None:
    """The h200 preset's card state (state_sd): one draw per opened device at its first kernel, from the seed, the
    device and that kernel's label; it scales a below-cap kernel's power, not a cap-bound one's; 0: nothing."""
    from fingrav.config import GemvKernel
    from fingrav.device.sim.presets import card_state_offset

    gemv, other = GemvKernel(m=16384, k=16384), GemvKernel(m=8192, k=16384)
    dev = SimulatedGPU(SimConfig(preset="h200"), seed=3)
    k = dev.prepare(gemv)
    assert dev._card_state == card_state_offset(3, 0, k.label, 0.003) != 0.0
    dev.prepare(other)
    assert dev._card_state == card_state_offset(3, 0, k.label, 0.003)  # one state per scenario
    assert card_state_offset(3, 0, "gemv 8192x16384 bf16", 0.003) != dev._card_state  # another scenario, another
    assert card_state_offset(3, 0, k.label, 0.0) == 0.0
    idle = sum(c.idle_mw for c in PRESETS["h200"].components)
    excess = []
    for sd in (0.0, 2.0):
        d = SimulatedGPU(SimConfig(preset="h200", overrides={"state_sd_pct": sd}), seed=3)
        d.run_unstamped(d.prepare(gemv), 2000)
        excess.append(d.sustained_truth_of_last_run()["total"]["power_mw"] - idle)
    s = card_state_offset(3, 0, k.label, 0.02)
    assert excess[1] / excess[0] == pytest.approx(1.0 + s, rel=0.02)
