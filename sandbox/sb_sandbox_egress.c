/*
 * sb_sandbox_egress: --allow-net's two ends around the box wall.
 *   launcher side  sb_box_egress_start/stop: the session's proxy process
 *                  (sb_egress_proxy), listening on SB_EGRESS_SOCK in the
 *                  box's socket dir;
 *   box side       sb_box_egress_listen/relay: 127.0.0.1:SB_EGRESS_PORT
 *                  in the box's own network namespace, each connection
 *                  carried to that Unix socket by a relay process (a
 *                  child of pid 1, as uid 1000, under the box's Landlock
 *                  and seccomp). The box side runs between clone and exec
 *                  rules: no allocation, no locks.
 */
#include "sandbox/sb_drop.h"
#include "sandbox/sb_egress_proxy.h"
#include "sandbox/sb_egress_pump.h"
#include "sandbox/sb_sandbox.h"

#include "common/xalloc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sandbox/sb_sandbox_impl.h"

int
sb_box_egress_start(sb_sandbox_t *sb, err_t *err)
{
    const sb_policy_t *p = &sb->policy;
    if (!p->allow_net || sb->sock_fd < 0)
        return 0;
    sb_box_egress_stop(sb); /* a restart: the old box's proxy goes */
    int rc = -1, lfd = -1, life[2] = {-1, -1}, ctl[4] = {-1, -1, -1, -1};
    int tls_fd = -1;
    char *rules = NULL;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "/proc/self/fd/%d/%s", sb->sock_fd,
             SB_EGRESS_SOCK);
    /* The socket dir belongs to the box's user namespace, where only its
     * uids are mapped: create the socket as the box's user (this thread's
     * file system ids only, put back at once). */
    int old_uid = setfsuid(sb->host_uid), old_gid = setfsgid(sb->host_gid);
    unlink(a.sun_path);
    lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int bad = lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) < 0 ||
              chmod(a.sun_path, 0666) < 0 || listen(lfd, 64) < 0;
    int e = errno;
    setfsuid((uid_t)old_uid);
    setfsgid((gid_t)old_gid);
    if (bad) {
        errno = e;
        err_errno(err, ERR_SANDBOX, "--allow-net: the proxy's socket %s/%s",
                  sb->sock_dir, SB_EGRESS_SOCK);
        goto out;
    }
    if (pipe2(life, O_CLOEXEC) < 0) {
        err_errno(err, ERR_SANDBOX, "--allow-net: pipe");
        goto out;
    }
    if (sb_box_egress_ctl_open(sb, ctl, err) < 0)
        goto out;
    if (sb_box_egress_conf_fd(sb, &tls_fd, err) < 0) /* --net-secret */
        goto out;
    pthread_mutex_lock(&sb->egress_mu); /* set_net_rules may be changing them */
    rules = xstrdup(sb_box_egress_rules_now(sb));
    pthread_mutex_unlock(&sb->egress_mu);
    static char arg0[] = "jupyter-agent", arg1[] = SB_EGRESS_PROXY_CMD;
    static char env0[] = "PATH=/usr/bin:/bin", env1[] = "LANG=C.UTF-8";
    char *argv[] = {arg0, arg1, rules, NULL};
    char *envp[] = {env0, env1, NULL};
    pid_t pid = fork();
    if (pid < 0) {
        err_errno(err, ERR_SANDBOX, "--allow-net: fork the proxy");
        goto out;
    }
    if (pid == 0) { /* async-signal-safe only until execve */
        setpgid(0, 0);
        /* fds 3 listen, 4 life, 5 records (or closed), 6 rules, 7 TLS conf
         * (or closed) */
        int src[5] = {lfd, life[0], ctl[3], ctl[1], tls_fd}, hi[5];
        for (int i = 0; i < 5; i++)
            hi[i] = src[i] >= 0 ? fcntl(src[i], F_DUPFD, 64) : -1;
        for (int i = 0; i < 5; i++) {
            if (hi[i] < 0)
                close(3 + i);
            else if (dup2(hi[i], 3 + i) < 0)
                _exit(127);
        }
        syscall(SYS_close_range, 8, ~0U, 0);
        execve("/proc/self/exe", argv, envp);
        _exit(127);
    }
    setpgid(pid, pid); /* either of us may win the race */
    sb->egress_pid = pid;
    sb->egress_life = life[1];
    life[1] = -1;
    if (sb_box_egress_ctl_started(sb, ctl, err) < 0) {
        sb_box_egress_stop(sb);
        goto out;
    }
    rc = 0;
out:
    if (lfd >= 0)
        close(lfd);
    if (life[0] >= 0)
        close(life[0]);
    if (life[1] >= 0)
        close(life[1]);
    for (int i = 0; i < 4; i++)
        if (ctl[i] >= 0)
            close(ctl[i]);
    free(rules);
    if (tls_fd >= 0)
        close(tls_fd);
    return rc;
}

void
sb_box_egress_stop(sb_sandbox_t *sb)
{
    if (sb->egress_life >= 0)
        close(sb->egress_life);
    sb->egress_life = -1;
    if (sb->egress_pid > 0) {
        kill(-sb->egress_pid, SIGKILL);
        while (waitpid(sb->egress_pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    sb->egress_pid = -1;
    sb_box_egress_ctl_stop(sb); /* after the proxy: its records drained */
}

int
sb_box_egress_listen(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons(SB_EGRESS_PORT),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 64) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* One connection: to the proxy's socket, then both ways until done. */
static _Noreturn void
s_relay_one(int cfd, const char *sock)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    size_t n = strlen(sock);
    if (n >= sizeof a.sun_path)
        _exit(1);
    memcpy(a.sun_path, sock, n + 1);
    int u = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (u < 0 || connect(u, (struct sockaddr *)&a, sizeof a) < 0) {
        static const char msg[] =
            "HTTP/1.1 502 jupyter-agent egress: the proxy is not "
            "running\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        sb_egress_write_all(cfd, msg, sizeof msg - 1);
        _exit(1);
    }
    sb_egress_pump_t pp;
    memset(&pp, 0, sizeof pp);
    sb_egress_pump_run(cfd, u, &pp);
    _exit(0);
}

void
sb_box_egress_relay(const struct s_child *c, int lfd, int landlock)
{
    pid_t pid = (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
    if (pid != 0) {
        if (pid < 0)
            sb_box_die(c, "fork the egress relay", NULL);
        return;
    }
    int keep[2] = {lfd, landlock};
    sb_box_close_others(keep, 2);
    const char *step = NULL;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN; /* our children reap themselves */
    sigaction(SIGCHLD, &sa, NULL);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
    if (sb_drop_to_user(SB_SANDBOX_UID, &step) < 0 ||
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 ||
        (landlock >= 0 && sb_landlock_enforce(landlock) < 0) ||
        (c->seccomp_init && sb_seccomp_install(c->seccomp_init) < 0))
        _exit(1); /* no relay: connections to the port are refused */
    if (landlock >= 0)
        close(landlock);
    for (;;) {
        int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (cfd < 0) {
            struct timespec ts = {0, 50 * 1000 * 1000}; /* EMFILE: wait */
            nanosleep(&ts, NULL);
            continue;
        }
        pid_t kid = (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
        if (kid == 0) {
            close(lfd);
            s_relay_one(cfd, c->egress_sock);
        }
        close(cfd);
    }
}
