"""Checks made when a sweep is planned (Snakefile parse, CLI), before any job starts: what the sweep needs that
the config alone cannot tell (files, libraries, the results folder), each failure one message naming the field.

GPU-side module (stdlib + the config). `check_sweep` is called by rules/common.smk when the workflow is parsed;
`screen_snakemake_command_line` by fingrav's Snakemake logger plugin, before Snakemake reads the config files.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fingrav.backends import get_backend
from fingrav.config import DeviceConfig, SweepConfig, read_yaml
from fingrav.errors import ConfigError, FingravError
from fingrav.guard import check_write, dataset_of, verify_dataset
from fingrav.layout import RESULTS_ROOT, WRITTEN_DIRS, SweepLayout, card_root, dataset
from fingrav.snakemake_argv import config_files_of

logger = logging.getLogger(__name__)


def _tracked_files(folder: Path) -> list[str]:
    """Files git tracks under `folder` (empty outside a git checkout)."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "--", str(folder)], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return []
    return [line for line in out.stdout.splitlines() if line]


def check_sweep(cfg: SweepConfig, root: Path | str = ".") -> None:
    """Refuse, with one message, a sweep that cannot run or would destroy data (module docstring):

    * results/<sweep> must not be, or lie in, a committed dataset (`fingrav.guard`: DATASET.json, no git needed),
      replays included: a replay writes a folder of its own (results/<name>-replay/);
    * results/<sweep> must not be a symbolic link (outputs would land outside results/);
    * a replay needs device.replay_dir to exist with raw/gpu<k>/calibration/ for every GPU (listed GPU i: in
      cards/<i>/), and it must not lie
      inside the sweep's own results folder (Snakemake removes a job's outputs before running it);
    * a measuring sweep (not replay) must not write into a results folder that holds committed files;
    * the results folder (and each listed GPU's, cards/<i>/) must not belong to another sweep: raw data measured
      by another backend or GPU, or replayed from another dataset (`check_owner`);
    * a GPU backend needs its vendor library installed (a dry run says so, not a traceback in a job);
    * a callable kernel's target must name a module or file that exists (looked up, not run:
      `fingrav.device.callables.find_problem`); whether it imports and what its factory does shows in collect."""
    root = Path(root)
    layout = SweepLayout.of(cfg.sweep, root / RESULTS_ROOT)
    check_write(layout.root, f"sweep = {cfg.sweep!r}")  # a committed dataset: never written, in a tarball too
    if layout.root.is_symlink():
        raise ConfigError(f"sweep = {cfg.sweep!r}: {layout.root} is a symbolic link; results must stay in results/")
    tracked = _tracked_files(layout.root) if layout.root.exists() else []  # in a git checkout: unsealed files too
    if tracked:
        raise ConfigError(
            f"sweep = {cfg.sweep!r}: {layout.root} holds committed files ({tracked[0]}, ...); a sweep would "
            "overwrite them: give it a sweep name of its own"
        )
    check_owner(layout, cfg.device, cfg.sweep)  # never write into (or archive) another sweep's measurements
    for i in cfg.device.cards:  # a sweep over listed GPUs: each GPU's folder is a one-GPU sweep's
        check_owner(layout.card(i), cfg.device.card(i), cfg.sweep)
    dev = cfg.device
    if dev.backend == "replay":
        src = Path(dev.replay_dir or "")
        src = src if src.is_absolute() else root / src
        if not src.is_dir():
            raise ConfigError(f"device.replay_dir = {dev.replay_dir!r}: no such folder")
        written = [layout.root.resolve() / d for d in WRITTEN_DIRS]
        here = src.resolve()
        if here == layout.root.resolve() or any(w == here or w in here.parents for w in written):
            raise ConfigError(
                f"device.replay_dir = {dev.replay_dir!r} lies where this sweep writes ({layout.root}): a replay "
                "would delete the data it replays; keep a dataset in a folder no rule writes (e.g. results/<name>/gpu)"
            )
        sealed = dataset_of(src)
        changed = verify_dataset(sealed, under=src) if sealed is not None else []
        if changed:
            raise ConfigError(f"device.replay_dir = {dev.replay_dir!r}: the dataset changed: {changed[0]}")
        sources = [(f"GPU {i}", dataset(card_root(src, i)), 0) for i in dev.cards]  # listed GPUs: cards/<i>/
        for what, data, k in sources or [(f"GPU {k}", dataset(src), k) for k in range(dev.world_size)]:
            cal = data.calibration_dir(k)
            if not cal.is_dir():
                raise ConfigError(f"device.replay_dir = {dev.replay_dir!r}: {cal} is missing ({what})")
        return
    if (problem := get_backend(dev.backend).library_problem()) is not None:
        raise ConfigError(problem)
    check_callables(cfg, root)


def estimate_line(cfg: SweepConfig, root: Path | str = ".") -> str | None:
    """One line with the sweep's expected GPU time (`fingrav.collect.sweep_estimate`), for Snakemake to print when
    it plans the sweep (a dry run included); None for a replay, which measures nothing. Pure arithmetic over the
    config, the calibration if there is one and the simulator's kernel model: milliseconds per scenario."""
    if cfg.device.backend == "replay":
        return None
    from fingrav.collect.sweep_estimate import estimate_sweep

    try:
        est = estimate_sweep(cfg, results_root=Path(root) / RESULTS_ROOT)
    except (FingravError, ValueError) as err:
        return f"fingrav: GPU-time estimate unavailable ({err})"
    return (
        f"fingrav: sweep {cfg.sweep!r}: ~{est.total_s:.0f} GPU-s expected for {len(est.scenarios)} scenarios "
        f"(range {est.total_min_s:.0f}-{est.total_max_s:.0f} s with the probe-dependent and adaptive parts at their "
        "bounds; table: fingrav plan --config <this config>)"
    )


def check_callables(cfg: SweepConfig, root: Path | str = ".") -> None:
    """ConfigError naming the scenario when a callable kernel's target names no module or file (relative to
    `root`, the sweep's working directory)."""
    from fingrav.device.callables import find_problem

    for s in cfg.scenarios:
        kernels = (("kernel", s.kernel), ("predecessor.kernel", s.predecessor.kernel if s.predecessor else None))
        for part, k in kernels:
            if k is not None and k.kind == "callable" and (problem := find_problem(k.target, root)) is not None:
                raise ConfigError(f"scenarios[{s.name!r}].{part}: {problem}")


# --------------------------------------------------------------------------- whose results folder
def owner_record(device: DeviceConfig) -> dict[str, Any]:
    """What makes raw data another sweep's: the backend and the GPU (index) that measured it, the dataset replayed."""
    rec: dict[str, Any] = {"backend": device.backend, "index": device.index}
    if device.backend == "replay":
        rec["replay_dir"] = os.path.normpath(device.replay_dir or "")
    return rec


def check_owner(layout: SweepLayout, device: DeviceConfig, sweep: str | None = None) -> None:
    """ConfigError when the folder's raw data was measured by another backend or GPU, or replayed from another
    dataset (raw/OWNER.json): a sweep never writes into, or archives, another sweep's measurements."""
    path = layout.owner_json
    if not path.exists():
        return
    try:
        owner = json.loads(path.read_text())
    except (OSError, ValueError):
        owner = None
    mine = owner_record(device)
    if owner != mine:
        raise ConfigError(
            f"sweep = {sweep or layout.root.name!r}: {layout.root} belongs to another sweep (its raw data was measured "
            f"with {owner}, this sweep measures with {mine}): give this sweep a name of its own"
        )


def claim_results(layout: SweepLayout, device: DeviceConfig) -> None:
    """Record who measures into this results folder (raw/OWNER.json), or refuse (ConfigError) when it is another
    sweep's, or a committed dataset (`fingrav.guard`); called by the stages that measure (calibrate, collect)
    before they write raw data."""
    check_write(layout.root, "results folder")
    check_owner(layout, device)
    if not layout.owner_json.exists():
        from fingrav import rawio

        rawio.write_json(layout.owner_json, owner_record(device))


# --------------------------------------------------------------------------- before Snakemake reads a config file
def screen_snakemake_command_line(argv: Sequence[str] | None = None) -> None:
    """Parse every config file of a Snakemake command line, those it names and those its profiles name
    (`fingrav.snakemake_argv.config_files_of`), with fingrav's safe YAML reader (`read_yaml`: no YTE templates, no
    duplicate keys, no alias bombs, size-limited) before Snakemake loads it itself: Snakemake renders
    a YAML config that sets __use_yte__ with YTE, evaluating its Python, even for a dry run. Called by fingrav's
    Snakemake logger plugin (snakemake_logger_plugin_fingrav), which Snakemake imports when it builds its argument
    parser, before it reads any profile or config file, whatever profile is named; exits with one line, no
    traceback, when a file is refused."""
    for path in config_files_of(sys.argv[1:] if argv is None else argv):
        try:
            read_yaml(path)
        except ConfigError as err:
            raise SystemExit(f"fingrav refuses the config file before Snakemake reads it: {err}") from None
