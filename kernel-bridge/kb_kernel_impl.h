/*
 * kb_kernel_impl: private to kernel-bridge/kb_kernel*.c: the kernel
 * handle, shared by kb_kernel.c (start, execute, restart, end) and
 * kb_kernel_pause.c (pause with memory and resume).
 */
#ifndef KERNEL_BRIDGE_KB_KERNEL_IMPL_H
#define KERNEL_BRIDGE_KB_KERNEL_IMPL_H

#include "kernel-bridge/kb_client.h"
#include "kernel-bridge/kb_kernel.h"
#include "kernel-bridge/kb_kernelspec.h"
#include "kernel-bridge/launch/kb_launcher.h"
#include "kernel-bridge/transport/kb_gateway.h"

#include <stdbool.h>

struct kb_kernel {
    kb_kernel_opts_t opts;   /* copy; extra_env still borrowed */
    char *name;              /* owned kernelspec name */
    kb_kernelspec_t spec;    /* owned; valid when has_spec */
    bool has_spec;           /* false when attached */
    kb_launcher_t *launcher; /* owned; NULL when attached */
    kb_client_t *client;     /* owned */
    kb_msg_t *info;          /* owned kernel_info_reply */
    int out_fd;              /* owned memfd holding the kernel's stderr */
    bool dead;               /* the process is known to be gone */
    bool paused;             /* kb_kernel_pause: no process, no client */
    bool no_restart;         /* kb_kernel_no_restart: the caller exits after */
    /* on_restart is running: a restart inside it (its own cell timed out)
     * does not call it again, or a kernel that never answers would be
     * restarted forever. */
    bool in_restart_hook;
    kb_gateway_t *gw; /* owned; the server running it, or NULL */
    char *remote_id;  /* owned kernel id on gw, or NULL */
    bool deleted;     /* remote_id was deleted on gw by us */
    char *workdir;    /* owned private directory in a gw kernel
                         (opts.private_dir), or NULL */
    const kb_exec_observer_t *observer; /* borrowed, or NULL */
};

/* kb_kernel.c: run `code` silently, then evaluate `expr` as its user
 * expression within timeout_ms, without execute's interrupt and restart;
 * its text/plain value (new string) or NULL + err. */
/* k->client for the launched kernel's connection `conn`, watching the
 * launcher's pidfd: 0, or -1 with err. */
int kb_kernel_connect_client(kb_kernel_t *k, const kb_conn_t *conn, err_t *err);

char *kb_kernel_eval_after(kb_kernel_t *k, const char *code, const char *expr,
                           int timeout_ms, err_t *err);

#endif
