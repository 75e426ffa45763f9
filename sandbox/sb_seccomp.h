/*
 * sb_seccomp: the system-call filter applied last, just before exec.
 *
 * Default allow, with one readable deny table (sb_seccomp.c, s_rules):
 * each row names a system call, an optional argument condition, the
 * action (EPERM for most, so Python raises a readable OSError; ENOSYS for
 * clone3 so glibc falls back to clone, whose flags can be checked) and
 * the reason. Foreign architectures (i386 via int 0x80, x32) kill the
 * process.
 *
 * The filter is compiled in the parent (libseccomp allocates) into a
 * classic BPF program that the sandbox child installs with one
 * prctl(PR_SET_SECCOMP) call, which is async-signal-safe.
 */
#ifndef SANDBOX_SB_SECCOMP_H
#define SANDBOX_SB_SECCOMP_H

#include "common/err.h"

#include <jansson.h>
#include <stddef.h>

/* One row of the deny table, as exported for tests and documentation. */
typedef struct sb_seccomp_rule_info {
    const char *syscall; /* system call name, e.g. "ptrace" */
    const char *when;    /* argument condition in words, "" = always */
    const char *action;  /* "EPERM", "ENOSYS", "EAFNOSUPPORT", ... */
    const char *reason;  /* why it is denied */
} sb_seccomp_rule_info_t;

/* A compiled filter: `len` sock_filter instructions (8 bytes each). */
typedef struct sb_seccomp_prog {
    void *insns;   /* owned; struct sock_filter[len] */
    size_t len;    /* number of instructions */
    int n_skipped; /* table rows whose syscall this arch does not have */
} sb_seccomp_prog_t;

/* Compile the deny table for the native architecture. */
int sb_seccomp_build(sb_seccomp_prog_t *out, err_t *err);
/* The same filter without the rows for one system call (the kernel
 * factory's box lets its unprivileged program call "setns" to enter the
 * boxes nested in it; everything else stays denied). */
int sb_seccomp_build_allowing(sb_seccomp_prog_t *out, const char *syscall_name,
                              err_t *err);
void sb_seccomp_prog_release(sb_seccomp_prog_t *prog);

/* Install `prog` on the calling thread. Async-signal-safe (raw prctl);
 * requires NO_NEW_PRIVS or CAP_SYS_ADMIN. Returns 0 or -1 with errno. */
int sb_seccomp_install(const sb_seccomp_prog_t *prog);

/* The deny table (static, borrowed); returns the row count. */
size_t sb_seccomp_table(const sb_seccomp_rule_info_t **rows);
/* The deny table as a JSON array of {syscall, when, action, reason}. */
json_t *sb_seccomp_table_json(void);
/* Write libseccomp's pseudo-filter-code listing of the filter to `fd`. */
int sb_seccomp_export_pfc(int fd, err_t *err);

#endif
