/*
 * sb_proc: processes started in a RUNNING box besides its program (the
 * commands of `jupyter-agent e2b` and of MCP's shell tool), behind one
 * ops struct per engine, so the namespace engine (sb_sandbox.h: the box's
 * pid 1 forks them) and another (gVisor) answer the same calls.
 *
 * Promise of every engine: a command runs in the same box as the
 * program: its namespaces and mounts (/mnt/data, /home/user, /tmp), as
 * the box's user, under the same seccomp filter, Landlock rules, rlimits,
 * cgroup and NO_NEW_PRIVS, in a session of its own; it dies with the box.
 *
 * An engine is low level: it starts, signals and reports; output, stdin,
 * time and size bounds are sb_cmds.h's, on top of any engine.
 * Thread-safe for one caller at a time (sb_cmds serialises).
 */
#ifndef SANDBOX_SB_PROC_H
#define SANDBOX_SB_PROC_H

#include "common/err.h"

#include <stdbool.h>

typedef struct sb_proc_spec {
    char *const *argv; /* argv[0]: absolute, or a name looked up in PATH */
    char *const *envp; /* the complete environment; NULL = empty */
    const char *cwd;   /* absolute path inside; NULL = /home/user */
    int stdio[3];      /* the command's 0, 1, 2 (borrowed, passed in) */
    bool ctty;         /* stdio[0] is a terminal: its controlling one */
} sb_proc_spec_t;

typedef enum sb_proc_event_kind {
    SB_PROC_STARTED = 1, /* `id` runs as `pid` (inside the box) */
    SB_PROC_FAILED = 2,  /* `id` did not start: code, text */
    SB_PROC_EXITED = 3,  /* `id` ended with wait `status` */
} sb_proc_event_kind_t;

typedef struct sb_proc_event {
    sb_proc_event_kind_t kind; /* what happened */
    unsigned id;               /* the caller's id given to start */
    int pid;                   /* STARTED: pid in the box */
    int status;                /* EXITED: wait status */
    int code;                  /* FAILED: ERR_USAGE or ERR_SANDBOX */
    char text[320];            /* FAILED: "exec nosuch: No such file..." */
} sb_proc_event_t;

typedef struct sb_proc_ops {
    const char *name; /* "namespaces", "gvisor" */
    /* Ask for `spec` to start as `id` (unique among live ones); the
     * answer comes later as STARTED or FAILED. 0 or -1 + err. */
    int (*start)(void *self, unsigned id, const sb_proc_spec_t *spec,
                 err_t *err);
    /* Signal the process group of `id` (a live command; else nothing). */
    int (*signal)(void *self, unsigned id, int sig, err_t *err);
    /* An fd that polls readable when next_event has something. */
    int (*fd)(void *self);
    /* 1 with *ev filled, 0 when nothing is pending, -1 once the box is
     * gone (every command with it). Never blocks. */
    int (*next_event)(void *self, sb_proc_event_t *ev);
    void (*destroy)(void *self);
} sb_proc_ops_t;

typedef struct sb_proc_engine {
    const sb_proc_ops_t *ops;
    void *self; /* owned; freed by ops->destroy */
} sb_proc_engine_t;

void sb_proc_engine_destroy(sb_proc_engine_t **e);

#endif
