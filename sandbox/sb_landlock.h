/*
 * sb_landlock: the box's second wall, under the mount and network
 * namespaces. Landlock lets an unprivileged process restrict its own
 * access; the box's processes get:
 *   - read and execute under /usr, /etc, /proc, the /lib and /bin links
 *     and the --bind paths; listing of every directory;
 *   - read and write only in /mnt/data, /tmp, the home directory,
 *     /dev/shm and the run dir (the kernel's sockets);
 *   - the device nodes /dev/null, zero, full, random, urandom, tty and
 *     /dev/pts;
 *   - with ABI >= 4 (Linux 6.7): no TCP bind and no TCP connect at all,
 *     but, with --allow-net, TCP connect to the egress proxy's one port
 *     (SB_EGRESS_PORT, on the box's loopback);
 *   - with ABI >= 6 (Linux 6.12): no abstract unix sockets outside the box.
 * So a writable host directory that reached the box by mistake, or a
 * network namespace that was shared by mistake, stays closed.
 *
 * The plan is built on the host (sb_landlock_plan_box) into fixed
 * arrays; the box applies it with raw system calls that neither allocate
 * nor lock (sb_landlock_prepare / sb_landlock_enforce), after pivot_root
 * so the paths are the box's. No library: <linux/landlock.h> and
 * syscall(2). The kernel's best ABI is used; older ABIs drop the rules
 * they cannot express, and sb_landlock_describe() says which are in force.
 */
#ifndef SANDBOX_SB_LANDLOCK_H
#define SANDBOX_SB_LANDLOCK_H

#include "sandbox/sb_policy.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define SB_LANDLOCK_MAX_RULES 48

typedef enum sb_landlock_kind {
    SB_LL_READ_EXEC = 1,  /* read, list, execute */
    SB_LL_READ_WRITE = 2, /* everything but device nodes */
    SB_LL_DEVICE = 3,     /* read, write, truncate, ioctl on device files */
    SB_LL_LIST = 4        /* list directories (the root) */
} sb_landlock_kind_t;

typedef struct sb_landlock_rule {
    char path[256];          /* absolute path inside the box */
    sb_landlock_kind_t kind; /* what is allowed beneath it */
} sb_landlock_rule_t;

typedef struct sb_landlock_plan {
    int abi;              /* Landlock ABI in use; 0 = none (no rules) */
    uint64_t handled_fs;  /* filesystem rights the ruleset governs */
    uint64_t handled_net; /* network rights it governs (ABI >= 4) */
    uint64_t scoped;      /* scopes (ABI >= 6) */
    unsigned net_port;    /* the one TCP port connect is allowed to
                             (ABI >= 4, --allow-net), or 0 */
    size_t n;             /* rules used */
    sb_landlock_rule_t rules[SB_LANDLOCK_MAX_RULES]; /* the allowances */
} sb_landlock_plan_t;

/* The kernel's Landlock ABI version (cached), 0 when Landlock is missing
 * or disabled. */
int sb_landlock_abi(void);

/* The plan for a box with policy `p` and run dir `run_dir` (the same
 * path inside), for ABI `abi` (pass sb_landlock_abi()). */
void sb_landlock_plan_box(sb_landlock_plan_t *pl, int abi, const sb_policy_t *p,
                          const char *run_dir);

/* Box side (async-signal-safe). Build the ruleset; paths that do not
 * exist are skipped. Returns the ruleset fd (close-on-exec), or -1 with
 * errno, or -2 when the plan has no ABI (nothing to do). */
int sb_landlock_prepare(const sb_landlock_plan_t *pl);
/* Restrict the calling thread (NO_NEW_PRIVS must be set) with the
 * ruleset `fd` from sb_landlock_prepare; does not close it. 0 or -1. */
int sb_landlock_enforce(int fd);

/* The rights of one rule under the plan's ABI (for the factory). */
uint64_t sb_landlock_rule_access(const sb_landlock_plan_t *pl,
                                 const sb_landlock_rule_t *r);
/* {"abi", "handled_fs", "handled_net", "scoped", "attr_size",
 *  "read_dir", "file_rights", "rules": [[path, access, is_device], ...]}
 * - new reference; for processes that apply the plan themselves (the
 * factory's children): like sb_landlock_prepare, they mask a rule on a
 * file with file_rights and add read_dir to a device rule on a
 * directory. */
json_t *sb_landlock_plan_json(const sb_landlock_plan_t *pl);
/* What is in force, in words: "Landlock ABI 7: files (read-only /usr,
 * ...; read-write /mnt/data, ...), TCP bind and connect denied, abstract
 * unix sockets scoped". Returns buf. */
const char *sb_landlock_describe(const sb_landlock_plan_t *pl, char *buf,
                                 size_t size);
/* What is NOT in force on this kernel, for a one-time warning, or NULL
 * when Landlock has everything this plan asks for. Static string. */
const char *sb_landlock_gap(int abi);

#endif
