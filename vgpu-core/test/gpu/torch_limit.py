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

"""Allocates 1 GiB blocks under libvgpu.so until PyTorch raises OutOfMemoryError.

Prints one JSON line. Exit 0 when the GPU looks like VGPU_EXPECT_TOTAL bytes
and the OOM is a catchable torch.OutOfMemoryError within the limit.
"""
import json
import os
import sys

import torch

GIB = 1 << 30
expect_total = int(os.environ["VGPU_EXPECT_TOTAL"])
free, total = torch.cuda.mem_get_info()
blocks = []
error = None
try:
    while len(blocks) < 1024:
        blocks.append(torch.empty(GIB, dtype=torch.uint8, device="cuda"))
except torch.OutOfMemoryError as e:  # the only acceptable way to stop
    error = str(e).splitlines()[0]
result = {
    "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
    "mem_get_info": {"free": free, "total": total},
    "blocks_of_1GiB": len(blocks),
    "oom": error,
    "reserved": torch.cuda.memory_reserved(),
}
print(json.dumps(result))
if os.environ.get("VGPU_HOLD"):
    sys.stdout.flush()
    sys.stdin.read()
ok = total == expect_total and error is not None and 0 < len(blocks) * GIB <= expect_total
sys.exit(0 if ok else 1)
