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
 * mps-user-reply - libvgpu.so's parser of the MPS user protocol's replies
 * (vgpu_mps_user.h) for pkg/contract/mpsuser's cross-language test: each
 * argument is a message in hex; one line per argument says what the
 * library reads in it: "invalid", or the reply written back in the
 * protocol's words (without the newline) and then " | " and the message
 * the library prints. "--request" prints the request the library sends,
 * in hex.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mps_user.h"

static int unhex(const char *s, char *out, size_t max, size_t *len)
{
    size_t n = strlen(s);

    if (n % 2 != 0 || n / 2 > max)
        return -1;
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v;

        if (sscanf(s + 2 * i, "%2x", &v) != 1)
            return -1;
        out[i] = (char)v;
    }
    *len = n / 2;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--request") == 0) {
        for (const char *p = VGPU_MPS_USER_REQUEST; *p != '\0'; p++)
            printf("%02x", (unsigned char)*p);
        printf("\n");
        return 0;
    }
    for (int i = 1; i < argc; i++) {
        char msg[4 * VGPU_MPS_USER_MSG_MAX], text[256];
        struct vgpu_mps_user_reply r;
        size_t len;

        if (unhex(argv[i], msg, sizeof(msg), &len) != 0) {
            fprintf(stderr, "argument %d is no hex message\n", i);
            return 2;
        }
        if (vgpu_mps_user_reply_parse(msg, len, &r) != 0) {
            printf("invalid\n");
            continue;
        }
        vgpu_mps_user_reply_message(&r, text, sizeof(text));
        if (r.allowed)
            printf("%s %u", VGPU_MPS_USER_ALLOWED, r.asker);
        else if (strcmp(r.reason, VGPU_MPS_USER_REFUSED_USER) == 0)
            printf("%s %s %s %u %u", VGPU_MPS_USER_REFUSED, r.reason, r.gpu, r.served, r.asker);
        else if (strcmp(r.reason, VGPU_MPS_USER_REFUSED_LIMIT) == 0)
            printf("%s %s %u", VGPU_MPS_USER_REFUSED, r.reason, r.limit);
        else
            printf("%s %s", VGPU_MPS_USER_REFUSED, r.reason);
        printf(" | %s\n", text);
    }
    return 0;
}
