"""What sets the width of the sustained headline's CI, per row of a kept fidelity matrix (issue 22).

Re-analyses the sweeps that `fidelity_matrix.py --keep DIR` kept (the differentiate stage only, on the kept raw
data; the sweeps' configs are drawn again from the same seed) and writes, per scenario, the headline, its CI and
truth, and the CI's components: the limit cycle's whole-cycle mean and the t-interval half-width of every bin
width (`sustained.SEGMENTATION_FACTORS`), the steady run's batch-means half-width and drift, and the sensor-source
term (`analysis.sources`). The reference run's settled samples go to DIR/<sweep>/ci-components/<scenario>.npz
(t_ns, power_mw) for offline variants.

    python experiments/ci_components.py --keep /tmp/keep --seed 11 --sweeps 50 --scenarios 4 --out /tmp/comp.jsonl
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fidelity_matrix import draw_sweep  # noqa: E402

from fingrav.analysis import reference as reference_mod  # noqa: E402
from fingrav.analysis import sustained  # noqa: E402
from fingrav.analysis.sources import SourceTerm  # noqa: E402
from fingrav.analysis.tdist import t_interval  # noqa: E402
from fingrav.contracts.result import Estimate  # noqa: E402

logger = logging.getLogger("ci_components")


def _captured() -> dict[str, np.ndarray]:
    """Wrap the reference module's `limit_cycle` so that the settled samples it is given are kept (the last call)."""
    seen: dict[str, np.ndarray] = {}
    inner = sustained.limit_cycle

    def hook(t_ns: np.ndarray, power_mw: np.ndarray, *args: Any, **kwargs: Any) -> Any:
        seen["t_ns"], seen["power_mw"] = np.asarray(t_ns).copy(), np.asarray(power_mw).copy()
        return inner(t_ns, power_mw, *args, **kwargs)

    reference_mod.limit_cycle = hook  # type: ignore[assignment]
    return seen


def components(t_ns: np.ndarray, power_mw: np.ndarray) -> dict[str, Any]:
    """The limit cycle's per-bin-width t-intervals (% of the whole-cycle mean) and cycles, or the drift's parts."""
    out: dict[str, Any] = {}
    lc = sustained.limit_cycle(t_ns, power_mw)
    if lc is not None:
        dt = float(np.median(np.diff(t_ns)))
        whole = float(lc.mean_mw.value or math.nan)
        halves, cycles = [], []
        for f in sustained.SEGMENTATION_FACTORS:
            _, cp, _, st = sustained._segment(t_ns, power_mw, int(max(sustained.BIN_NS, f * dt)))
            means = sustained._cycle_means(cp, st)
            m, lo, hi = t_interval(means, 0.95)
            cycles.append(len(means))
            halves.append(None if lo is None else 100.0 * (hi - lo) / 2.0 / whole)
        out |= {"lc_cycles": cycles, "lc_half_pct": halves, "lc_mean_mw": whole}
    else:
        d = sustained.drift(t_ns, power_mw)
        if d is not None:
            out |= {
                "drift_change_pct": d.change_pct,
                "drift_se_pct": d.se_pct,
                "batch_half_pct": None
                if d.ci_low_mw is None
                else 100.0 * (d.ci_high_mw - d.ci_low_mw) / 2.0 / d.mean_mw,
            }
    return out


def main(argv: list[str] | None = None) -> int:
    from fingrav import rawio
    from fingrav.config import parse_config
    from fingrav.contracts.profile import ScenarioSummary
    from fingrav.layout import SweepLayout
    from fingrav.stages import differentiate

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--sweeps", type=int, default=50)
    ap.add_argument("--scenarios", type=int, default=4)
    ap.add_argument("--first", type=int, default=0, help="the first sweep to read")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--reanalyse", action="store_true", help="run the differentiate stage again (this code)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stderr)
    rng = np.random.default_rng(args.seed)
    cfgs = [draw_sweep(rng, i, args.scenarios) for i in range(args.sweeps)]
    seen = _captured()
    rows = []
    for cfg_dict in cfgs[args.first :]:
        cfg = parse_config(cfg_dict)
        layout = SweepLayout(args.keep / cfg.sweep)
        if not (args.keep / cfg.sweep).exists():
            continue
        for s in cfg.scenarios:
            if not layout.summary_json(s.name).exists():
                continue
            seen.clear()
            if args.reanalyse:
                differentiate.run(layout, s.name, 0, cfg.analysis, cfg.calibration.max_clock_residual_us, True)
            summ = rawio.read_model(layout.summary_json(s.name), ScenarioSummary)
            row = summ.row
            cvs = summ.result.headline.counter_vs_samples
            rec: dict[str, Any] = {
                "sweep": cfg.sweep,
                "scenario": s.name,
                **{
                    k: row.get(k)
                    for k in (
                        "valid",
                        "power_source",
                        "power_w",
                        "power_ci_low_w",
                        "power_ci_high_w",
                        "truth_power_w",
                        "power_vs_truth_pct",
                        "limit_cycles",
                        "sustained_stop",
                        "counter_vs_samples_pct",
                        "ssp_power_w",
                        "ssp_power_ci_low_w",
                        "ssp_power_ci_high_w",
                        "truth_ssp_power_w",
                        "ssp_valid",
                    )
                },
                "source_term_pct": SourceTerm.of(cvs if isinstance(cvs, Estimate) else None).pct,
                "method": summ.result.headline.power.method,
                "sim": cfg_dict["device"]["sim"],
            }
            if seen:
                rec |= components(seen["t_ns"], seen["power_mw"])
                d = args.keep / cfg.sweep / "ci-components"
                d.mkdir(exist_ok=True)
                np.savez(d / f"{s.name}.npz", t_ns=seen["t_ns"], power_mw=seen["power_mw"])
            rows.append(rec)
    args.out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    logger.warning("%d rows -> %s", len(rows), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
