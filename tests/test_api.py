"""The Python API (fingrav/api.py): `fingrav.profile` on the simulator through the pipeline's stage functions, the
same numbers from the same raw data (replay), callables, argument errors, and a light `import fingrav`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import fingrav
from fingrav.api import ProfileResult, build_config, limit_cycle_of
from fingrav.config import GemmKernel
from fingrav.contracts.result import Estimate, Flags, LimitCycle, Sustained
from fingrav.contracts.roles import PROFILED_ROLES
from fingrav.errors import ConfigError

POLICY = {"max_runs": 80, "min_lois": 15, "probe_ms": 150.0}
CALIBRATION = {"steps": 8, "clock_bursts": 4, "clock_reads_per_burst": 20}
ANALYSIS = {"bootstrap_reps": 200, "max_ci_pct": 5.0}
FAST = {"policy": POLICY, "calibration": CALIBRATION, "analysis": ANALYSIS, "seed": 2}


def fake_factory(n: int = 1):
    """A module-level factory: the simulator imports it and never calls it."""
    raise AssertionError("the simulator must not call a factory")


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> ProfileResult:
    return fingrav.profile(
        GemmKernel(m=2048, n=2048, k=2048), name="cb-2k", results=tmp_path_factory.mktemp("api") / "sim", **FAST
    )


def test_profile_returns_the_pipeline_numbers(measured: ProfileResult) -> None:
    r = measured
    row = r.row
    assert r.scenario == "cb-2k" and r.kernel == "gemm 2048x2048x2048 bf16" and row["backend"] == "sim"
    assert (r.power_w.value, r.power_w.ci_low, r.power_w.ci_high) == (
        row["power_w"],
        row["power_ci_low_w"],
        row["power_ci_high_w"],
    )
    assert r.power_source == row["power_source"] and r.ssp_power_w.value == row["ssp_power_w"]
    assert r.energy_per_exec_mj.value == row["energy_per_exec_mj"] and r.exec_time_us.value == row["exec_time_us"]
    assert r.power_w.ci_low < r.power_w.value < r.power_w.ci_high
    assert abs(row["power_vs_truth_pct"]) < 3.0  # the simulator's truth
    assert r.flags.all == r.summary.flags and r.valid == row["valid"]
    assert r.work.flop == 2.0 * 2048**3 and r.throughput.tflop_s.value == row["throughput_tflop_s"]
    assert r.limit_cycle is None  # no reference run, no limiter cycling
    assert r.results_dir is not None and (r.results_dir / "profiles" / "gpu0" / "cb-2k" / "summary.json").is_file()
    p = r.profile
    assert p.columns == ["channel", "role", "run", "exec_index", "toi_frac", "power_w"] and p.height > 0
    assert set(p["role"].unique()) <= set(PROFILED_ROLES) and "total" in set(p["channel"])
    lois = pl.read_parquet(r.results_dir / "profiles" / "gpu0" / "cb-2k" / "lois.parquet")  # what differentiate wrote
    kept = lois.filter(pl.col("golden") & pl.col("role").is_in(list(PROFILED_ROLES)))
    assert p.height == kept.height and p["power_w"].sum() == pytest.approx(kept["power_mw"].sum() / 1000.0)


def test_the_same_raw_data_gives_the_same_numbers(measured: ProfileResult, tmp_path: Path) -> None:
    """The API replaying the raw data it measured reproduces every number (the analysis is deterministic)."""
    again = fingrav.profile(
        GemmKernel(m=2048, n=2048, k=2048),
        device={"backend": "replay", "replay_dir": str(measured.results_dir)},
        name="cb-2k",
        results=tmp_path / "replay",
        **FAST,
    )
    assert again.row["backend"] == "sim"  # the recorded device
    for key in ("power_w", "power_ci_low_w", "ssp_power_w", "energy_per_exec_mj", "exec_time_us", "throughput_tflop_s"):
        assert again.row[key] == measured.row[key], key
    assert again.flags == measured.flags and again.profile.equals(measured.profile)


def test_a_factory_function_is_profiled_by_its_declared_work() -> None:
    r = fingrav.profile(fake_factory, args={"n": 3}, bytes=4.0e9, name="vec", **FAST)
    assert r.kernel == "callable fake_factory" and r.results_dir is None  # a temporary folder, removed
    assert r.work.source == "declared" and r.work.flop is None
    assert r.throughput.gb_s.value == pytest.approx(4.0e9 / (r.row["ssp_cycle_time_us"] * 1e3), rel=0.05)
    assert r.throughput.tflop_s.value is None and r.row["throughput_tflop_s"] is None
    by_name = build_config(f"{__name__}:fake_factory", args={"n": 3}, bytes=4.0e9, name="vec", **FAST)
    assert by_name == build_config(fake_factory, args={"n": 3}, bytes=4.0e9, name="vec", **FAST)
    assert by_name.scenarios[0].kernel.target == f"{__name__}:fake_factory"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kernel_or_callable": lambda: None, "bytes": 1.0}, "module-level function"),
        ({"kernel_or_callable": 42}, "int is not a kernel"),
        ({"kernel_or_callable": {"kind": "gemm", "m": 8, "n": 8, "k": 0}}, r"kernel.k = 0"),
        ({"kernel_or_callable": GemmKernel(m=8, n=8, k=8), "policy": {"runz": 1}}, "run_policy.runz"),
        ({"kernel_or_callable": GemmKernel(m=8, n=8, k=8), "args": {"n": 1}}, "args, flops and bytes go with"),
        ({"kernel_or_callable": "pkg.mod:make"}, "needs flops and/or bytes"),
        ({"kernel_or_callable": "no_such_module_xyz:make", "bytes": 1.0}, "no module named 'no_such_module_xyz'"),
        (
            {"kernel_or_callable": GemmKernel(m=8, n=8, k=8), "device": {"backend": "sim", "world_size": 2}},
            "measures one GPU",
        ),
    ],
)
def test_bad_arguments_are_one_message(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        fingrav.profile(**kwargs)


def test_limit_cycle_is_reported_where_the_limiter_cycles(measured: ProfileResult) -> None:
    r = measured.result
    assert limit_cycle_of(r) is None
    iv = Estimate(value=1.0, ci_low=0.5, ci_high=1.5)
    lc = LimitCycle(cycles=5, period=Estimate(value=900.0, ci_low=800.0, ci_high=1000.0, unit="ms"), duty=iv,
                    high=iv, low=iv, mean=Estimate(value=690.0, ci_low=686.0, ci_high=694.0, unit="W"))  # fmt: skip
    cycling = r.model_copy(
        update={
            "flags": Flags(invalidating=[], notes=["power_limit_cycling"]),
            "sustained": Sustained(limit_cycle=lc),
        }
    )
    got = limit_cycle_of(cycling)
    assert got is lc and str(got.period) == "900 ms [800, 1000]" and got.mean.value == 690.0
    assert limit_cycle_of(r.model_copy(update={"sustained": Sustained(limit_cycle=lc)})) is None  # no flag: none


def test_profile_result_prints_as_one_paragraph(measured: ProfileResult) -> None:
    text = str(measured)
    assert "\n" not in text and len(text) < 600
    assert text.startswith("cb-2k (gemm 2048x2048x2048 bf16): ")
    assert str(measured.power_w) in text and f"({measured.power_source})" in text
    assert f"method SSP {measured.ssp_power_w}" in text and str(measured.energy_per_exec_mj) in text
    assert " W [" in text and " mJ [" in text and "TFLOP/s" in text
    assert ("valid" if measured.valid else "NOT valid") in text


def test_import_fingrav_stays_light() -> None:
    """GPU-side code imports fingrav: the API (polars) loads only when fingrav.profile is first used."""
    code = (
        "import sys, fingrav; assert 'polars' not in sys.modules and 'fingrav.api' not in sys.modules; "
        "p = fingrav.profile; assert p.__module__ == 'fingrav.api' and 'polars' in sys.modules; "
        "assert 'profile' in dir(fingrav)\n"
        "try:\n    fingrav.nothing\nexcept AttributeError:\n    pass\nelse:\n    raise SystemExit(1)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
