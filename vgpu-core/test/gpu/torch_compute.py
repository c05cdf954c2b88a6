# Copyright 2026 The vgpu-dra Authors.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

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
