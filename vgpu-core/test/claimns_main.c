/*
 * claimns_main.c - build/claims-ns ROOT COMMAND [ARG...]: runs COMMAND in a
 * private mount namespace with ROOT's claim configs mounted read-only, as
 * the kubelet plugin injects them (claimns.h). For scripts such as
 * test/gpu/run.sh that write their own claims; needs root.
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
    execvp(argv[2], argv + 2);
    perror(argv[2]);
    return 127;
}
