/*
 * sb_gvisor: private to sandbox/: the gVisor engine (sb_engine.h).
 *
 *   sb_gvisor.c        spawn: bundle, private mount namespace, runsc run
 *   sb_oci.c           the box's plan as an OCI bundle (config.json, rootfs)
 *   sb_gvisor_relay.c  the host end of the relay (sb_gvisor_relay.py)
 */
#ifndef SANDBOX_SB_GVISOR_H
#define SANDBOX_SB_GVISOR_H

#include "common/err.h"

#include <stdbool.h>
#include <sys/types.h>

struct sb_sandbox;
struct s_plan;
typedef struct sb_gv_relay sb_gv_relay_t;

/* The engine's state in a box (sb_sandbox_impl.h's sb->gv). */
struct sb_gv {
    char *runsc;     /* owned: path */
    char *dir;       /* owned: top_dir/gv (bundle, state, workspace) */
    char *relay_dir; /* owned: top_dir/relay */
    sb_gv_relay_t *relay;
    int mntns;    /* owned: runsc's mount namespace (the workspace), or -1 */
    int stdio[3]; /* owned dups of the program's stdio, for a restore */
    bool paused;  /* checkpointed: no process left (sb_gvisor_ckpt.c) */
    unsigned restores;
};

/* sb_gvisor.c, for sb_gvisor_ckpt.c: runsc's global flags (new array of
 * 24 slots, *k used; strv_free it); runsc's reason for failing (new,
 * escaped); kill and reap a starting box; start a `runsc restore` argv
 * as the box; close the stdio dups. */
char **sb_gv_runsc_argv(const struct sb_gv *g, int *k);
char *sb_gv_runsc_reason(const struct sb_gv *g);
void sb_gv_abort(struct sb_sandbox *sb);
int sb_gv_restore(struct sb_sandbox *sb, char **rargv, err_t *err);
void sb_gv_forget_stdio(struct sb_gv *g);

/* ---- the host end of the relay (a thread of ours) ----
 * Listens on `relay_path` (the one host socket the box may connect to,
 * through runsc --host-uds=open) for the box's relay; for each socket the
 * box announces, listens on `sock_dir`/NAME on the host and carries every
 * connection made there to the socket of that name inside. Everything the
 * box sends is hostile: names are checked, frames and buffers capped. */
sb_gv_relay_t *sb_gv_relay_new(const char *relay_path, const char *sock_dir,
                               err_t *err);
/* Polls readable once the box's relay said hello (the program runs). */
int sb_gv_relay_ready_fd(const sb_gv_relay_t *r);
/* Ask the box's relay to deliver `sig` to the program. 0 or -1 (ESRCH:
 * no relay connected). */
int sb_gv_relay_signal(sb_gv_relay_t *r, int sig);
/* The program's wait status as the relay reported it, or -1. */
int sb_gv_relay_status(const sb_gv_relay_t *r);
/* Ask the box's relay to let go of its host stream (before `runsc
 * checkpoint`): it closes every channel, we close our listening socket
 * and the stream; it then tries to connect to `relay_path` again until a
 * new relay listens there (after `runsc restore`). 0 once parked, or -1
 * (ESRCH: no relay connected; ETIMEDOUT). */
int sb_gv_relay_park(sb_gv_relay_t *r, int timeout_ms);
bool sb_gv_relay_parked(const sb_gv_relay_t *r);
/* The box's relay connected and is gone again (the box ended). */
bool sb_gv_relay_gone(const sb_gv_relay_t *r);
/* Stop the thread, close every connection, remove the host sockets. */
void sb_gv_relay_destroy(sb_gv_relay_t **r);

/* ---- the bundle (sb_oci.c) ---- */
typedef struct sb_oci_args {
    const char *bundle;       /* dir: config.json and rootfs/ go here */
    const char *ws_host;      /* host dir bound rw at /mnt/data */
    const char *relay_dir;    /* host dir bound at SB_GV_RELAY_DIR */
    const char *relay_script; /* its text */
    size_t relay_len;
    char *const *argv; /* the program */
    char *const *envp;
    bool merge_stdio; /* the program's fd 2 is a dup of its fd 1 */
} sb_oci_args_t;

#define SB_GV_DIR "/.jupyter-agent"
#define SB_GV_RELAY_DIR SB_GV_DIR "/host"
#define SB_GV_BOX_FILES SB_GV_DIR "/box"

int sb_oci_write_bundle(const struct sb_sandbox *sb, const struct s_plan *pl,
                        const sb_oci_args_t *a, err_t *err);

#endif
