"""The method's stages, one module each, each with one entry function `run(...)` (typed config and paths
in, paths out) that the CLI and the Python API call, and `from_params(dict)` that its Snakemake rule calls
in one line: `python -m fingrav.stages <stage> --log <log> --params-file <json>` (`fingrav.stages.__main__`; the
parameters are validated into the stage's model first, `fingrav.stages.params`):

| module | METHOD.md | runs where |
|---|---|---|
| `calibrate` | clock sync + sensor characterization | GPU side |
| `collect` | steps 1-5 (timing, probe, plan, SSE/SSP/reference runs) | GPU side |
| `bin` | step 6 (golden runs) | analysis |
| `differentiate` | steps 7-9 (LOIs/TOIs, SSE vs SSP, energy, flags) | analysis |
| `combine` | several GPUs of one scenario | analysis |
| `fleet` | one scenario on every listed GPU: the card-to-card spread | analysis |
| `report` | summary.csv, figures, index.html | analysis |

GPU-side stage modules import nothing of polars, altair or snakemake.
"""

from __future__ import annotations

STAGES = ("calibrate", "collect", "bin", "differentiate", "combine", "fleet", "report")
