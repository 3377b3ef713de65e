"""Checks made when a sweep is planned (Snakefile parse, CLI), before any job starts: what the sweep needs that
the config alone cannot tell (files, libraries, the results folder), each failure one message naming the field.

GPU-side module (stdlib + the config). `check_sweep` is called by rules/common.smk when the workflow is parsed.
"""

from __future__ import annotations

import importlib.util
import logging
import subprocess
from pathlib import Path

from fingrav.config import SweepConfig
from fingrav.errors import ConfigError
from fingrav.layout import RESULTS_ROOT, WRITTEN_DIRS, SweepLayout, dataset

logger = logging.getLogger(__name__)

VENDOR_MODULES = {
    "nvml": ("pynvml", "pip install 'fingrav[nvidia]'"),
    "amdsmi": ("amdsmi", "pip install 'fingrav[amd]'"),
}


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

    * results/<sweep> must not be a symbolic link (outputs would land outside results/);
    * a replay needs device.replay_dir to exist with raw/gpu<k>/calibration/ for every GPU, and it must not lie
      inside the sweep's own results folder (Snakemake removes a job's outputs before running it);
    * a measuring sweep (not replay) must not write into a results folder that holds committed files;
    * a GPU backend needs its vendor library installed (a dry run says so, not a traceback in a job)."""
    root = Path(root)
    layout = SweepLayout.of(cfg.sweep, root / RESULTS_ROOT)
    if layout.root.is_symlink():
        raise ConfigError(f"sweep = {cfg.sweep!r}: {layout.root} is a symbolic link; results must stay in results/")
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
        for k in range(dev.world_size):
            cal = dataset(src).calibration_dir(k)
            if not cal.is_dir():
                raise ConfigError(f"device.replay_dir = {dev.replay_dir!r}: {cal} is missing (GPU {k})")
        return
    tracked = _tracked_files(layout.root) if layout.root.exists() else []
    if tracked:
        raise ConfigError(
            f"sweep = {cfg.sweep!r}: {layout.root} holds committed files ({tracked[0]}, ...); a measuring sweep "
            "would overwrite them: give it a sweep name of its own"
        )
    if dev.backend in VENDOR_MODULES:
        module, hint = VENDOR_MODULES[dev.backend]
        if importlib.util.find_spec(module) is None:
            raise ConfigError(f"device.backend = {dev.backend!r} needs the {module} module, which is missing: {hint}")
