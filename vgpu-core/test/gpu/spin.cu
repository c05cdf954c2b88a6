/*
Copyright 2026 The vgpu-dra Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

/*
 * spin.cu - the kernels of probe.c, built to PTX by run.sh (nvcc -ptx): spin
 * runs for ns nanoseconds of the GPU's own clock (%globaltimer) and writes
 * when it started and ended into out[0..1], so the probe measures busy time
 * as the GPU saw it; empty does nothing (per-launch overhead).
 */
extern "C" __global__ void spin(unsigned long long ns, unsigned long long *out)
{
    unsigned long long t0, t;

    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
    if (out != 0 && threadIdx.x == 0 && blockIdx.x == 0) {
        out[0] = t0;
        out[1] = t;
    }
}

extern "C" __global__ void empty(void)
{
}
