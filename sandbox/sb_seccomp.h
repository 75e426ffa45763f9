/*
 * sb_seccomp: the system-call filter applied last, just before exec.
 *
 * An allow list, in one readable table (sb_seccomp.c, s_rules): each row
 * names a system call, an optional argument condition, the action and
 * the reason. ALLOW rows are what CPython, ipykernel, libzmq, numpy,
 * pandas, matplotlib, pip and IRkernel were traced to use; deny rows keep
 * the reasons the dangerous calls are out and narrow allowed ones by
 * argument (clone's namespace flags, socket families, TIOCSTI,
 * personality). Anything the table does not allow fails with EPERM, so
 * Python raises a readable OSError; clone3 and every call newer than the
 * table's newest row fail with ENOSYS instead, so glibc falls back to the
 * older call. Foreign architectures (i386 via int 0x80, x32) kill the
 * process.
 *
 * Audit mode (--seccomp-audit) lets through, and counts, what the allow
 * list lacks: the filter hands those calls to a user-notification
 * listener that the launcher answers with "continue" (kernel >= 5.5);
 * the deny rows still fail.
 *
 * The filter is compiled in the parent (libseccomp allocates) into a
 * classic BPF program that the sandbox child installs with one system
 * call, which is async-signal-safe.
 */
#ifndef SANDBOX_SB_SECCOMP_H
#define SANDBOX_SB_SECCOMP_H

#include "common/err.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* One row of the table, as exported for tests and documentation. */
typedef struct sb_seccomp_rule_info {
    const char *syscall; /* system call name, e.g. "ptrace" */
    const char *when;    /* argument condition in words, "" = always */
    const char *action;  /* "ALLOW", "EPERM" or "ENOSYS" */
    const char *reason;  /* why it is allowed or denied */
} sb_seccomp_rule_info_t;

/* A compiled filter: two classic BPF programs back to back, the allow
 * list (`first_len` instructions) and the deny rows (the rest). */
typedef struct sb_seccomp_prog {
    void *insns;      /* owned; struct sock_filter[len] */
    size_t len;       /* number of instructions in both */
    size_t first_len; /* instructions of the allow-list program */
    int n_skipped;    /* table rows whose syscall this arch does not have */
    bool audit;       /* audit mode: installing returns a listener fd */
} sb_seccomp_prog_t;

/* Compile the table for the native architecture (enforcing). */
int sb_seccomp_build(sb_seccomp_prog_t *out, err_t *err);
/* The same, or with `audit` the log-only variant (see above). */
int sb_seccomp_build_mode(sb_seccomp_prog_t *out, bool audit, err_t *err);
/* The enforcing filter letting one more system call through: its deny
 * rows left out, the allow list given it (the kernel factory's box lets
 * its unprivileged program call "setns" to enter the boxes nested in it;
 * everything else stays as it is). Not cached; NULL: sb_seccomp_build. */
int sb_seccomp_build_allowing(sb_seccomp_prog_t *out, const char *syscall_name,
                              err_t *err);
void sb_seccomp_prog_release(sb_seccomp_prog_t *prog);

/* Install `prog` on the calling thread. Async-signal-safe (one raw system
 * call); requires NO_NEW_PRIVS or CAP_SYS_ADMIN. Returns 0 or -1 with
 * errno; an audit program returns its listener fd (close-on-exec), which
 * must leave the box (sb_seccomp_audit_watch) before the program runs. */
int sb_seccomp_install(const sb_seccomp_prog_t *prog);

/* The table (static, borrowed); returns the row count. */
size_t sb_seccomp_table(const sb_seccomp_rule_info_t **rows);
/* The table as a JSON array of {syscall, when, action, reason}, followed
 * by the default rows ("*"). New reference. */
json_t *sb_seccomp_table_json(void);
/* Write libseccomp's pseudo-filter-code listing of both filters to `fd`
 * (without the ENOSYS stub for calls newer than the table). */
int sb_seccomp_export_pfc(int fd, err_t *err);

/* Counts of the calls an audit filter let through. Thread-safe inside
 * (one thread per watched listener); the owner calls the functions. */
typedef struct sb_seccomp_audit sb_seccomp_audit_t;
sb_seccomp_audit_t *sb_seccomp_audit_new(err_t *err);
/* Answer and count the calls of one listener (steals `listener_fd`) until
 * every process holding its filter is gone. */
int sb_seccomp_audit_watch(sb_seccomp_audit_t *a, int listener_fd, err_t *err);
/* "sysfs (#139, 1 call), ..." for every call counted so far, or NULL
 * when none was. New string. */
char *sb_seccomp_audit_report(sb_seccomp_audit_t *a);
/* Stop answering (processes still in a filter then fail those calls with
 * ENOSYS), join the threads. Accepts NULL; sets *a to NULL. */
void sb_seccomp_audit_destroy(sb_seccomp_audit_t **a);

#endif
