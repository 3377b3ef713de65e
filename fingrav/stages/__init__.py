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
GPU_STAGES = ("calibrate", "collect")  # on a real GPU (or a lockstep group) never in a forked stage worker


def rule_command(name: str, python: str) -> str:
    """The shell line of stage `name`'s rule, as a Snakemake template (`{log:q}`, `{params.file:q}`): `python`
    (Snakemake's interpreter) runs `fingrav.stages.__main__`. An analysis stage's client starts without
    site-packages (`python -S`: it needs only the standard library and fingrav, found where `python -m` finds it,
    else where this module was found; ~30 ms less per job; it loads site-packages itself when it runs the stage in
    its own process). A GPU stage's line stays `python -m fingrav.stages`: the line is the rule's code, and a
    changed line would have Snakemake measure every scenario again."""
    import json
    import os
    import shlex

    args = f"{name} --log {{log:q}} --params-file {{params.file:q}}"
    if name in GPU_STAGES:
        return f"{shlex.quote(python)} -m fingrav.stages {args}"
    parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
    boot = (
        f"import sys; sys.path.append({json.dumps(parent)}); from fingrav.stages.__main__ import main; sys.exit(main())"
    )
    return f"{shlex.quote(python)} -S -c {shlex.quote(boot)} {args}"
