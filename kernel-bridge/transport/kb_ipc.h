/*
 * kb_ipc: a kernel's ipc:// socket reached without resolving, on the
 * host, a path the kernel can change.
 *
 * A sandboxed kernel binds its sockets in its socket dir, which it can
 * write: it can unlink a socket file and put a symlink to any host socket
 * in its place. A connect() to that path, by us (root, in the host's mount
 * namespace) or by libzmq's reconnect, would follow the link: a root
 * connect to systemd, dbus or docker.sock, around the box's network
 * namespace and Landlock (issue 24).
 *
 * So a channel's endpoint is "ipc:///proc/self/fd/N", where fd N is ours
 * and only ever refers to one of two things: a placeholder (a directory;
 * a connect to it is refused, and libzmq retries) or a socket file opened
 * with O_PATH | O_NOFOLLOW relative to the socket dir's fd and checked on
 * that very inode: a socket (not a link), on the directory's filesystem,
 * owned by the directory's owner (the box's user) or by us. connect()
 * through /proc/self/fd/N reaches that inode and no other, on every
 * reconnect, so there is nothing to race between the check and the
 * connect. Moving fd N to a newer checked socket is one dup3().
 *
 * The path given is resolved once, at kb_ipc_new, up to its directory
 * (the caller's own path, e.g. the sandbox's socket dir link); only the
 * last component is the kernel's, and it is never followed.
 *
 * Single-threaded. fd N must outlive every socket connected to the
 * endpoint: close those (and term their context) before kb_ipc_destroy,
 * else a late reconnect could reach whatever file takes the number next.
 */
#ifndef KERNEL_BRIDGE_KB_IPC_H
#define KERNEL_BRIDGE_KB_IPC_H

#include "common/err.h"

#include <stdbool.h>

typedef struct kb_ipc kb_ipc_t;

/* The socket at `path` (absolute or relative; the part after "ipc://"),
 * not necessarily bound yet: pinned at once if it is there and passes the
 * checks. NULL + err (ERR_KERNEL) when its directory cannot be opened or
 * the name is empty. */
kb_ipc_t *kb_ipc_new(const char *path, err_t *err);
/* Close everything (fd N last). Accepts NULL; sets *p to NULL. */
void kb_ipc_destroy(kb_ipc_t **p);

/* "ipc:///proc/self/fd/N" (borrowed; the same for the object's life). */
const char *kb_ipc_endpoint(const kb_ipc_t *p);
/* True once fd N refers to a checked socket. */
bool kb_ipc_pinned(const kb_ipc_t *p);

/* Look at the name again, never following it: when it is a socket that
 * passes the checks and is not the one pinned, pin it. Returns 1 when a
 * checked socket is pinned, 0 when the name is absent and nothing is
 * pinned yet, -1 with ERR_KERNEL when the name is something else (a
 * symlink, not a socket, another filesystem, another owner): the pin, if
 * any, stays on the socket checked before. An absent name keeps the pin
 * (ipykernel removes its socket files as it exits). */
int kb_ipc_refresh(kb_ipc_t *p, err_t *err);

#endif
