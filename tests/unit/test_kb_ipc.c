/*
 * kb_ipc: a kernel's socket file reached by inode. Whatever the name in
 * the directory turns into, a connect through the endpoint reaches the
 * socket checked last, or is refused; never a link's target.
 */
#include "../tap.h"

#include "kernel-bridge/transport/kb_ipc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static char dir[] = "/tmp/ja-kbipc-XXXXXX";

static char *
s_path(const char *name)
{
    static char buf[8][256];
    static int i;
    char *p = buf[i++ % 8];
    snprintf(p, sizeof buf[0], "%s/%s", dir, name);
    return p;
}

static int
s_listen(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        listen(fd, 8) < 0)
        return -1;
    return fd;
}

/* Connect through the endpoint: 0, or the errno. */
static int
s_connect(const kb_ipc_t *p)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s",
             kb_ipc_endpoint(p) + strlen("ipc://"));
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    int rc = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 ? 0 : errno;
    close(fd);
    return rc;
}

/* How many connections wait on listener fd (accepted and closed). */
static int
s_accepted(int lfd)
{
    int n = 0, c;
    while ((c = accept(lfd, NULL, NULL)) >= 0) {
        close(c);
        n++;
    }
    return n;
}

int
main(void)
{
    if (!mkdtemp(dir)) {
        ok(0, "a temp dir");
        return done_testing();
    }
    err_t err = {0};
    const char *name = s_path("kernel-1");
    kb_ipc_t *p = kb_ipc_new(name, &err);
    ok(p && !kb_ipc_pinned(p) && kb_ipc_refresh(p, &err) == 0,
       "a socket not bound yet: nothing pinned");
    ok(p && !strncmp(kb_ipc_endpoint(p), "ipc:///proc/self/fd/", 20),
       "the endpoint is one of our fds (%s)", p ? kb_ipc_endpoint(p) : "-");
    is_int(s_connect(p), ECONNREFUSED,
           "before the bind a connect is refused (libzmq retries)");

    int a = s_listen(name);
    ok(a >= 0 && kb_ipc_refresh(p, &err) == 1 && kb_ipc_pinned(p),
       "once bound, the socket is pinned");
    ok(s_connect(p) == 0 && s_accepted(a) == 1,
       "a connect through the endpoint reaches it");

    /* The kernel's move: its socket away, a link to a host socket. */
    const char *host = s_path("host.sock");
    int b = s_listen(host);
    ok(rename(name, s_path("moved")) == 0 && symlink(host, name) == 0,
       "the name becomes a link to another socket");
    err_clear(&err);
    ok(kb_ipc_refresh(p, &err) == -1 && strstr(err.text, "symlink") &&
           strstr(err.text, name),
       "refresh refuses the link, naming the file (%s)", err.text);
    ok(s_connect(p) == 0 && s_accepted(a) == 1 && s_accepted(b) == 0,
       "a reconnect still reaches the socket checked before, never the "
       "link's target");

    unlink(name);
    int f = open(name, O_WRONLY | O_CREAT, 0600);
    close(f);
    err_clear(&err);
    ok(kb_ipc_refresh(p, &err) == -1 && strstr(err.text, "not a socket"),
       "a plain file in its place is refused");
    unlink(name);
    ok(kb_ipc_refresh(p, &err) == 1,
       "a name gone (ipykernel exiting) keeps the pin");

    int c = s_listen(name);
    ok(c >= 0 && kb_ipc_refresh(p, &err) == 1 && s_connect(p) == 0 &&
           s_accepted(c) == 1 && s_accepted(a) == 0,
       "a socket bound again at the name is checked and pinned in turn");
    if (geteuid() == 0) {
        ok(chown(name, 4242, 4242) == 0, "as root: the socket given away");
        err_clear(&err);
        ok(kb_ipc_refresh(p, &err) == -1 && strstr(err.text, "owned by uid"),
           "a socket of another owner than the directory's is refused");
        ok(s_connect(p) == 0 && s_accepted(c) == 1,
           "and the pin stays where it was");
    } else {
        skip("not root: cannot give a socket away");
    }
    kb_ipc_destroy(&p);
    ok(p == NULL, "destroy clears the pointer");
    err_clear(&err);
    ok(kb_ipc_new(s_path("no-dir/kernel-1"), &err) == NULL &&
           err.code == ERR_KERNEL && strstr(err.text, "no-dir"),
       "a missing directory is an error naming it");

    close(a);
    close(b);
    close(c);
    unlink(name);
    unlink(host);
    unlink(s_path("moved"));
    rmdir(dir);
    return done_testing();
}
