"""A sweep's GPU time before it runs (`fingrav plan --config X`, and one line when Snakemake plans the sweep): every
scenario's plan as `fingrav.collect.plan.make_plan` will make it, priced by `fingrav.collect.estimate.plan_cost`.

What the estimate stands on, each said in its `basis`:

* the sensor: the sweep's calibration (results/<sweep>/calibration/gpu0.json) when it exists, else the sensor of
  the simulator preset of that GPU (period, dead time, window, lag; settling = dead time + window + lag x ln 100);
* the kernel times: the simulator preset's roofline model of the kernel (`fingrav.device.sim.kernels`), stamped
  launch gap included; a kernel it cannot model (a callable without declared work) at `fingrav.cost.exec_floor_s`;
* the stability probe, which has not run: the expected one (`expected_probe`) settles with the sensor and, for a
  kernel the preset's power limiter holds back, once the limiter has pulled it down; the range runs from a probe
  that settles with the sensor (the plan without a probe) to one that never settles (the SSP at the end of
  probe_ms, the idle after each run as long as the probe's own watch). The adaptive reference run is expected at
  reference_ms and lies between reference_ms and reference_max_ms; for a kernel the preset's power limiter holds
  back (its expected probe reaches the power limit) on a device whose limiter cycles, at the first clamp plus
  `fingrav.collect.estimate.REFERENCE_CYCLES` limit cycles (the run goes on until it has seen 3 whole cycles and
  their mean is precise). The adaptive SSP runs are expected at the count the plan expects
  (`fingrav.collect.plan.expected_ssp_runs`, more for a limiter-bound kernel), or, for a kernel earlier
  collections measured, at the mean of the counts their adaptive stop took (`SeenKernel.expected_ssp_runs`), and
  lie between it and the budget. Both ranges are printed as such;
* the device's timing (`device_timing`): the power limit (NVML's, else the simulator's cap target), the limit
  cycle of the simulator preset that models the GPU, the host gap between runs (`HOST_GAP_NS`). The plan made at
  collection (`fingrav.collect.runner`) is priced with the same.

GPU-side module (numpy + stdlib + the simulator's kernel model).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fingrav.analysis.ssp_stop import MIN_RUNS
from fingrav.collect.estimate import DeviceTiming, plan_cost, probe_load_ns, probe_watch_ns
from fingrav.collect.plan import make_plan
from fingrav.contracts.plan import Plan, PlanCost, Probe
from fingrav.contracts.sensor import PlanSensor
from fingrav.errors import FingravError

if TYPE_CHECKING:
    from fingrav.config import RunPolicy, SweepConfig
    from fingrav.device.sim.presets import Preset

logger = logging.getLogger(__name__)

SETTLE_TIME_CONSTANTS = math.log(100.0)  # a first-order lag is within 1 % of a step after ln(100) time constants
#: the simulator preset that models each real backend's GPU when the config names none (`--preset` overrides)
BACKEND_PRESET = {"nvml": "h200", "amdsmi": "mi300x"}


#: the host's time per run on a real GPU that the idle before the next run does not hide. Between two runs the host
#: drains the sampler, decides whether to stop and reads the energy counter and telemetry; since stop 27 the device
#: counts that time towards the next run's idle (`GPUDevice.idle_left_ns`), so only what follows the idle is paid on
#: top. Fitted on results/h200-db2 before the overlap (40 ms); the overlap took the median spacing of consecutive
#: SSP/SSE runs beyond their idle, delay and executions from 31.8 ms (db2; db3 30.6) to 17.3 ms (results/h200-state,
#: 88 runs on another H200), so 40 - 14.5 = 26 ms (benchmarks/RESULTS.md, stop 27). Since stop 36 the telemetry read
#: before a run is made inside its idle too (`GPUDevice.idle_reading_telemetry`): on the same 36 shapes the mean
#: spacing beyond idle and delay went from 26.7 / 26.5 ms (results/h200-db6 / db5, 556 / 530 runs) to 12.0 ms
#: (results/h200-idle-read, 526 runs, a fourth card), so 26 - 14.7 = 11 ms. A simulator's virtual clock has none;
#: other backends: not measured yet (0).
HOST_GAP_NS = {"nvml": 11e6}


def device_timing(describe: Any, p: Preset) -> DeviceTiming:
    """The device's timing for the plan's price (`fingrav.collect.estimate.DeviceTiming`) from its identity record
    (`GPUDevice.describe()`) and the simulator preset that models it (`p`): a real GPU's power limit (NVML's
    enforced limit, else its management limit), a simulated one's cap target (the effective parameters where the
    record has them); the limit cycle of the effective parameters, else the preset's; HOST_GAP_NS."""
    from fingrav.contracts.provenance import DeviceInfo

    d = dict(describe or {})
    backend = str(d.get("backend") or "")
    limit_w = None
    try:
        limit_w = DeviceInfo.model_validate(d).power_limit_w
    except ValueError:
        limit_w = None
    params = d.get("parameters") or {}
    power, transient = params.get("power") or {}, params.get("transient") or {}
    ms = 1e6
    start = transient.get("limit_cycle_start_ms", p.limit_cycle_start_ns / ms) * ms
    cycle = (
        transient.get("limit_cycle_high_ms", p.limit_cycle_high_ns / ms)
        + transient.get("limit_cycle_low_ms", p.limit_cycle_low_ns / ms)
    ) * ms
    limit_mw = limit_w * 1e3 if limit_w is not None else None
    if limit_mw is None and d.get("vendor") == "sim":
        limit_mw = power.get("cap_target_w", p.cap_target_mw / 1e3) * 1e3
    return DeviceTiming(limit_mw, float(start), float(cycle), float(HOST_GAP_NS.get(backend, 0.0)))


def device_preset(describe: Any) -> Preset | None:
    """The simulator preset that models an opened device (`GPUDevice.describe()`): a simulator's own, a real GPU's
    backend's (BACKEND_PRESET); None: none."""
    from fingrav.config import SimConfig
    from fingrav.device.sim.presets import resolve_preset

    d = dict(describe or {})
    name = d.get("preset") if d.get("vendor") == "sim" else BACKEND_PRESET.get(str(d.get("backend") or ""))
    try:
        return resolve_preset(SimConfig(preset=name)) if name else None
    except (FingravError, ValueError):
        return None


def predecessor_cycle_ns(describe: Any, kernel: object | None, world_size: int = 1) -> float:
    """A predecessor's launch-to-launch time (ns) for the plan's price at collection (the runner times only the
    measured kernel): the device's preset model (`kernel_model`; 0: no predecessor or no model)."""
    p = device_preset(describe)
    return kernel_model(p, kernel, world_size)[1] if p is not None and kernel is not None else 0.0


def timing_of_device(describe: Any) -> DeviceTiming:
    """`device_timing` of an opened device (`GPUDevice.describe()`): a simulator with its own preset, a real GPU with
    the preset that models its backend's GPU (BACKEND_PRESET); a backend without one: its power limit and host gap,
    no limit cycle."""
    d = dict(describe or {})
    p = device_preset(d)
    if p is None:
        limit_w = None
        try:
            from fingrav.contracts.provenance import DeviceInfo

            limit_w = DeviceInfo.model_validate(d).power_limit_w
        except ValueError:
            pass
        gap = HOST_GAP_NS.get(str(d.get("backend") or ""), 0.0)
        return DeviceTiming(limit_w * 1e3 if limit_w is not None else None, 0.0, 0.0, gap)
    return device_timing(d, p)


def preset_timing(cfg: SweepConfig | None, p: Preset) -> DeviceTiming:
    """`device_timing` before the device is opened: the simulator preset's cap target on a simulator, the preset's
    model of the GPU on a real backend (its cap target standing for the power limit) and its host gap (none without
    `cfg`)."""
    gap = HOST_GAP_NS.get(cfg.device.backend, 0.0) if cfg is not None else 0.0
    return DeviceTiming(p.cap_target_mw, p.limit_cycle_start_ns, p.limit_cycle_high_ns + p.limit_cycle_low_ns, gap)


@dataclass(frozen=True)
class ScenarioEstimate:
    """One scenario's expected plan and GPU time (s): `cost` with the probe the preset's device transient predicts
    (`expected_probe`), `low_s` the least of it and of a probe that settles with the sensor, `cost_max` with one
    that never settles (the module docstring)."""

    name: str
    plan: Plan
    cost: PlanCost
    low_s: float
    cost_max: PlanCost

    @property
    def expected_s(self) -> float:
        """The expected GPU time (s): the expected probe, the reference run at its shortest."""
        return self.cost.total_s

    @property
    def high_s(self) -> float:
        """The most GPU time expected (s): an unsettled probe, the reference run at its longest."""
        return self.cost_max.total_max_s


@dataclass(frozen=True)
class SweepEstimate:
    """Every scenario's estimate, the calibration's GPU time (s; 0 when the sweep is calibrated) and what the
    numbers stand on (`basis`: one line per source)."""

    scenarios: list[ScenarioEstimate]
    calibration_s: float
    basis: list[str]

    @property
    def total_s(self) -> float:
        """Expected GPU time of the sweep (s)."""
        return self.calibration_s + sum(s.expected_s for s in self.scenarios)

    @property
    def total_min_s(self) -> float:
        return self.calibration_s + sum(s.low_s for s in self.scenarios)

    @property
    def total_max_s(self) -> float:
        """The most GPU time expected (s): every probe unsettled, every reference run at its longest."""
        return self.calibration_s + sum(s.high_s for s in self.scenarios)


def preset_of(cfg: SweepConfig, preset: str | None = None) -> Preset:
    """The simulator preset that models the sweep's GPU: `preset` when given, the simulated one, else the one of
    the backend's GPU (BACKEND_PRESET)."""
    from fingrav.config import SimConfig
    from fingrav.device.sim.presets import resolve_preset

    if preset is None and cfg.device.backend == "sim":
        return resolve_preset(cfg.device.sim)
    name = preset or BACKEND_PRESET.get(cfg.device.backend)
    if name is None:
        raise FingravError(f"device.backend = {cfg.device.backend!r}: no simulator model of its GPU; give --preset")
    return resolve_preset(SimConfig(preset=name))


def preset_sensor(p: Preset) -> PlanSensor:
    """The total channel's sensor of a simulator preset, as a calibration would find it."""
    s = next(s for s in p.sensors if "total" in s.channels)
    settle = s.delay_ns + s.window_ns + s.lag_ns * SETTLE_TIME_CONSTANTS
    return PlanSensor(
        period_ns=int(round(s.period_ns)),
        delay_ns=int(round(s.delay_ns)),
        window_ns=int(round(s.window_ns)),
        lag_ns=int(round(s.lag_ns)),
        settle_ns=int(round(settle)),
    )


def sweep_sensor(cfg: SweepConfig, p: Preset, results_root: Path | str) -> tuple[PlanSensor, bool]:
    """(the sensor to plan with, whether it is the sweep's calibration rather than the preset's)."""
    from fingrav import rawio
    from fingrav.contracts.calibration import Calibration
    from fingrav.layout import SweepLayout

    path = SweepLayout.of(cfg.sweep, results_root).calibration_json(0)
    if path.is_file():
        try:
            return PlanSensor.of(rawio.read_model(path, Calibration).total), True
        except (FingravError, ValueError) as err:
            logger.warning("%s: not used for the estimate (%s)", path, err)
    return preset_sensor(p), False


def kernel_model(p: Preset, kernel: object, world_size: int = 1) -> tuple[float, float, bool]:
    """(execution, launch-to-launch cycle of a stamped execution (ns), whether the power limiter holds it back) on
    the preset's model; a kernel it cannot model: `fingrav.cost.exec_floor_s` (a lower bound), not held back."""
    from fingrav.cost import exec_floor_s
    from fingrav.device.sim.kernels import build_kernel

    try:
        k = build_kernel(p, kernel, world_size)
        exec_ns, heavy = float(k.base_ns), bool(k.heavy)
    except FingravError:
        exec_ns, heavy = exec_floor_s(kernel) * 1e9, False
    return exec_ns, exec_ns + p.launch_gap_ns + p.stamp_overhead_ns, heavy


def _probe(policy: RunPolicy, sensor: PlanSensor, cycle_ns: float, t_stable_ns: float, t_recover_ns: float,
           settled: bool, level_mw: float = 0.0) -> Probe:  # fmt: skip
    """A stability probe that has not run, with the settling and recovery times given (ns) and its level (mW; 0:
    unknown)."""
    probe_ns = probe_load_ns(policy, sensor)
    return Probe(
        busy_ns=probe_ns,
        executions=int(probe_ns / max(cycle_ns, 1.0)),
        idle_level_mw=0.0,
        level_mw=float(level_mw),
        peak_mw=float(level_mw),
        tol_mw=0.0,
        t_stable_ns=int(t_stable_ns),
        t_recover_ns=int(t_recover_ns),
        settled=settled,
        samples=0,
    )


@dataclass(frozen=True)
class SeenProbes:
    """What earlier stability probes on this GPU found (ns; `probes_seen`): the median settling time of kernels the
    preset's power limiter holds back (`stable_heavy_ns`) and of the others (`stable_light_ns`; None: no such
    kernel seen), the median recovery time, and how many probes; `kernels`: what was measured of each kernel
    (`kernel_key`): its probe and its execution and launch-to-launch times (ns), the last one seen."""

    stable_light_ns: float | None
    stable_heavy_ns: float | None
    recover_ns: float
    count: int
    kernels: dict[str, SeenKernel] = field(default_factory=dict)


@dataclass(frozen=True)
class SeenKernel:
    """One kernel as earlier collections on this GPU measured it: its stability probe and its timing run's
    execution and launch-to-launch times (ns), from the last plan.json found (in path order); and the SSP runs the
    adaptive stop took in each collection that had one (`ssp_runs`, plan.json's ssp_stop)."""

    probe: Probe
    exec_time_ns: int
    cycle_ns: int
    ssp_runs: tuple[int, ...] = ()

    def expected_ssp_runs(self, plan: Plan) -> int | None:
        """The SSP runs to price `plan`'s adaptive stop at: the mean of the runs the stop took before, within
        MIN_RUNS and the plan's budget; None where the plan has no adaptive stop or the kernel none seen. On the H200
        database a limiter-bound kernel's SSP runs scatter from 8 to the budget of 24, and the count follows the
        kernel from card to card (correlation 0.5-0.6 between results/h200-db2, db4 and db5), which no model of the
        probe predicts (correlation with the probe's peak 0.33)."""
        if plan.ssp_runs_expected is None or not self.ssp_runs:
            return None
        return int(min(plan.runs, max(MIN_RUNS, round(sum(self.ssp_runs) / len(self.ssp_runs)))))


def kernel_key(kernel: object) -> str:
    """A kernel's identity across sweeps: its config, as canonical JSON."""
    import json

    dump = kernel.model_dump(mode="json") if hasattr(kernel, "model_dump") else kernel
    return json.dumps(dump, sort_keys=True, default=str)


def probes_seen(folder: Path | str | Sequence[Path | str], p: Preset) -> SeenProbes | None:
    """The probes of the plan.json files under `folder` (a sweep's results folder or a dataset's, any depth: its
    raw/gpu0/<scenario>/plan.json; or several such folders), each kernel classed by the preset's model
    (`kernel_model`); None: none found.
    A real GPU's device transient is its own (the H200's clocks ramp for ~40 ms, the simulated one's for 2-10 ms):
    an earlier collection on the same GPU prices it better than the preset."""
    import json
    import statistics

    from fingrav.config import Scenario

    folders = [folder] if isinstance(folder, (str, Path)) else list(folder)

    light, heavy, recover = [], [], []
    kernels: dict[str, SeenKernel] = {}
    done: set[tuple[str, str]] = set()  # (created, scenario): a collection copied into two folders counts once
    for path in sorted(q for f in folders for q in Path(f).glob("**/gpu0/*/plan.json")):
        try:
            plan = json.loads(path.read_text())
            prov = plan.get("provenance") or {}
            probe, scen = plan.get("probe") or {}, prov.get("scenario")
            if not probe or not isinstance(scen, dict):
                continue
            ident = (str(prov.get("created_utc")), str(scen.get("name")))
            if ident in done:
                continue
            done.add(ident)
            kernel = Scenario.model_validate(scen).kernel
            is_heavy = kernel_model(p, kernel)[2]
            if not scen.get("predecessor"):
                key = kernel_key(kernel)
                stop = plan.get("ssp_stop") or {}
                took = stop.get("runs") if plan.get("ssp_ci_pct") is not None else None
                runs = kernels[key].ssp_runs if key in kernels else ()
                runs = (*runs, int(took)) if took else runs
                probe_of = Probe.model_validate(probe)
                kernels[key] = SeenKernel(probe_of, int(plan["exec_time_ns"]), int(plan["cycle_ns"]), runs)
        except (OSError, ValueError, KeyError, FingravError):
            continue
        (heavy if is_heavy else light).append(float(probe["t_stable_ns"]))
        recover.append(float(probe["t_recover_ns"]))
    if not recover:
        return None
    med = lambda xs: statistics.median(xs) if xs else None  # noqa: E731
    return SeenProbes(med(light), med(heavy), float(statistics.median(recover)), len(recover), kernels)


def expected_probe(
    policy: RunPolicy,
    sensor: PlanSensor,
    p: Preset,
    cycle_ns: float,
    heavy: bool,
    seen: SeenProbes | None = None,
    timing: DeviceTiming | None = None,
) -> Probe:
    """What the probe is expected to find. With earlier probes of this GPU (`seen`): their median settling time for
    a kernel of the same class (held back by the power limiter or not) and their median recovery. Else on the
    preset's GPU: power settled once the sensor has (its settling), and, for a kernel the power limiter holds back,
    once the limiter has pulled it down (limiter_start + limiter_tau later); back at idle once the sensor has
    settled and the clock has ramped half way down (half its time constant clock_down: what the probes of the
    simulated H200 and MI300X default sweeps found, within ~10 ms and ~2 ms). A heavy kernel's probe is at the power
    limit (`timing.limit_mw`, else the preset's cap target; `fingrav.collect.estimate.limiter_bound`), a light one's
    level unknown (0)."""
    limit = timing.limit_mw if timing is not None and timing.limit_mw is not None else p.cap_target_mw
    level = float(limit) if heavy else 0.0
    if seen is not None:
        own, other = (
            (seen.stable_heavy_ns, seen.stable_light_ns) if heavy else (seen.stable_light_ns, seen.stable_heavy_ns)
        )
        stable = own if own is not None else other
        stable_ns = max(float(stable or 0.0), sensor.settle_ns)
        return _probe(policy, sensor, cycle_ns, stable_ns, seen.recover_ns, True, level)
    stable = sensor.settle_ns + (p.limiter_start_ns + p.limiter_tau_ns if heavy else 0.0)
    return _probe(policy, sensor, cycle_ns, stable, sensor.settle_ns + 0.5 * p.clock_down_ns, True, level)


def unsettled_probe(policy: RunPolicy, sensor: PlanSensor, cycle_ns: float) -> Probe:
    """A probe that never settles: the SSP at the end of its load (`probe_load_ns`), recovery as long as the probe's
    own wait."""
    probe_ns = probe_load_ns(policy, sensor)
    wait = probe_watch_ns(policy, sensor.settle_ns + sensor.period_ns)
    return _probe(policy, sensor, cycle_ns, probe_ns, wait / 1.2, False)


def estimate_scenario(name: str, policy: RunPolicy, kernel: object, pred: object | None, pred_count: int,
                      p: Preset, sensor: PlanSensor, world_size: int = 1,
                      seen: SeenProbes | None = None,
                      timing: DeviceTiming | None = None) -> ScenarioEstimate:  # fmt: skip
    """One scenario's expected plan and cost (module docstring); `seen`: earlier probes of this GPU (a kernel they
    measured, on one GPU and without a predecessor, is priced with its own probe and timing); `timing`: the
    device's (`preset_timing`)."""
    exec_ns, cycle_ns, heavy = kernel_model(p, kernel, world_size)
    pred_cycle = kernel_model(p, pred, world_size)[1] if pred is not None else 0.0
    own = seen.kernels.get(kernel_key(kernel)) if seen is not None and pred is None and world_size == 1 else None
    if own is not None:
        exec_ns, cycle_ns = float(own.exec_time_ns), float(own.cycle_ns)
    e, c = int(round(exec_ns)), int(round(cycle_ns))

    timing = timing if timing is not None else preset_timing(None, p)

    def cost_with(probe: Probe | None) -> tuple[Plan, PlanCost]:
        plan = make_plan(e, c, sensor, probe, policy, pred_count, pred_cycle, timing)
        return plan, plan_cost(plan, policy, pred_cycle, timing)

    plan, cost = cost_with(own.probe if own is not None else expected_probe(policy, sensor, p, cycle_ns, heavy, seen,
                                                                             timing))  # fmt: skip
    runs = own.expected_ssp_runs(plan) if own is not None else None
    if runs is not None:  # the adaptive stop as it went on this kernel before
        plan = plan.model_copy(update={"ssp_runs_expected": runs})
        cost = plan_cost(plan, policy, pred_cycle, timing)
    low = min(cost.total_s, cost_with(None)[1].total_s)
    return ScenarioEstimate(name, plan, cost, low, cost_with(unsettled_probe(policy, sensor, cycle_ns))[1])


def estimate_sweep(
    cfg: SweepConfig,
    preset: str | None = None,
    results_root: Path | str = "results",
    probes_from: Path | str | Sequence[Path | str] | None = None,
) -> SweepEstimate:
    """Every scenario's estimate (module docstring); the calibration's load steps when the sweep has none yet.
    probes_from: a folder with earlier collections on this GPU, or several (`probes_seen`); default: the sweep's own
    results folder, where it has collected scenarios already."""
    from fingrav.cost import calibration_cost
    from fingrav.layout import SweepLayout

    p = preset_of(cfg, preset)
    sensor, calibrated = sweep_sensor(cfg, p, results_root)
    own = SweepLayout.of(cfg.sweep, results_root).root
    seen = probes_seen(probes_from if probes_from is not None else own, p)
    n_own = sum(kernel_key(s.kernel) in seen.kernels for s in cfg.scenarios) if seen is not None else 0
    basis = [
        f"sensor: {'the sweep calibration' if calibrated else f'the simulator preset {p.name} (not calibrated yet)'}"
        f" (period {sensor.period_ns / 1e6:.1f} ms, settling {sensor.settle_ns / 1e6:.1f} ms)",
        f"kernel times: the simulator's {p.name} roofline model",
        f"probe: not run yet: expected from {seen.count} earlier probes of this GPU ({n_own} of the kernels their own,"
        " with their measured times)"
        if seen is not None
        else f"probe: not run yet: expected from the {p.name} model's transient (limiter, clock ramp-down)",
        "probe and reference ranges: from "
        "a probe that settles with the sensor to one that never settles, the adaptive reference run from "
        "reference_ms to reference_max_ms",
    ]
    n_runs = sum(bool(k.ssp_runs) for k in seen.kernels.values()) if seen is not None else 0
    if n_runs:
        basis.append(
            f"SSP runs: as many as the adaptive stop took in earlier collections of the same kernel, their mean "
            f"({n_runs} kernels seen; the others at the plan's expected count)"
        )
    world = cfg.device.world_size
    timing = preset_timing(cfg, p)
    out = []
    for s in cfg.scenarios:
        pred = s.predecessor
        out.append(
            estimate_scenario(
                s.name,
                cfg.policy_for(s.name),
                s.kernel,
                pred.kernel if pred else None,
                pred.count if pred else 0,
                p,
                sensor,
                world,
                seen,
                timing,
            )  # fmt: skip
        )
    cal_s = 0.0 if calibrated else calibration_cost(cfg.calibration).seconds
    return SweepEstimate(out, cal_s, basis)


def estimate_table(est: SweepEstimate) -> str:
    """The estimate as a text table: per scenario the runs (adaptive SSP runs: expected/budget), the expected GPU time
    by run kind (s) and its range."""
    head = ("scenario", "exec_us", "sse_runs", "ssp_runs", "probe_s", "reference_s", "sse_s", "ssp_s", "total_s",
            "range_s")  # fmt: skip
    rows = [head]
    for s in est.scenarios:
        c, pl = s.cost, s.plan
        ref = f"{c.reference_s:.1f}" + (f"-{c.reference_max_s:.1f}" if c.reference_max_s > c.reference_s else "")
        rows.append(
            (
                s.name,
                f"{pl.exec_time_ns / 1e3:.1f}",
                "skipped" if pl.sse_decision is not None and pl.sse_decision.skipped else str(pl.sse_runs),
                str(pl.runs) if pl.ssp_runs_expected is None else f"{pl.ssp_runs_expected}/{pl.runs}",
                f"{c.probe_s:.1f}",
                ref,
                f"{c.sse_s:.1f}",
                f"{c.ssp_s:.1f}",
                f"{s.expected_s:.1f}",
                f"{s.low_s:.0f}-{s.high_s:.0f}",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(v.rjust(w) if i else v.ljust(w) for i, (v, w) in enumerate(zip(r, widths, strict=True)))
             for r in rows]  # fmt: skip
    skipped = [s for s in est.scenarios if s.plan.sse_decision is not None and s.plan.sse_decision.skipped]
    lines += [f"{s.name}: {s.plan.sse_decision.skipped}" for s in skipped if s.plan.sse_decision is not None]
    if est.calibration_s:
        lines.append(f"calibration: {est.calibration_s:.1f} s")
    lines.append(
        f"total: {est.total_s:.0f} s ({est.total_s / 60:.1f} GPU-min) expected, "
        f"{est.total_min_s:.0f}-{est.total_max_s:.0f} s with the adaptive and probe-dependent parts at their bounds"
    )
    lines += [f"basis: {b}" for b in est.basis]
    return "\n".join(lines) + "\n"
