"""Throughput of an 8192^3 bf16 matmul loop, for the compute limiter check in run.sh.

Runs for VGPU_SECONDS (default 30), ignores the first VGPU_WARMUP seconds (default 10) while the
limiter settles, and prints one JSON line: {"label", "iters_per_s"}.
"""
import json
import os
import sys
import time

import torch


def main() -> int:
    seconds = float(os.environ.get("VGPU_SECONDS", "30"))
    warmup = float(os.environ.get("VGPU_WARMUP", "10"))
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    start = time.monotonic()
    count, t0 = 0, None
    while time.monotonic() - start < seconds:
        torch.matmul(a, b)
        torch.cuda.synchronize()
        if t0 is None and time.monotonic() - start >= warmup:
            t0, count = time.monotonic(), 0
        count += 1
    rate = count / (time.monotonic() - t0)
    print(json.dumps({"label": sys.argv[1] if len(sys.argv) > 1 else "", "iters_per_s": rate}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
