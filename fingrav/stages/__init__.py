"""The method's stages, one module each, each with one entry function `run(...)` (typed config and paths
in, paths out) that its Snakemake rule calls in one line (`rules/scripts/stage.py` -> `run_rule`) and that
the CLI and the Python API call too:

| module | METHOD.md | runs where |
|---|---|---|
| `calibrate` | clock sync + sensor characterization | GPU side |
| `collect` | steps 1-5 (timing, probe, plan, SSE/SSP/reference runs) | GPU side |
| `bin` | step 6 (golden runs) | analysis |
| `differentiate` | steps 7-9 (LOIs/TOIs, SSE vs SSP, energy, flags) | analysis |
| `combine` | several GPUs of one scenario | analysis |
| `report` | summary.csv, figures, index.html | analysis |

GPU-side stage modules import nothing of polars, altair or snakemake.
"""

from __future__ import annotations

import importlib
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)

STAGES = ("calibrate", "collect", "bin", "differentiate", "combine", "report")


def run_rule(sm: Any) -> None:
    """Run the stage a Snakemake rule is named after, from its `snakemake` object (rule, input, output,
    params, wildcards, log)."""
    if sm.rule not in STAGES:
        raise ValueError(f"rule {sm.rule!r} is not a stage of fingrav ({', '.join(STAGES)})")
    importlib.import_module(f"fingrav.stages.{sm.rule}").from_snakemake(sm)


def typed(model: type[M], value: Any) -> M:
    """A config section as its model. Rules pass sections of the once-validated sweep config as JSON dicts
    (Snakemake detects parameter changes only in builtins); this turns them back into the typed objects."""
    return value if isinstance(value, model) else model.model_validate(value)
