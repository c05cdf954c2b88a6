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
 * claimns.h - a test's claims, mounted as the kubelet plugin injects them.
 *
 * libvgpu.so takes limits only from claim configs that are read-only,
 * root-owned mount points (src/injected.h). A test that writes claims under
 * a claims root of its own therefore runs its preloaded processes in a
 * private mount namespace in which every <root>/<claim>/config is
 * bind-mounted read-only onto itself, so the library's production path runs
 * unchanged. Needs root (CAP_SYS_ADMIN) to create the namespace.
 */
#ifndef VGPU_TEST_CLAIMNS_H
#define VGPU_TEST_CLAIMNS_H

/*
 * Bind-mounts every regular <root>/<claim>/config read-only onto itself in
 * the current mount namespace (mode 0644, as the plugin writes it). A
 * missing root mounts nothing. Returns 0 or -errno.
 */
int vgpu_test_bind_claims(const char *root);

/*
 * Moves the calling process into a new private mount namespace, then
 * vgpu_test_bind_claims(root). Call it in a child: it is not undone.
 * Returns 0 or -errno.
 */
int vgpu_test_enter_claims_ns(const char *root);

/*
 * Whether this process could enter such a namespace (tried in a child).
 * Returns 0 or -errno, e.g. -EPERM when not root.
 */
int vgpu_test_claims_ns_supported(void);

/*
 * Writes <root>/a/config (GPU uuid limited to 1 GiB, no SM limit) and its
 * zero-filled region, as the plugin would. Returns 0 or -1.
 */
int vgpu_test_make_claim(const char *root, const char *uuid);

/*
 * Serves <root>/<claim>/host/mps.sock of every claim directory under root
 * as the kubelet plugin serves an MPS claim's (vgpu_mps_user.h) on a node
 * of one user: every request is allowed, with the asker's uid, and each
 * connection held until its peer closes it. The server is a forked child
 * that ends with the calling thread (PR_SET_PDEATHSIG); returns once it
 * listens: its pid, or -errno.
 */
int vgpu_test_serve_mps_users(const char *root);

#endif /* VGPU_TEST_CLAIMNS_H */
