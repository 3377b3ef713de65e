"""Stage combine (fingrav/stages/combine.py): reads every GPU's summary and LOIs, writes the combined result
(the sum of the GPUs' powers with a CI), and names the file a GPU is missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from fingrav import rawio
from fingrav.analysis.binning import bin_runs
from fingrav.analysis.differentiate import differentiate
from fingrav.config import AnalysisConfig
from fingrav.contracts.multigpu import CombinedResult
from fingrav.errors import DataError
from fingrav.layout import SweepLayout
from fingrav.stages import combine
from fingrav.testing.synthetic import SynthSpec, generate

ANALYSIS = AnalysisConfig(bootstrap_reps=200, min_lois=10)


def _write_rank(layout: SweepLayout, rank: int, ssp_mw: float) -> None:
    d = generate(
        SynthSpec(
            runs=30,
            sse_runs=10,
            seed=rank,
            noise_mw=3000.0,
            noise_ar=0.5,
            levels_mw={**SynthSpec().levels_mw, "ssp": ssp_mw},
        )
    )
    binned, _ = bin_runs(d["executions"], d["runs"], d["plan"], d["margin"])
    lois, summary = differentiate(
        d["executions"], d["runs"], d["samples"], d["plan"], binned, d["clock_fit"], d["sensor"], ANALYSIS,
        None, max_clock_residual_us=20.0, scenario="gemm",
    )  # fmt: skip
    rawio.write_json(layout.summary_json("gemm", rank), summary)
    layout.lois("gemm", rank).parent.mkdir(parents=True, exist_ok=True)
    lois.write_parquet(layout.lois("gemm", rank))


def test_two_gpus_combine_into_the_sum_of_their_powers(tmp_path: Path) -> None:
    layout = SweepLayout(tmp_path / "sweep")
    for rank, mw in ((0, 300_000.0), (1, 330_000.0)):
        _write_rank(layout, rank, mw)
    path = combine.run(layout, "gemm", 2, ANALYSIS)
    out = rawio.read_model(path, CombinedResult)
    assert path == layout.combined("gemm") and out.world_size == 2 and len(out.ranks) == 2
    ranks = [r.power.value for r in out.ranks]
    assert ranks == [pytest.approx(300.0, rel=5e-3), pytest.approx(330.0, rel=5e-3)]
    c = out.combined.power
    assert c.value == pytest.approx(sum(ranks)) and c.ci_low < c.value < c.ci_high
    assert out.provenance is not None and out.provenance.stage == "combine"


def test_a_missing_gpu_is_named(tmp_path: Path) -> None:
    layout = SweepLayout(tmp_path / "sweep")
    _write_rank(layout, 0, 300_000.0)
    with pytest.raises(DataError, match=r"gpu1.*missing; run differentiate for GPU 1 of 'gemm'"):
        combine.run(layout, "gemm", 2, ANALYSIS)
