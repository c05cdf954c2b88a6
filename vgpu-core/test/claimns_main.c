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
 * claimns_main.c - build/claims-ns ROOT COMMAND [ARG...]: runs COMMAND in a
 * private mount namespace with ROOT's claim configs mounted read-only, as
 * the kubelet plugin injects them, and their MPS user sockets served for
 * one user, as the plugin serves an MPS claim's (claimns.h). For scripts
 * such as test/gpu/run.sh that write their own claims; needs root.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "claimns.h"

int main(int argc, char **argv)
{
    int rc;

    if (argc < 3) {
        fprintf(stderr, "usage: %s CLAIMS_ROOT COMMAND [ARG...]\n", argv[0]);
        return 2;
    }
    rc = vgpu_test_enter_claims_ns(argv[1]);
    if (rc != 0) {
        fprintf(stderr, "%s: cannot mount the claims of %s read-only in a private mount "
                "namespace: %s (run as root)\n", argv[0], argv[1], strerror(-rc));
        return 125;
    }
    rc = vgpu_test_serve_mps_users(argv[1]);
    if (rc < 0) {
        fprintf(stderr, "%s: cannot serve the MPS user sockets of %s: %s\n", argv[0], argv[1], strerror(-rc));
        return 125;
    }
    execvp(argv[2], argv + 2);
    perror(argv[2]);
    return 127;
}
