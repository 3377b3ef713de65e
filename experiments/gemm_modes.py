"""Does one GEMM shape run as one execution? (issue 20's database, issue 22's card-state term)

results/h200-state-reps4's l3-8b-gateup-m1 (bf16, 1 x 28672 x 4096) ran at 55.2 µs in two preparations and at
60.2 µs in a third, on one H200, drawing ~6 % less in the slow one. This prepares the shape `--preparations` times
in one process, as fingrav does (random bf16 inputs, `torch.matmul(a, b, out=...)`, every earlier preparation kept
alive so each lands elsewhere in memory), and for each: the GPU kernels one execution launches
(`torch.profiler`), and the mean time of `--reps` back-to-back executions (CUDA events, after a warm-up). If the
slow and fast preparations launch different kernels, the library chose another kernel for those inputs; if the
same kernel, the inputs' placement made the difference. With `--sets N` each preparation allocates N input sets
(a, b) and one output, as fingrav rotates through them, and times each set alone and the N in rotation: whether a
slow placement is one set's (the placement term sees the sets' spread) or the whole preparation's. GPU side: torch
only.

    python experiments/gemm_modes.py --m 1 --n 28672 --k 4096 --preparations 12 [--sets 4] --out DIR
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def gpu_kernel_names(torch: Any, launch: Any) -> list[str]:
    """The GPU kernels one `launch()` runs, as torch.profiler names them (sorted, unique)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        launch()
        torch.cuda.synchronize()
    return sorted({e.name for e in prof.events() if str(getattr(e, "device_type", "")).upper().endswith("CUDA")})


def time_us(torch: Any, launch: Any, reps: int) -> float:
    """Mean time of `reps` back-to-back executions (µs), CUDA events, after `reps // 10` warm-ups."""
    for _ in range(max(1, reps // 10)):
        launch()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        launch()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / reps


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--m", type=int, default=1)
    ap.add_argument("--n", type=int, default=28672)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--preparations", type=int, default=12)
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--sets", type=int, default=1, help="input sets per preparation (fingrav: >= 4)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    kept: list[Any] = []
    rows = []
    for i in range(args.preparations):
        gen = torch.Generator(device="cuda")
        gen.manual_seed(1_000_003 + i)
        sets = [
            (
                torch.randn((args.m, args.k), generator=gen, device="cuda").to(torch.bfloat16),
                torch.randn((args.k, args.n), generator=gen, device="cuda").to(torch.bfloat16),
            )
            for _ in range(args.sets)
        ]
        out = torch.empty((args.m, args.n), device="cuda", dtype=torch.bfloat16)
        kept.append((sets, out))

        def one(j: int, sets: Any = sets, out: Any = out) -> Any:
            a, b = sets[j]
            return lambda: torch.matmul(a, b, out=out)

        def rotation(sets: Any = sets, out: Any = out) -> None:
            for a, b in sets:
                torch.matmul(a, b, out=out)

        rotation()
        torch.cuda.synchronize()
        names = gpu_kernel_names(torch, one(0))
        per_set = [time_us(torch, one(j), args.reps) for j in range(args.sets)]
        rows.append(
            {
                "preparation": i,
                "time_us": time_us(torch, rotation, max(1, args.reps // args.sets)) / args.sets,
                "set_time_us": per_set,
                "kernels": names,
                "b_ptr_mib": [b.data_ptr() / 2**20 for _, b in sets],
            }
        )
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {"m": args.m, "n": args.n, "k": args.k, "reps": args.reps, "sets": args.sets, "torch": torch.__version__}
    meta["gpu"] = torch.cuda.get_device_name()
    (args.out / "gemm_modes.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    print("| preparation | time (µs) | each set (µs) | GPU kernels |")
    print("|---|---|---|---|")
    for r in rows:
        each = " ".join(f"{t:.1f}" for t in r["set_time_us"])
        print(f"| {r['preparation']} | {r['time_us']:.2f} | {each} | {'; '.join(r['kernels'])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
