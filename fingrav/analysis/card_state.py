"""The card's state between runs, in the CI of a headline that does not limit-cycle (issue 22).

A below-cap kernel's sustained power on one card moves from one run to the next by more than any one run's CI: the
die's temperature and the board's state after what ran before, and where the kernel's inputs sit. On six H200
cards 31 kernels collected 2-3 times, a minute or more apart, scatter by a pooled sd of 0.59 % of their power above
idle (53 degrees of freedom; results/h200-state-reps, -state-reps2, -state-reps3, -placement, -state-reps4,
-ref-check; `experiments/card_state_sd.py`), where each headline's CI was ±0.04-0.3 %. The spread differs from card to
card: the first two experiments gave 0.36 %, and the cards measured afterwards to check the value in force out of
sample scattered by 0.57 %, 0.71 %, 0.53 % and 1.08 % (the last: 3 df, one fp32 GEMM whose power stepped down 2.1 %
inside a run at the same clocks and execution time, seen by both NVML sources); the value pools them all, as cards
drawn at random would.
One reference run sees one state; the headline stands for what the kernel draws in the state users run it in, so its
CI carries the state's spread as a term of its own:

    half' = sqrt(half² + (t x sd / 100 x (P - idle))²)

(t: the two-sided `level` quantile of Student's t with the spread's degrees of freedom, the normal one where the
spread is known exactly, as the simulator's; P the headline power, idle the calibrated idle power, mW; the energy per
execution gets the same share). The size is the device's (`fingrav.backends.CardState`, the recorded device
description's own where it has one: the simulator's parameters.state_sd_pct).

Where it applies: a headline from a reference run whose power does not limit-cycle. Where the limiter cycles, it holds
the mean (results/h200-card-state: the cap-bound kernel does not follow the below-cap control) and the whole-cycle CI
has the cycles' own spread. Not in `imprecise` (more runs cannot narrow it), not in comparisons of two numbers of the
same collection (the method SSP vs the reference run), not in the method SSP (its truth is the power after idle in
the same collection). Without a characterized device (an AMD card today) there is no term, and the README says so.
Powers mW.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

from fingrav.analysis.sustained import SustainedHeadline
from fingrav.analysis.tdist import t_critical
from fingrav.backends import BACKENDS, CardState
from fingrav.contracts.plan import Plan
from fingrav.contracts.result import finite

logger = logging.getLogger(__name__)

METHOD = "card state between runs"
#: the recorded device description's key of the simulator's own spread (% of the excess power)
PARAMETER = "state_sd_pct"
#: stands for "known exactly" in Student's t (the normal quantile to 4 digits)
EXACT_DF = 10_000


def card_state_of(plan: Plan) -> CardState | None:
    """The card state's spread of the device that collected `plan`: the recorded device description's own (the
    simulator's parameters.state_sd_pct, known exactly), else its backend's entry (`fingrav.backends.CardState`);
    None for a device not characterized."""
    device = plan.provenance.device
    if device is None:
        return None
    sd = finite((device.parameters or {}).get(PARAMETER))
    if sd is not None:
        return CardState(sd, None, "the simulator's parameters.state_sd_pct")
    entry = BACKENDS.get(str(device.backend))
    return entry.card_state if entry is not None else None


@dataclass(frozen=True)
class CardStateTerm:
    """The term of one scenario: the device's spread (`card_state_of`; None: no term) and the calibrated idle
    power (mW; None: no term)."""

    spec: CardState | None
    idle_mw: float | None

    def half_mw(self, power_mw: float, level: float) -> float | None:
        """The term's half-width (mW) for a headline of `power_mw`: t x sd x (power - idle); None without one."""
        if self.spec is None or self.idle_mw is None or not self.spec.sd_pct:
            return None
        df = EXACT_DF if self.spec.df is None else max(1, int(self.spec.df))
        return t_critical(level, df) * self.spec.sd_pct / 100.0 * max(0.0, power_mw - self.idle_mw)

    def widen(self, hl: SustainedHeadline, cycling: bool, level: float) -> SustainedHeadline:
        """`hl` with the term in the CIs of its power and energy per execution (in quadrature), where it comes from
        a reference run (sources "sustained", "sustained_stamped") that does not limit-cycle; else unchanged."""
        p = hl.power
        if cycling or hl.source == "burst" or p.value is None or p.ci_low is None or p.ci_high is None:
            return hl
        half = self.half_mw(float(p.value), level)
        if not half or self.spec is None:
            return hl
        share = half / abs(float(p.value))
        method = f"{METHOD} ±{100.0 * share:.3g} % ({self.spec.source})"
        return dataclasses.replace(hl, power=p.with_term(share, method), energy=hl.energy.with_term(share, method))
