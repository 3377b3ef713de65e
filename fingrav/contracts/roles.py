"""Run phases, execution segments and execution roles (docs/ARCHITECTURE.md "Runs and roles").

A run's phase (runs.parquet `phase`): "timing", "probe", "reference", "sse", "ssp", "base". The measure runs are
the SSE runs (warm-ups + 1 executions, METHOD.md step 3) and the SSP runs (step 4). Base runs (`run_policy.
sse_base_runs`) are SSE runs without their SSE execution (the warm-ups alone): only the SSE's kernel power reads
them (`fingrav.analysis.kernel_power`), never a profile, a bin or a LOI.

An execution's segment: "pred" (the predecessor kernel of an interleaving scenario) or "main" (the
measured kernel). Its role, from the plan (`fingrav.contracts.plan.Plan.role_of`):

* SSP run, main execution i: "trail" if i >= ssp_index + tail; "ssp" if i >= ssp_index; else as in an SSE run.
* SSE run (and SSP runs below ssp_index): "sse" if i == sse_index; "first" if i == 0 and there is a
  predecessor (the interleaved measurement); else "warmup".
* predecessor executions: "pred".
"""

from __future__ import annotations

from typing import Final

TIMING: Final = "timing"
PROBE: Final = "probe"
REFERENCE: Final = "reference"
SSE: Final = "sse"
SSP: Final = "ssp"
BASE: Final = "base"
PHASES: Final = (TIMING, PROBE, REFERENCE, SSE, SSP, BASE)
MEASURE_PHASES: Final = (SSE, SSP)

PRED: Final = "pred"
MAIN: Final = "main"
SEGMENTS: Final = (PRED, MAIN)

WARMUP: Final = "warmup"
FIRST: Final = "first"
TRAIL: Final = "trail"
# execution roles; this order is the category order of the role column in lois.parquet (do not reorder:
# statistics iterate groups in it)
ROLES: Final = (SSP, SSE, FIRST, WARMUP, PRED, TRAIL)
PROFILED_ROLES: Final = (SSP, SSE, FIRST, WARMUP, PRED)  # roles whose LOIs form profiles (never "trail")
TIME_ORDER: Final = (PRED, WARMUP, FIRST, SSE, SSP, TRAIL)  # the order of a run in time (figures, legends)

TOTAL: Final = "total"  # the channel every device has: total board / socket power
