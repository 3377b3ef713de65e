"""Command line: `fingrav schema|result-schema|validate|plan|gpu-sweep|calibrate|collect|export|replay|dataset`.

The Snakemake pipeline is the normal way to run fingrav. `gpu-sweep` runs the GPU-side stages
(calibrate + collect of every scenario) without Snakemake, for a GPU machine that has only numpy,
pyarrow, pydantic, torch and the vendor library; the analysis then runs anywhere from the raw data
(`device.backend: replay`).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from fingrav.config import SweepConfig, collection_hash, config_hash, json_schema, load_config
from fingrav.errors import FingravError
from fingrav.guard import check_write
from fingrav.layout import SweepLayout

if TYPE_CHECKING:
    from fingrav.stages.collect import KeptDevice

logger = logging.getLogger(__name__)

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "config" / "schema.json"
RESULT_SCHEMA_PATH = Path(__file__).resolve().parent.parent / "docs" / "result.schema.json"


def schema_text() -> str:
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"


def _cmd_schema(args: argparse.Namespace) -> int:
    out = Path(args.out)
    text = schema_text()
    if args.check:
        if not out.exists() or out.read_text() != text:
            logger.error("%s is out of date: run `fingrav schema`", out)
            return 1
        return 0
    out.write_text(text)
    logger.info("wrote %s", out)
    return 0


def result_schema_text() -> str:
    """docs/result.schema.json: the JSON schema of the result file (`fingrav.contracts.export`)."""
    from fingrav.contracts.export import result_schema

    return json.dumps(result_schema(), indent=2, sort_keys=True) + "\n"


def _cmd_result_schema(args: argparse.Namespace) -> int:
    out = Path(args.out)
    text = result_schema_text()
    if args.check:
        if not out.exists() or out.read_text() != text:
            logger.error("%s is out of date: run `fingrav result-schema`", out)
            return 1
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    logger.info("wrote %s", out)
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    """Write the JSON result file and/or the aiconfigurator-style CSV of a sweep's results (`fingrav.export`)."""
    from fingrav.export import FORMATS, export

    if args.results:
        layout = SweepLayout(Path(args.results))
    elif args.config:
        layout = SweepLayout.of(load_config(args.config).sweep)
    else:
        raise FingravError("export needs --results <results folder> or --config <sweep config>")
    formats = args.format or list(FORMATS)
    if args.out and len(formats) != 1:
        raise FingravError("--out names one file: give one --format with it")
    check_write(Path(args.out) if args.out else layout.export_dir, "--out" if args.out else "export/")
    for fmt in formats:
        export(layout, fmt, Path(args.out) if args.out else None, args.scenario, args.rank)
    return 0


def _cmd_validate(args: argparse.Namespace) -> int:
    args.config = args.config or args.config_path
    if not args.config:
        raise SystemExit("fingrav validate: give the sweep config: --config FILE")
    from fingrav.preflight import check_sweep

    cfg = load_config(args.config)
    check_sweep(cfg)  # what the pipeline refuses when it plans the sweep, refused here too
    logger.info(
        "%s: sweep %r, %d scenarios (%d from grids), backend %s",
        args.config,
        cfg.sweep,
        len(cfg.scenarios),
        sum(g.count() for g in cfg.grid),
        cfg.device.backend,
    )
    if args.expand:
        sys.stdout.write(expanded_table(cfg))
    return 0


def _cmd_plan(args: argparse.Namespace) -> int:
    """The sweep's expected GPU time per scenario and run kind, before it runs (`fingrav.collect.sweep_estimate`)."""
    from fingrav.collect.sweep_estimate import estimate_sweep, estimate_table

    cfg = load_config(args.config)
    if cfg.device.backend == "replay":
        logger.info("%s: a replay measures nothing: no GPU time", args.config)
        return 0
    est = estimate_sweep(cfg, args.preset, args.results, args.probes_from)
    if args.json:
        rows = [
            {"scenario": s.name, "plan": s.plan.to_json(), "low_s": s.low_s, "high_s": s.high_s} for s in est.scenarios
        ]
        doc = {"scenarios": rows, "calibration_s": est.calibration_s, "total_s": est.total_s,
               "total_max_s": est.total_max_s, "basis": est.basis}  # fmt: skip
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        sys.stdout.write(estimate_table(est))
    return 0


def expanded_table(cfg: SweepConfig) -> str:
    """The scenarios a config expands to (grids included), one line each: name, kernel, predecessor."""
    rows = [("scenario", "kernel", "predecessor")]
    for s in cfg.scenarios:
        pred = f"{s.predecessor.count} x {s.predecessor.kernel.label()}" if s.predecessor else ""
        rows.append((s.name, s.kernel.label(), pred))
    widths = [max(len(r[i]) for r in rows) for i in range(2)]
    return "".join(f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]}".rstrip() + "\n" for r in rows)


def _layout(cfg: SweepConfig, out: str | None) -> SweepLayout:
    """The results folder of a CLI measurement, checked as the Snakefile checks a sweep's (`fingrav.preflight`):
    never a committed dataset, a symbolic link or another sweep's folder, with what the backend needs."""
    from fingrav.preflight import check_sweep

    if cfg.device.cards:
        raise FingravError(
            f"device.gpus = {cfg.device.gpus}: the command line measures one GPU (or one lockstep group); run a sweep "
            "over listed GPUs with Snakemake (snakemake --cores <GPUs> --configfile ...), which runs them at once"
        )
    if out:
        layout = SweepLayout(Path(out))
        check_write(layout.root, "--out")
        if layout.root.is_symlink():
            raise FingravError(f"--out {out}: a symbolic link; give the folder itself")
        from fingrav.preflight import check_owner

        check_owner(layout, cfg.device, cfg.sweep)
        return layout
    check_sweep(cfg)
    return SweepLayout.of(cfg.sweep)


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from fingrav.logs import logging_to
    from fingrav.stages import calibrate

    cfg = load_config(args.config)
    layout = _layout(cfg, args.out)
    with logging_to(layout.log("calibrate")):
        calibrate.run(layout, cfg.device, cfg.calibration, cfg.seed)
    return 0


def _collect_one(cfg: SweepConfig, name: str, layout: SweepLayout, keep: KeptDevice | None = None) -> None:
    """Collect scenario `name` with its own log file (`SweepLayout.log`); `keep`: on the device it keeps open across
    scenarios (`fingrav.stages.collect.KeptDevice`), else on one opened for this scenario."""
    from fingrav.logs import logging_to
    from fingrav.stages import collect

    with logging_to(layout.log("collect", name)):
        collect.run(layout, cfg.device, cfg.scenario(name), cfg.policy_for(name), cfg.seed, keep=keep)


def _cmd_collect(args: argparse.Namespace) -> int:
    cfg = load_config(args.config)
    layout = _layout(cfg, args.out)
    for name in args.scenario or [s.name for s in cfg.scenarios]:
        _collect_one(cfg, name, layout)
    return 0


def _collected(cfg: SweepConfig, name: str, layout: SweepLayout) -> bool:
    """Whether scenario `name` is already collected, complete and by this config on every GPU; an incomplete or
    differently configured earlier collection is archived (`fingrav.rawio.archive`; it will be measured again)."""
    from fingrav import rawio

    want = collection_hash(cfg.scenario(name), cfg.policy_for(name), cfg.seed)
    done = True
    for k in range(cfg.device.world_size):
        d = layout.scenario_dir(name, k)
        if not d.exists():
            done = False
            continue
        why = rawio.collection_state(d, want)
        if why is not None:
            rawio.archive(d, layout.archive_dir, why, layout.archive_name(d, k))
            done = False
    return done


def _cmd_gpu_sweep(args: argparse.Namespace) -> int:
    """Calibrate (unless a calibration of this layout exists) and collect every scenario not yet collected:
    rerunning after an interruption resumes where it stopped; nothing measured is ever deleted
    (`fingrav.rawio.archive`). One GPU: every scenario on one device opened once (`KeptDevice`: each measured as on
    a newly opened one; a failing scenario closes it and stops the sweep, as before)."""
    from fingrav import rawio
    from fingrav.stages.collect import KeptDevice

    t0 = time.monotonic()
    cfg = load_config(args.config)
    layout = _layout(cfg, args.out)
    have_cal = all(
        layout.calibration_json(k).exists() and rawio.verify_manifest(layout.calibration_dir(k))
        for k in range(cfg.device.world_size)
    )
    if have_cal:
        logger.info("calibration found in %s: kept (delete it to calibrate again)", layout.root)
    else:
        _cmd_calibrate(args)
    names = args.scenario or [s.name for s in cfg.scenarios]
    price = _prices(cfg, layout) if args.time_limit_s else {}
    left: list[str] = []
    with KeptDevice() as keep:
        for i, name in enumerate(names):
            if _collected(cfg, name, layout):
                logger.info("scenario %d/%d: %s already collected: kept", i + 1, len(names), name)
                continue
            if args.time_limit_s and not _fits(name, price, args.time_limit_s - (time.monotonic() - t0)):
                left = names[i:]
                break
            logger.info("scenario %d/%d: %s", i + 1, len(names), name)
            _collect_one(cfg, name, layout, keep)
    doc = {"config": str(args.config), "config_hash": config_hash(cfg), "scenarios": names, "not_started": left}
    (layout.root / "gpu-sweep.json").write_text(json.dumps(doc, indent=2) + "\n")
    return TIME_LIMIT_RC if left else 0


#: `fingrav gpu-sweep --time-limit-s`: the exit status when scenarios were left for another call (timeout(1)'s)
TIME_LIMIT_RC = 124
#: ... and the margin on a scenario's expected GPU time before it is started (the plan is within +-25 % for ~80 %
#: of the H200 database's shapes: results/h200-db6)
TIME_LIMIT_MARGIN = 1.25


def _prices(cfg: SweepConfig, layout: SweepLayout) -> dict[str, float]:
    """Each scenario's expected GPU time (s), as `fingrav plan` prices it with this sweep's calibration and its
    earlier collections (`fingrav.collect.sweep_estimate`)."""
    from fingrav.collect.sweep_estimate import estimate_sweep

    est = estimate_sweep(cfg, None, layout.root.parent, layout.root)
    return {s.name: s.expected_s for s in est.scenarios}


def _fits(name: str, price: dict[str, float], left_s: float) -> bool:
    """Whether scenario `name` is expected to end within the `left_s` seconds left (with TIME_LIMIT_MARGIN): else
    it is not started, so that no GPU time goes into a collection the time limit would cut (and archive)."""
    need = price.get(name, 0.0) * TIME_LIMIT_MARGIN
    if need <= left_s:
        return True
    logger.info("%s: not started: ~%.0f s expected (x %.2f), %.0f s left of --time-limit-s", name,
                price.get(name, 0.0), TIME_LIMIT_MARGIN, left_s)  # fmt: skip
    return False


def _cmd_replay(args: argparse.Namespace) -> int:
    """`fingrav replay --check NAME`: compare a replay of dataset NAME with its committed summary.csv."""
    from fingrav.replay_check import DEFAULT_REL_TOL, check, check_summaries

    if not args.check:
        logger.error("fingrav replay: only --check NAME is implemented (replay a dataset with snakemake)")
        return 2
    name = args.check
    committed = Path(args.committed or f"results/{name}/summary.csv")
    replayed = Path(args.replayed or f"results/{name}-replay")
    rel = args.rel if args.rel is not None else DEFAULT_REL_TOL
    rep = check_summaries(committed, replayed, rel) if args.summaries else check(committed, replayed, rel)
    return 0 if rep.ok else 1


def _cmd_dataset(args: argparse.Namespace) -> int:
    """`fingrav dataset seal|verify FOLDER`: write or check a committed dataset's DATASET.json (`fingrav.guard`)."""
    from fingrav.guard import seal_dataset, verify_dataset

    if args.action == "seal":
        seal_dataset(args.folder, args.description)
        return 0
    problems = verify_dataset(args.folder)
    for line in problems:
        logger.error("%s", line)
    if not problems:
        logger.info("%s: intact", args.folder)
    return 1 if problems else 0


def _version() -> str:
    """The installed package's version (importlib.metadata), else the source tree's."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fingrav")
    except PackageNotFoundError:
        return "unknown (not installed)"


def _add_dataset_commands(sub: argparse._SubParsersAction) -> None:
    """replay --check and dataset seal|verify: committed real-GPU datasets."""
    rp = sub.add_parser("replay", help="check a replay of a committed dataset against its committed summary.csv")
    rp.add_argument("--check", metavar="NAME", help="the dataset (results/NAME/summary.csv is the committed one)")
    rp.add_argument("--committed", help="the committed summary.csv (default results/NAME/summary.csv)")
    rp.add_argument("--replayed", help="the replayed sweep folder with its metrics.csv (default results/NAME-replay)")
    rp.add_argument("--rel", type=float, help="relative tolerance (default 1e-3: 0.1 %%)")
    rp.add_argument(
        "--summaries", action="store_true", help="compare the two folders' profiles/gpu0/*/summary.json instead"
    )
    rp.set_defaults(func=_cmd_replay)
    d = sub.add_parser("dataset", help="seal (write DATASET.json) or verify a committed dataset folder")
    d.add_argument("action", choices=("seal", "verify"))
    d.add_argument("folder", help="the dataset's folder, e.g. results/h200")
    d.add_argument("--description", help="seal: one line saying what was measured")
    d.set_defaults(func=_cmd_dataset)


def _add_planning_commands(sub: argparse._SubParsersAction) -> None:
    """validate and plan: a sweep config checked and priced before anything runs."""
    v = sub.add_parser("validate", help="validate a sweep config as the pipeline does (the config and what it needs)")
    v.add_argument("--config", help="the sweep config (as in every other subcommand)")
    v.add_argument("config_path", nargs="?", metavar="CONFIG", help=argparse.SUPPRESS)  # the older positional form
    v.add_argument("--expand", action="store_true", help="list every scenario, grids expanded")
    v.set_defaults(func=_cmd_validate)
    pl = sub.add_parser("plan", help="the GPU time a sweep will take, per scenario and run kind, before it runs")
    pl.add_argument("--config", required=True)
    pl.add_argument("--preset", help="the simulator preset modelling the GPU's kernels and sensor (default: the "
                    "simulated one; nvml: h200, amdsmi: mi300x)")  # fmt: skip
    pl.add_argument("--results", default="results", help="where results/<sweep>/calibration is looked for")
    pl.add_argument(
        "--probes-from",
        action="append",
        help="a results folder of earlier collections on this GPU (e.g. a committed dataset; repeat it for several): "
        "their stability probes price the device transient, and the SSP runs their adaptive stop took price the same "
        "kernels' SSP runs (default: the sweep's own)",
    )
    pl.add_argument("--json", action="store_true", help="the plans and estimates as JSON")
    pl.set_defaults(func=_cmd_plan)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fingrav", description=__doc__.split("\n\n")[0])
    p.add_argument("--version", action="version", version=f"fingrav {_version()}")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("schema", help="write (or --check) config/schema.json from the pydantic models")
    s.add_argument("--out", default=str(SCHEMA_PATH))
    s.add_argument("--check", action="store_true")
    s.set_defaults(func=_cmd_schema)
    r = sub.add_parser("result-schema", help="write (or --check) docs/result.schema.json from the pydantic models")
    r.add_argument("--out", default=str(RESULT_SCHEMA_PATH))
    r.add_argument("--check", action="store_true")
    r.set_defaults(func=_cmd_result_schema)
    e = sub.add_parser("export", help="a sweep's results as JSON (results.json) and aiconfigurator-style CSV")
    e.add_argument("--results", help="the sweep's results folder (results/<sweep>)")
    e.add_argument("--config", help="or the sweep config (results/<sweep>)")
    e.add_argument("--format", action="append", choices=("json", "aiconfigurator"), help="default: both")
    e.add_argument("--out", help="output file (one --format; default <results>/export/...)")
    e.add_argument("--scenario", action="append", help="only this scenario (repeatable; default: all)")
    e.add_argument("--rank", type=int, default=0, help="which GPU of a multi-GPU sweep (default 0)")
    e.set_defaults(func=_cmd_export)
    _add_dataset_commands(sub)
    _add_planning_commands(sub)
    for name, func, hlp in (
        ("calibrate", _cmd_calibrate, "clock sync + sensor characterization (GPU side)"),
        ("collect", _cmd_collect, "collect scenarios (GPU side); needs the calibration"),
        ("gpu-sweep", _cmd_gpu_sweep, "calibrate + collect every scenario (GPU side, no Snakemake)"),
    ):
        c = sub.add_parser(name, help=hlp)
        c.add_argument("--config", required=True)
        c.add_argument("--out", help="results folder (default results/<sweep>)")
        if name != "calibrate":
            c.add_argument("--scenario", action="append", help="only this scenario (repeatable)")
        if name == "gpu-sweep":
            c.add_argument(
                "--time-limit-s",
                type=float,
                help="start no scenario that is not expected to end within this many seconds of the command's start "
                f"(its planned GPU time x {TIME_LIMIT_MARGIN}); exit status {TIME_LIMIT_RC} when scenarios are left "
                "for another call, listed as not_started in gpu-sweep.json",
            )
        c.set_defaults(func=func)
    return p


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except FingravError as err:
        logger.error("%s", err)
        return 2
    except MemoryError:
        logger.error("%s: out of memory on this machine: lower the sweep's runs or executions (run_policy)", args.cmd)
        return 2
    except OSError as err:  # a full disk, a read-only or special file (--out /proc/...): the file and the reason
        where = f"{err.filename}: " if err.filename else ""
        logger.error("%s%s", where, err.strerror or err)
        return 2


if __name__ == "__main__":
    sys.exit(main())
