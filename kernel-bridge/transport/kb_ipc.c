/* ipc:// sockets pinned by inode (see kb_ipc.h). */
#include "kb_ipc.h"

#include "common/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct kb_ipc {
    char *path;        /* owned: as given, for messages */
    char *name;        /* owned: the last component, looked up in dir */
    int dir;           /* owned O_PATH fd of the socket dir */
    dev_t dir_dev;     /* the dir's filesystem */
    uid_t dir_uid;     /* the dir's owner */
    int pin;           /* owned: fd N of the endpoint */
    bool pinned;       /* pin refers to a checked socket, else to dir */
    dev_t dev;         /* the pinned socket's inode, when pinned */
    ino_t ino;         /*   "   */
    char endpoint[40]; /* "ipc:///proc/self/fd/N" */
};

kb_ipc_t *
kb_ipc_new(const char *path, err_t *err)
{
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    if (!*name || !strcmp(name, ".") || !strcmp(name, "..")) {
        err_set(err, ERR_KERNEL, "ipc endpoint %s names no socket file", path);
        return NULL;
    }
    char *dir = slash ? xstrndup(path, (size_t)(slash - path)) : xstrdup(".");
    if (!*dir) {
        free(dir);
        dir = xstrdup("/");
    }
    kb_ipc_t *p = xcalloc(1, sizeof *p);
    p->pin = -1;
    p->dir = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct stat st;
    if (p->dir < 0 || fstat(p->dir, &st) < 0 ||
        (p->pin = fcntl(p->dir, F_DUPFD_CLOEXEC, 3)) < 0) {
        err_errno(err, ERR_KERNEL, "cannot open the socket directory %s", dir);
        free(dir);
        kb_ipc_destroy(&p);
        return NULL;
    }
    free(dir);
    p->dir_dev = st.st_dev;
    p->dir_uid = st.st_uid;
    p->path = xstrdup(path);
    p->name = xstrdup(name);
    snprintf(p->endpoint, sizeof p->endpoint, "ipc:///proc/self/fd/%d", p->pin);
    (void)kb_ipc_refresh(p, NULL); /* not bound yet is the usual case */
    return p;
}

void
kb_ipc_destroy(kb_ipc_t **pp)
{
    if (!pp || !*pp)
        return;
    kb_ipc_t *p = *pp;
    if (p->pin >= 0)
        close(p->pin);
    if (p->dir >= 0)
        close(p->dir);
    free(p->path);
    free(p->name);
    free(p);
    *pp = NULL;
}

const char *
kb_ipc_endpoint(const kb_ipc_t *p)
{
    return p->endpoint;
}

bool
kb_ipc_pinned(const kb_ipc_t *p)
{
    return p->pinned;
}

int
kb_ipc_refresh(kb_ipc_t *p, err_t *err)
{
    int fd = openat(p->dir, p->name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        return p->pinned ? 1 : 0;
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return err_errnum(err, ERR_KERNEL, e,
                          "cannot look at the socket file %s", p->path);
    }
    const char *why = NULL;
    char owner[64];
    if (S_ISLNK(st.st_mode))
        why = "a symlink";
    else if (!S_ISSOCK(st.st_mode))
        why = "not a socket";
    else if (st.st_dev != p->dir_dev)
        why = "on another filesystem";
    else if (st.st_uid != p->dir_uid && st.st_uid != geteuid()) {
        snprintf(owner, sizeof owner, "owned by uid %u, not %u",
                 (unsigned)st.st_uid, (unsigned)p->dir_uid);
        why = owner;
    }
    if (why) {
        close(fd);
        return err_set(err, ERR_KERNEL,
                       "the socket file %s is %s: not connecting to it (the "
                       "kernel may be trying to reach another socket "
                       "through it; restart the kernel)",
                       p->path, why);
    }
    if (p->pinned && st.st_dev == p->dev && st.st_ino == p->ino) {
        close(fd);
        return 1;
    }
    /* Atomic: a connect through fd N reaches the old inode or this one. */
    int rc = dup3(fd, p->pin, O_CLOEXEC);
    int e = errno;
    close(fd);
    if (rc < 0)
        return err_errnum(err, ERR_KERNEL, e, "cannot pin the socket file %s",
                          p->path);
    p->pinned = true;
    p->dev = st.st_dev;
    p->ino = st.st_ino;
    return 1;
}
