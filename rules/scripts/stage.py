"""The script of every rule: runs the fingrav stage the rule is named after (fingrav.stages.run_rule)."""

from fingrav.stages import run_rule

# Guarded: multi-GPU collection spawns processes that re-import this script as __mp_main__.
if __name__ == "__main__":
    run_rule(snakemake)  # noqa: F821 - injected by Snakemake
