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
 * dlsym_trampoline.S - the exported dlsym.
 *
 * glibc resolves dlsym(RTLD_NEXT, ...) relative to the object that contains
 * the return address of the dlsym call. A C hook that forwards with an
 * ordinary call would make every RTLD_NEXT lookup relative to libvgpu.so
 * (at -O0 even to itself, recursing). This trampoline asks
 * vgpu_dlsym_intercept(handle, name) for a wrapper and, when there is none,
 * tail-jumps to the real dlsym with the caller's registers and return
 * address untouched, whatever the optimisation level of the rest.
 */
    /* Both live in libvgpu.so's C code; hidden makes the references direct. */
    .hidden vgpu_dlsym_intercept
    .hidden vgpu_real_dlsym
#if defined(__x86_64__)
    .text
    .globl dlsym
    .type dlsym, @function
dlsym:
    .cfi_startproc
#if defined(__CET__)
    endbr64
#endif
    pushq %rdi
    .cfi_adjust_cfa_offset 8
    pushq %rsi
    .cfi_adjust_cfa_offset 8
    movq 16(%rsp), %rdx /* the caller's return address */
    subq $8, %rsp /* 16-byte alignment for the call */
    .cfi_adjust_cfa_offset 8
    call vgpu_dlsym_intercept
    addq $8, %rsp
    .cfi_adjust_cfa_offset -8
    popq %rsi
    .cfi_adjust_cfa_offset -8
    popq %rdi
    .cfi_adjust_cfa_offset -8
    testq %rax, %rax
    jnz 1f
    jmp *vgpu_real_dlsym(%rip)
1:
    leaq vgpu_dlsym_null(%rip), %rcx
    cmpq %rcx, %rax
    jne 2f
    xorl %eax, %eax
2:
    ret
    .cfi_endproc
    .size dlsym, .-dlsym
#elif defined(__aarch64__)
    .text
    .globl dlsym
    .type dlsym, %function
    .p2align 2
dlsym:
    .cfi_startproc
    stp x29, x30, [sp, #-32]!
    .cfi_def_cfa_offset 32
    .cfi_offset 29, -32
    .cfi_offset 30, -24
    mov x29, sp
    stp x0, x1, [sp, #16]
    mov x2, x30 /* the caller's return address */
    bl vgpu_dlsym_intercept
    cbnz x0, 1f
    ldp x0, x1, [sp, #16]
    .cfi_remember_state
    ldp x29, x30, [sp], #32
    .cfi_restore 29
    .cfi_restore 30
    .cfi_def_cfa_offset 0
    adrp x16, vgpu_real_dlsym
    ldr x16, [x16, :lo12:vgpu_real_dlsym]
    br x16
    .cfi_restore_state
1:
    adrp x1, vgpu_dlsym_null
    add x1, x1, :lo12:vgpu_dlsym_null
    cmp x0, x1
    csel x0, xzr, x0, eq
    ldp x29, x30, [sp], #32
    ret
    .cfi_endproc
    .size dlsym, .-dlsym
#else
#error "libvgpu.so: dlsym trampoline not written for this architecture"
#endif
    .section .note.GNU-stack, "", %progbits
