"""The card's state between runs (issue 22): does a below-cap kernel's sustained power depend on what ran before it
and how long ago, and does its execution time move with it? One GPU-machine call (~3-4 min).

    python3 experiments/card_state.py --out DIR [--config config/h200-db4.yaml] [--plan default]
    python3 experiments/card_state.py --from-json DIR/card_state.json          # no GPU: the table again
    python3 experiments/card_state.py --summary OUT.csv NAME=DIR/card_state.json ...   # the spreads of calls, as CSV

results/h200-probe-ab measured two below-cap kernels twice a minute apart: the run measured first read 1.7 % and
5.3 % higher and ran 2-7 % faster, beyond their CIs. This script runs a fixed plan (`PLANS`) of steps on one GPU:
``("idle", s)`` leaves it idle s seconds; ``("run", scenario, s)`` runs the scenario's kernel back to back for s
seconds, unstamped (`fingrav.device.nvidia.NVMLDevice.run_unstamped`, CUDA-graph parts; how users launch it) with
NVML's power samples recorded (fingrav's sampler). A thread reads the SM and memory clocks and the GPU temperature
every `POLL_S` seconds throughout. Per run it keeps: the mean power after `SETTLE_S` (W) with its batch-means CI
(`experiments/peers.settled_power`, 250 ms blocks), the 250 ms block means, the execution time (us, GPU stamps of the
whole run) and the executions done against host time at each part (the cycle time's course), the idle before it and
what ran last, the clocks and temperature over it. Writes DIR/card_state.json and DIR/card_state.md; prints the
table last. Kernels come from the sweep config's scenarios (grids expanded), so the shapes are the database's.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

logger = logging.getLogger("card_state")

SETTLE_S = 0.5  # the mean power counts the samples from this long after the run's start
BLOCK_NS = 250_000_000  # block means (and their batch-means CI) over 250 ms
POLL_S = 0.1  # clocks and temperature, every 100 ms
PART_NS = 50_000_000  # the run's parts: ~50 ms of executions each (the cycle time's course at this resolution)

B1, B2, B3, C = "l3-8b-gateup-m1", "l3-70b-qkv-m8", "l3-decode-8b-kv_len1024-batch1", "l3-8b-gateup-m4096"

#: step plans: ("idle", seconds) | ("run", scenario, seconds)
PLANS: dict[str, list[tuple[Any, ...]]] = {
    "default": [
        # baseline after a rest, each below-cap kernel twice
        ("idle", 8.0),
        ("run", B1, 2.0),
        ("idle", 1.0),
        ("run", B1, 2.0),
        ("idle", 1.0),
        ("run", B2, 2.0),
        ("idle", 1.0),
        ("run", B2, 2.0),
        ("idle", 1.0),
        ("run", B3, 2.0),
        # after a cap-bound kernel: the below-cap kernel at 0.2, 1, 5 and 15 s after it
        ("run", C, 8.0),
        ("idle", 0.2),
        ("run", B1, 2.0),
        ("idle", 1.0),
        ("run", B1, 2.0),
        ("idle", 5.0),
        ("run", B1, 2.0),
        ("idle", 15.0),
        ("run", B1, 2.0),
        ("run", C, 8.0),
        ("idle", 0.2),
        ("run", B2, 2.0),
        ("idle", 1.0),
        ("run", B2, 2.0),
        ("idle", 5.0),
        ("run", B2, 2.0),
        ("idle", 15.0),
        ("run", B2, 2.0),
        # a long run of one below-cap kernel: its course over 20 s
        ("idle", 1.0),
        ("run", B1, 20.0),
        ("idle", 1.0),
        ("run", B3, 2.0),
        # after a long rest
        ("idle", 25.0),
        ("run", B1, 2.0),
        ("idle", 1.0),
        ("run", B2, 2.0),
    ],
    # the same kernel prepared four times (fresh inputs and allocations each: "scenario#k"), measured in turn
    "prepare": [("idle", 2.0)]
    + [("run", f"{k}#{i}", 1.5) for i in range(4) for k in (B1, B2, "l3-8b-down-m1")]
    + [("idle", 1.0)]
    + [("run", f"{k}#{i}", 1.5) for i in range(4) for k in (B1, B2, "l3-8b-down-m1")],
    # one card, six preparations of each shape with one input set ("@1") and six with four ("@4"), interleaved: does
    # rotating through four placements narrow the spread between preparations?
    "sets": [("idle", 2.0)]
    + [("run", f"{k}#{i}@{n}", 1.2) for i in range(6) for k in (B1, B2, "l3-8b-down-m1") for n in (1, 4)],
    # a control (B1) and two other below-cap shapes right after it, eight times, after heavy phases and idles of
    # different lengths: does the control's deviation predict the others' (a control-kernel state term)?
    "control": [("idle", 2.0)]
    + [
        st
        for i in range(8)
        for st in (
            *((("run", C, 3.0 * (i % 3)),) if i % 3 else ()),
            *((("idle", 4.0 * (i % 4)),) if i % 4 else ()),
            ("run", B1, 1.5),
            ("run", B2, 1.5),
            ("run", B3, 1.5),
        )
    ],
    "quick": [("idle", 1.0), ("run", B1, 1.0), ("run", C, 1.0), ("idle", 0.2), ("run", B1, 1.0)],
}


class Poller:
    """Reads the SM / memory clocks (MHz) and the GPU temperature (C) every `POLL_S` seconds in a thread; rows of
    (host ns, sm_mhz, mem_mhz, temp_c) on the device's host clock."""

    def __init__(self, nvml: Any, handle: Any, clock: Any) -> None:
        self.nvml, self.handle, self.clock = nvml, handle, clock
        self.rows: list[tuple[int, int, int, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        n = self.nvml
        while not self._stop.is_set():
            try:
                sm = n.nvmlDeviceGetClockInfo(self.handle, n.NVML_CLOCK_SM)
                mem = n.nvmlDeviceGetClockInfo(self.handle, n.NVML_CLOCK_MEM)
                temp = n.nvmlDeviceGetTemperature(self.handle, n.NVML_TEMPERATURE_GPU)
                self.rows.append((int(self.clock()), int(sm), int(mem), int(temp)))
            except n.NVMLError as exc:  # a failed read loses one row, not the experiment
                logger.warning("clock poll failed: %s", exc)
            self._stop.wait(POLL_S)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def between(self, a_ns: int, b_ns: int) -> dict[str, float | None]:
        """Mean SM and memory clock (MHz) and temperature (C) of the reads in [a_ns, b_ns]; the temperature at the
        first and last of them."""
        rows = [r for r in self.rows if a_ns <= r[0] <= b_ns]
        if not rows:
            return {"sm_mhz": None, "mem_mhz": None, "temp_first_c": None, "temp_last_c": None}
        return {
            "sm_mhz": statistics.fmean(r[1] for r in rows),
            "mem_mhz": statistics.fmean(r[2] for r in rows),
            "temp_first_c": float(rows[0][3]),
            "temp_last_c": float(rows[-1][3]),
        }


class NoPoller(Poller):
    """No clocks to read (the simulator)."""

    def __init__(self) -> None:
        self.rows = []

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass


def course(marks: list[tuple[int, int]], start_ns: int) -> list[list[float]]:
    """The cycle time's course from the parts' (host ns, executions done) marks: per part after the first,
    [ms since the run's start, cycle time in us over the part] (host-side: parts of ~`PART_NS`)."""
    out: list[list[float]] = []
    for (t0, d0), (t1, d1) in zip(marks, marks[1:], strict=False):
        if d1 > d0 and t1 > t0:
            out.append([round((t1 - start_ns) / 1e6, 1), round((t1 - t0) / (d1 - d0) / 1e3, 4)])
    return out


def run_step(dev: Any, poller: Poller, h: Any, seconds: float, cycle_ns: float) -> dict[str, Any]:
    """One back-to-back unstamped run of `seconds` (module docstring): its statistics."""
    from peers import settled_power

    target = int(seconds * 1e9 / cycle_ns)
    part = max(1, int(PART_NS / cycle_ns))
    marks: list[tuple[int, int]] = []

    def more(done: int) -> int:
        marks.append((dev.host_time_ns(), done))
        return min(part, target - done) if done < target else 0

    dev.start_sampling()
    t0 = dev.host_time_ns()
    rec = dev.run_unstamped(h, part * 2, more=more, part=part)
    end = dev.host_time_ns()
    busy = int(rec.duration_ns[0])
    start = end - busy
    dev.sleep_ns(100_000_000)  # the sensor's lag: let the last samples arrive
    samples = dev.stop_sampling()
    total = samples.channel == "total"
    s = settled_power(samples.t_ns[total], samples.power_mw[total], start, end, int(SETTLE_S * 1e9), BLOCK_NS)
    done = int(rec.exec_index[0]) + 1
    return {
        "host_start_ns": start,
        "launch_ns": t0,
        "busy_s": busy / 1e9,
        "executions": done,
        "cycle_us": busy / done / 1e3,
        "mean_w": s["mean_w"],
        "ci_low_w": s["ci_low_w"],
        "ci_high_w": s["ci_high_w"],
        "block_means_w": [round(x, 2) for x in s["block_means_w"]],
        "burst_w": s["burst_w"],
        "cycle_course_ms_us": course(marks, start),
        **poller.between(start, end),
    }


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Run the plan on the GPU; the rows and the card's identity."""
    from fingrav.config import DeviceConfig, load_config
    from fingrav.device import open_device

    kernels = {s.name: s.kernel for s in load_config(args.config).scenarios if s.predecessor is None}
    plan = PLANS[args.plan]
    if args.sim:  # the simulator's h200 preset: the script's own check, no clocks polled
        dev = open_device(DeviceConfig(backend="sim", sim={"preset": "h200"}), seed=1)
        poller: Poller | NoPoller = NoPoller()
        card = {"name": "simulated (h200 preset)"}
    else:
        import pynvml
        import torch

        from fingrav.device.nvidia import NVMLDevice

        torch.cuda.set_device(args.index)
        dev = NVMLDevice(index=args.index, min_input_sets=args.min_sets)
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(int(dev.power.nvml_index))
        card = {
            "name": pynvml.nvmlDeviceGetName(handle),
            "uuid": pynvml.nvmlDeviceGetUUID(handle),
            "driver": pynvml.nvmlSystemGetDriverVersion(),
            "power_limit_w": pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1e3,
        }
        poller = Poller(pynvml, handle, dev.host_time_ns)
    handles, cycles = {}, {}
    for name in sorted({st[1] for st in plan if st[0] == "run"}):  # "scenario#k@n": preparation k, >= n input sets
        if "@" in name and hasattr(dev, "min_input_sets"):
            dev.min_input_sets = int(name.split("@")[1])
        h = dev.prepare(kernels[name.split("#")[0]])
        n = max(8, int(0.05e9 / max(float(dev.run_unstamped(h, 8).duration_ns[0]) / 8, 1.0)))
        cycles[name] = float(dev.run_unstamped(h, n).duration_ns[0]) / n
        handles[name] = h
    poller.start()
    rows: list[dict[str, Any]] = []
    last, last_end = None, dev.host_time_ns()
    t_origin = last_end
    try:
        for i, st in enumerate(plan):
            if st[0] == "idle":
                dev.sleep_ns(int(st[1] * 1e9))
                continue
            name, seconds = st[1], float(st[2])
            idle_s = (dev.host_time_ns() - last_end) / 1e9
            r = run_step(dev, poller, handles[name], seconds, cycles[name])
            sets = getattr(handles[name], "n_sets", 1)
            r.update(step=i, scenario=name, idle_before_s=round(idle_s, 3), after=last, input_sets=sets)
            r["t_s"] = round((r["host_start_ns"] - t_origin) / 1e9, 2)
            rows.append(r)
            logger.info("%s %.1f W %.3f us", name, r["mean_w"] or float("nan"), r["cycle_us"])
            last, last_end = name, r["host_start_ns"] + int(r["busy_s"] * 1e9)
    finally:
        poller.stop()
        dev.close()
    return {"card": card, "plan": args.plan, "min_sets": args.min_sets, "rows": rows, "polls": poller.rows}


def table(result: dict[str, Any]) -> str:
    """Markdown: per run, what ran before and how long ago, mean power, block range, cycle time, clocks."""
    lines = [
        "| t (s) | scenario | after | idle before (s) | mean W [CI] | 250 ms blocks: first / last W | cycle us | "
        "SM MHz | mem MHz | temp C |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        ci = "" if r["ci_low_w"] is None else f" [{r['ci_low_w']:.1f}, {r['ci_high_w']:.1f}]"
        b = r["block_means_w"]
        blocks = f"{b[0]:.1f} / {b[-1]:.1f}" if b else ""
        mean = "" if r["mean_w"] is None else f"{r['mean_w']:.1f}"
        sm = "" if r["sm_mhz"] is None else f"{r['sm_mhz']:.0f}"
        mem = "" if r["mem_mhz"] is None else f"{r['mem_mhz']:.0f}"
        temp = "" if r["temp_first_c"] is None else f"{r['temp_first_c']:.0f}-{r['temp_last_c']:.0f}"
        lines.append(
            f"| {r['t_s']} | {r['scenario']} | {r['after'] or '-'} | {r['idle_before_s']:.1f} | {mean}{ci} | "
            f"{blocks} | {r['cycle_us']:.3f} | {sm} | {mem} | {temp} |"
        )
    return "\n".join(lines)


def spread(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Per shape and input-set count (a run step's "scenario#k@n" without "#k"): the runs, preparations, the mean
    power (W) and cycle time (us), and their sample standard deviations between runs in % of the mean (None with
    fewer than 2 runs)."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in result["rows"]:
        if r["mean_w"] is None:
            continue
        groups.setdefault((r["scenario"].split("#")[0], int(r.get("input_sets", 1))), []).append(r)
    out = []
    for (name, sets), rows in sorted(groups.items()):
        p = [float(r["mean_w"]) for r in rows]
        c = [float(r["cycle_us"]) for r in rows]
        two = len(rows) >= 2
        out.append(
            {
                "scenario": name,
                "input_sets": sets,
                "runs": len(rows),
                "preparations": len({r["scenario"].split("@")[0] for r in rows}),
                "power_w": statistics.fmean(p),
                "power_sd_pct": statistics.stdev(p) / statistics.fmean(p) * 100.0 if two else None,
                "cycle_us": statistics.fmean(c),
                "cycle_sd_pct": statistics.stdev(c) / statistics.fmean(c) * 100.0 if two else None,
            }
        )
    return out


def spread_table(result: dict[str, Any]) -> str:
    """Markdown of `spread`."""
    lines = [
        "| scenario | input sets | runs | preparations | mean W | sd between runs (% of W) | cycle us | sd (% of us) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for g in spread(result):
        sd_p = "" if g["power_sd_pct"] is None else f"{g['power_sd_pct']:.2f}"
        sd_c = "" if g["cycle_sd_pct"] is None else f"{g['cycle_sd_pct']:.3f}"
        lines.append(
            f"| {g['scenario']} | {g['input_sets']} | {g['runs']} | {g['preparations']} | {g['power_w']:.1f} | "
            f"{sd_p} | {g['cycle_us']:.3f} | {sd_c} |"
        )
    return "\n".join(lines)


def control_correction(result: dict[str, Any], control: str = B1) -> list[dict[str, Any]]:
    """Plan "control": each run of `control` is followed by other shapes; per other shape, the sd between its runs (%
    of its mean) as measured, and after dividing each run by the control's relative deviation just before it (a
    control-kernel correction of the card's state), with the correlation of the two deviations."""
    rows = result["rows"]
    pairs: dict[str, list[tuple[float, float]]] = {}
    last = None
    for r in rows:
        if r["mean_w"] is None:
            continue
        if r["scenario"] == control:
            last = float(r["mean_w"])
        elif last is not None and r["after"] is not None:
            pairs.setdefault(r["scenario"], []).append((last, float(r["mean_w"])))
    out = []
    for name, xy in sorted(pairs.items()):
        if len(xy) < 3:
            continue
        c = np.array([x for x, _ in xy])
        y = np.array([v for _, v in xy])
        rc, ry = c / c.mean() - 1.0, y / y.mean() - 1.0
        out.append(
            {
                "scenario": name,
                "runs": len(xy),
                "sd_pct": float(np.std(ry, ddof=1) * 100.0),
                "corrected_sd_pct": float(np.std(ry - rc, ddof=1) * 100.0),
                "correlation": float(np.corrcoef(rc, ry)[0, 1]),
            }
        )
    return out


def control_table(result: dict[str, Any]) -> str:
    """Markdown of `control_correction` ("" for other plans)."""
    got = control_correction(result) if result.get("plan") == "control" else []
    if not got:
        return ""
    lines = [
        f"| after the control ({B1}) | runs | sd between runs (%) | corrected by the control (%) | correlation |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {g['scenario']} | {g['runs']} | {g['sd_pct']:.3f} | {g['corrected_sd_pct']:.3f} | {g['correlation']:.2f} |"
        for g in got
    ]
    return "\n\n" + "\n".join(lines)


def write_summary(path: Path, calls: list[str]) -> None:
    """The dataset's summary.csv: `spread` of each call ("NAME=card_state.json"), one row per call, shape and
    input-set count, in the order given."""
    import polars as pl

    rows = []
    for spec in calls:
        name, _, json_path = spec.partition("=")
        rows += [{"call": name, **g} for g in spread(json.loads(Path(json_path).read_text()))]
    pl.DataFrame(rows).write_csv(path, float_precision=4)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--config", type=Path, default=Path("config/h200-db4.yaml"))
    ap.add_argument("--plan", choices=sorted(PLANS), default="default")
    ap.add_argument("--index", type=int, default=0)
    ap.add_argument("--min-sets", type=int, default=1, help="input sets per kernel at least (TorchGPUDevice)")
    ap.add_argument("--from-json", type=Path)
    ap.add_argument("--sim", action="store_true", help="on the simulator (h200 preset): the script's own check")
    ap.add_argument("--summary", type=Path, help="write the spread of CALLS (NAME=card_state.json) to this CSV")
    ap.add_argument("calls", nargs="*", help="with --summary: NAME=card_state.json, one per call")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if args.summary:
        write_summary(args.summary, args.calls)
        return 0
    if args.from_json:
        result = json.loads(args.from_json.read_text())
    else:
        if args.out is None:
            ap.error("--out is needed to measure")
        result = measure(args)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "card_state.json").write_text(json.dumps(result, indent=1))
    text = table(result) + "\n\n" + spread_table(result) + control_table(result) + "\n"
    if not args.from_json:
        (args.out / "card_state.md").write_text(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
