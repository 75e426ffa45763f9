/* The forking kernel factory: host side. The Python side is kb_zygote.py. */
#include "kernel-bridge/pool/kb_factory.h"

#include "common/clock.h"
#include "common/fileio.h"
#include "common/jsonlim.h"
#include "common/xalloc.h"
#include "kernel-bridge/pool/kb_pysrc.h"
#include "sandbox/sb_drop.h"
#include "sandbox/sb_landlock.h"
#include "sandbox/sb_seccomp.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define OUT_CAP (256 << 10)
#define MAX_MSG (1 << 16)
#define FACTORY_PIDS 65536 /* RLIMIT_NPROC counts every kernel's processes */
/* Warm-ups run at this nice value (the factory's, inherited by what it
 * forks); a kernel handed to a session gets 0 back. */
#define FACTORY_NICE 10
#define CAP_SYS_NICE_BIT 23

struct kb_factory {
    sb_sandbox_t *box; /* owned: the factory's own box */
    int ctl;           /* owned control socket (SEQPACKET) */
    int out_fd;        /* owned memfd with its stdout/stderr */
    int threads;       /* threads it reported when ready */
    json_t *host_pid;  /* owned: {"<pid in the box>": host pid} of kernels */
    json_t *exited;    /* owned: {"<host pid>": status} reported by it */
    bool niced;        /* runs at FACTORY_NICE (we may undo it per kernel) */
    /* Fork requests are answered in the order they were sent: tickets
     * 1, 2, ... (kb_factory_fork_send). */
    unsigned long sent;     /* tickets handed out */
    unsigned long answered; /* answers received */
    json_t *answers;        /* owned: {"<ticket>": host pid or error text}
                               not yet collected */
    json_t *forgotten;      /* owned: {"<ticket>": true} nobody will collect */
};

/* May this process lower a nice value again (CAP_SYS_NICE)? Only then are
 * warm-ups niced: a kernel must get full priority back at hand-over. */
static bool
s_can_renice(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    if (!f)
        return false;
    char line[256];
    unsigned long long caps = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "CapEff: %llx", &caps) == 1)
            break;
    fclose(f);
    return caps & (1ull << CAP_SYS_NICE_BIT);
}

void
kb_factory_foreground(const kb_factory_t *f, pid_t pid)
{
    if (!f || !f->niced || pid <= 0)
        return;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d) {
        setpriority(PRIO_PROCESS, (id_t)pid, 0);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            setpriority(PRIO_PROCESS, (id_t)atoi(e->d_name), 0);
    closedir(d);
}

/* The last lines the factory printed, for errors. */
static void
s_tail(const kb_factory_t *f, char *buf, size_t size)
{
    buf[0] = '\0';
    char *all = xmalloc(OUT_CAP + 1);
    ssize_t n = pread(f->out_fd, all, OUT_CAP, 0);
    all[n > 0 ? n : 0] = '\0';
    size_t len = strlen(all), keep = len < size - 1 ? len : size - 1;
    memcpy(buf, all + len - keep, keep);
    buf[keep] = '\0';
    free(all);
}

/* One message from the factory within timeout_ms: new object or NULL.
 * A file descriptor passed along goes to *fd (owned) if fd is not NULL,
 * else is closed. */
static json_t *
s_recv(kb_factory_t *f, int timeout_ms, int *fd)
{
    if (fd)
        *fd = -1;
    struct pollfd pf[2] = {{.fd = f->ctl, .events = POLLIN},
                           {.fd = sb_sandbox_pidfd(f->box), .events = POLLIN}};
    int pr;
    while ((pr = poll(pf, 2, timeout_ms)) < 0 && errno == EINTR)
        ;
    if (pr <= 0 || !(pf[0].revents & POLLIN))
        return NULL;
    char *buf = xmalloc(MAX_MSG + 1);
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } cm;
    struct iovec iov = {.iov_base = buf, .iov_len = MAX_MSG};
    struct msghdr mh = {.msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = cm.buf,
                        .msg_controllen = sizeof cm.buf};
    ssize_t n;
    while ((n = recvmsg(f->ctl, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC)) < 0 &&
           errno == EINTR)
        ;
    for (struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL; c;
         c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        int got;
        memcpy(&got, CMSG_DATA(c), sizeof got);
        if (fd && *fd < 0)
            *fd = got;
        else
            close(got);
    }
    json_t *m = NULL;
    if (n > 0) {
        buf[n] = '\0';
        m = jsonlim_loadb(buf, (size_t)n, 0, NULL, NULL);
        if (m && !json_is_object(m)) {
            json_decref(m);
            m = NULL;
        }
    }
    free(buf);
    return m;
}

/* Record an {"exited": pid, "status": st} report (pid as the factory's
 * box sees it) under the kernel's host pid; true if it was one. */
static bool
s_note_exit(kb_factory_t *f, json_t *m)
{
    json_t *pid = json_object_get(m, "exited");
    if (!json_is_integer(pid))
        return false;
    char key[24];
    snprintf(key, sizeof key, "%lld", (long long)json_integer_value(pid));
    json_t *host = json_object_get(f->host_pid, key);
    if (json_is_integer(host)) {
        snprintf(key, sizeof key, "%lld", (long long)json_integer_value(host));
        json_object_set(f->exited, key, json_object_get(m, "status"));
    }
    return true;
}

/* The factory's box: the default policy, with ceilings no lower than the
 * server's own hard limits, since a kernel forked from the factory can
 * lower its rlimits to its session's but never raise them. */
static void
s_box_policy(sb_policy_t *p)
{
    sb_policy_init_default(p);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY &&
        rl.rlim_max > p->nofile)
        p->nofile = rl.rlim_max;
    if (getrlimit(RLIMIT_FSIZE, &rl) == 0)
        p->fsize_bytes = rl.rlim_max;
    if (p->pids < FACTORY_PIDS)
        p->pids = FACTORY_PIDS;
}

/* Send `op` with `fd` (closed here) as one message on the control socket;
 * `what` names it in errors. */
static int
s_send_fd(int ctl, const char *op, int fd, const char *what, err_t *err)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%s", op);
    struct iovec iov = {.iov_base = buf, .iov_len = strlen(buf)};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } cm;
    memset(&cm, 0, sizeof cm);
    struct msghdr mh = {.msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = cm.buf,
                        .msg_controllen = sizeof cm.buf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
    ssize_t n = sendmsg(ctl, &mh, MSG_NOSIGNAL);
    int e = errno;
    close(fd);
    if (n < 0)
        return err_errnum(err, ERR_SANDBOX, e, "factory: sending it %s", what);
    return 0;
}

/* The first message to the factory: its Python, which kb_zygote_boot.py
 * (the only Python on its command line, so no process listing shows the
 * factory's code or the preload) reads and runs: [kb_zygote.py, PRELOAD,
 * kb_warm_entry.py] as JSON in a sealed memfd. */
static int
s_send_source(int ctl, const char *preload, err_t *err)
{
    json_t *j = json_pack("[s, s, s]", kb_zygote_py, preload ? preload : "",
                          kb_warm_entry_py);
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!text)
        return err_set(err, ERR_USAGE, "factory: the preload is not UTF-8");
    int fd = memfd_create("factory-src", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    int rc = fd < 0 || file_write_all(fd, text, strlen(text)) < 0 ||
                     fcntl(fd, F_ADD_SEALS,
                           F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK |
                               F_SEAL_SEAL) < 0
                 ? err_errno(err, ERR_SANDBOX, "factory: its source memfd")
                 : 0;
    free(text);
    if (rc < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return s_send_fd(ctl, "{\"op\": \"source\"}", fd, "its source", err);
}

/* The second message: the privilege drop its kernels run
 * (sandbox/sb_drop.h), as a shared object in a sealed memfd. */
static int
s_send_drop_lib(int ctl, err_t *err)
{
    int fd = sb_drop_lib_memfd(err);
    if (fd < 0)
        return -1;
    return s_send_fd(ctl, "{\"op\": \"drop-lib\"}", fd, "the drop", err);
}

kb_factory_t *
kb_factory_new(const kb_factory_opts_t *o, err_t *err)
{
    kb_factory_t *f = xcalloc(1, sizeof *f);
    f->ctl = f->out_fd = -1;
    f->exited = json_object();
    f->host_pid = json_object();
    f->answers = json_object();
    f->forgotten = json_object();
    int sv[2] = {-1, -1};
    char *argv[6] = {0}, *env[16] = {0};
    sb_policy_t pol;
    s_box_policy(&pol);
    f->box = sb_sandbox_new(&pol, err);
    sb_policy_release(&pol);
    if (!f->box) {
        err_prefix(err, "factory");
        goto fail;
    }
    f->out_fd = memfd_create("factory-out", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (f->out_fd < 0 || ftruncate(f->out_fd, OUT_CAP) ||
        fcntl(f->out_fd, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK) ||
        socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        err_errno(err, ERR_SANDBOX, "factory: setting up");
        goto fail;
    }
    argv[0] = xstrdup(o && o->python ? o->python : "/usr/bin/python3");
    argv[1] = xstrdup("-c");
    argv[2] = xstrdup(kb_zygote_boot_py);
    size_t ne = 0;
    env[ne++] = xstrdup("PATH=/usr/local/bin:/usr/bin:/bin");
    env[ne++] = xstrdup("LANG=C.UTF-8");
    env[ne++] = xstrdup("HOME=" SB_HOME_PATH);
    env[ne++] = xstrdup("MPLCONFIGDIR=/tmp/matplotlib");
    env[ne++] = xstrdup("MPLBACKEND=module://matplotlib_inline.backend_inline");
    env[ne++] = xstrdup("OPENBLAS_NUM_THREADS=1");
    env[ne++] = xstrdup("MKL_NUM_THREADS=1");
    env[ne++] = xstrdup("OMP_NUM_THREADS=1");
    env[ne++] = xstrdup("NUMEXPR_NUM_THREADS=1");
    env[ne++] = xstrdup("PYTHONDONTWRITEBYTECODE=1");
    env[ne++] = xstrdup("PYDEVD_DISABLE_FILE_VALIDATION=1");
    /* Its own box: uid 1000 of a user namespace, no capability, the
     * sandbox's seccomp filter but for setns(), which it needs to enter
     * the boxes nested in it (sb_sandbox_nest_in). */
    sb_sandbox_allow_setns(f->box);
    if (s_send_source(sv[0], o ? o->preload : NULL, err) < 0 ||
        s_send_drop_lib(sv[0], err) < 0)
        goto fail;
    sb_sandbox_set_stdin(f->box, sv[1]);
    int rc = sb_sandbox_spawn(f->box, argv, env, f->out_fd, f->out_fd, err);
    sb_sandbox_set_stdin(f->box, -1);
    if (rc) {
        err_prefix(err, "factory");
        goto fail;
    }
    close(sv[1]);
    sv[1] = -1;
    f->ctl = sv[0];
    sv[0] = -1;
    int64_t deadline =
        clock_mono_ms() + (o && o->timeout_ms > 0 ? o->timeout_ms : 120000);
    for (;;) {
        int left = (int)(deadline - clock_mono_ms());
        json_t *m = left > 0 ? s_recv(f, left, NULL) : NULL;
        if (m && json_is_true(json_object_get(m, "ready"))) {
            f->threads = (int)json_integer_value(json_object_get(m, "threads"));
            json_decref(m);
            /* Warm-ups yield the CPU to sessions in use (the factory has
             * one thread: checked before every fork). Its answers come
             * late on a busy machine, but nobody waits for them
             * (kb_factory_fork_result). */
            f->niced = s_can_renice() &&
                       setpriority(PRIO_PROCESS, (id_t)kb_factory_pid(f),
                                   FACTORY_NICE) == 0;
            break;
        }
        char tail[600];
        s_tail(f, tail, sizeof tail);
        const char *why = json_string_value(json_object_get(m, "error"));
        err_set(err, ERR_KERNEL, "factory: %s%s%s",
                why        ? why
                : left > 0 ? "it exited while starting"
                           : "not ready in time",
                tail[0] ? "\n" : "", tail);
        json_decref(m);
        goto fail;
    }
    for (int i = 0; argv[i]; i++)
        free(argv[i]);
    for (int i = 0; env[i]; i++)
        free(env[i]);
    return f;
fail:
    if (sv[0] >= 0)
        close(sv[0]);
    if (sv[1] >= 0)
        close(sv[1]);
    for (int i = 0; argv[i]; i++)
        free(argv[i]);
    for (int i = 0; env[i]; i++)
        free(env[i]);
    kb_factory_destroy(&f);
    return NULL;
}

void
kb_factory_destroy(kb_factory_t **pf)
{
    if (!pf || !*pf)
        return;
    kb_factory_t *f = *pf;
    sb_sandbox_destroy(&f->box);
    if (f->ctl >= 0)
        close(f->ctl);
    if (f->out_fd >= 0)
        close(f->out_fd);
    json_decref(f->exited);
    json_decref(f->host_pid);
    json_decref(f->answers);
    json_decref(f->forgotten);
    free(f);
    *pf = NULL;
}

pid_t
kb_factory_pid(const kb_factory_t *f)
{
    return sb_sandbox_pid(f->box);
}

sb_sandbox_t *
kb_factory_box(kb_factory_t *f)
{
    return f->box;
}

int
kb_factory_threads(const kb_factory_t *f)
{
    return f->threads;
}

static json_t *
s_env_json(char *const envp[])
{
    json_t *env = json_object();
    for (char *const *e = envp; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq)
            continue;
        char *k = strndup(*e, (size_t)(eq - *e));
        json_object_set_new(env, k, json_string(eq + 1));
        free(k);
    }
    return env;
}

int
kb_factory_fork_send(kb_factory_t *f, sb_sandbox_t *box, int ctl_fd, int out_fd,
                     const char *conn_path, char *const envp[],
                     unsigned long *ticket, err_t *err)
{
    /* Passed: ctl_fd, out_fd, the box's namespaces, its cgroups. */
    static const char *const ns[] = {"user", "mnt", "net",   "ipc",
                                     "uts",  "pid", "cgroup"};
    enum { N_NS = sizeof ns / sizeof ns[0] };
    int rc = -1, fds[2 + N_NS + 3] = {ctl_fd, out_fd};
    size_t nfds = 2;
    char *text = NULL;
    sb_seccomp_prog_t prog;
    if (sb_seccomp_build(&prog, err) < 0)
        return -1;
    json_t *filters = json_array();
    size_t bounds[3] = {0, prog.first_len, prog.len};
    for (int k = 0; k < 2; k++) {
        size_t nbytes = (bounds[k + 1] - bounds[k]) * 8;
        const unsigned char *at = (unsigned char *)prog.insns + bounds[k] * 8;
        char *hex = xmalloc(nbytes * 2 + 1);
        sodium_bin2hex(hex, nbytes * 2 + 1, at, nbytes);
        json_array_append_new(filters, json_string(hex));
        free(hex);
    }
    sb_seccomp_prog_release(&prog);
    /* The box's namespaces, opened here from its holder program: setns()
     * through a pidfd would need ptrace rights over the box's init, which
     * the factory has not (init is not dumpable); a namespace file needs
     * only the owner's capability in it. */
    pid_t holder = sb_sandbox_program_pid(box);
    for (size_t i = 0; i < N_NS; i++) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/ns/%s", (int)holder, ns[i]);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            err_errno(err, ERR_SANDBOX, "factory: opening %s", path);
            goto out;
        }
        fds[nfds++] = fd;
    }
    /* The box's cgroups, opened here: the kernel joins them by writing
     * "0" (itself) into these fds, with our rights as of the open, since
     * the factory's box sees no cgroup file of the host. */
    const char *ctls[] = {"memory", "pids", "cpu"};
    for (int i = 0; i < 3; i++) {
        const char *d = sb_sandbox_cgroup_dir(box, ctls[i]);
        bool dup = false;
        for (int j = 0; d && j < i; j++) {
            const char *e = sb_sandbox_cgroup_dir(box, ctls[j]);
            dup |= e && strcmp(d, e) == 0;
        }
        if (!d || dup)
            continue;
        char *procs = xasprintf("%s/cgroup.procs", d);
        int fd = open(procs, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
            err_errno(err, ERR_SANDBOX, "factory: opening %s", procs);
        free(procs);
        if (fd < 0)
            goto out;
        fds[nfds++] = fd;
    }
    const sb_policy_t *pol = sb_sandbox_policy(box);
    json_t *rl = json_pack("{s:I, s:I, s:I, s:I}", "RLIMIT_NOFILE",
                           (json_int_t)pol->nofile, "RLIMIT_FSIZE",
                           (json_int_t)sb_policy_fsize(pol), "RLIMIT_NPROC",
                           (json_int_t)pol->pids, "RLIMIT_CORE", (json_int_t)0);
    if (!sb_sandbox_cgroup_dir(box, "memory"))
        json_object_set_new(rl, "RLIMIT_DATA",
                            json_integer((json_int_t)pol->memory_bytes));
    sb_landlock_plan_t *ll = xmalloc(sizeof *ll);
    /* The run dir's parent: the run dir (a read-only mount) and the socket
     * dir the kernel binds in (sb_sandbox_sock_dir). */
    char *top = xstrdup(sb_sandbox_sock_dir(box));
    *strrchr(top, '/') = '\0';
    sb_landlock_plan_box(ll, sb_landlock_abi(), pol, top);
    free(top);
    json_t *landlock = sb_landlock_plan_json(ll);
    free(ll);
    json_t *req = json_pack("{s:s, s:s, s:o, s:o, s:i, s:o, s:o}", "op", "fork",
                            "connection_file", conn_path, "env",
                            s_env_json(envp), "rlimits", rl, "n_ns", (int)N_NS,
                            "seccomp", filters, "landlock", landlock);
    filters = NULL; /* stolen by the request */
    text = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    struct iovec iov = {.iov_base = text, .iov_len = strlen(text)};
    union {
        char buf[CMSG_SPACE(sizeof fds)];
        struct cmsghdr align;
    } cm;
    memset(&cm, 0, sizeof cm);
    struct msghdr mh = {.msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = cm.buf,
                        .msg_controllen = CMSG_SPACE(nfds * sizeof(int))};
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
    memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
    if (sendmsg(f->ctl, &mh, MSG_NOSIGNAL) < 0) {
        err_errno(err, ERR_SANDBOX, "factory: not reachable");
        goto out;
    }
    *ticket = ++f->sent;
    rc = 0;
out:
    for (size_t i = 2; i < nfds; i++)
        close(fds[i]);
    free(text);
    json_decref(filters);
    return rc;
}

/* A fork answer `m` (with the pidfd `kfd` it carried, or -1): the next
 * ticket's, kept until collected (dropped when forgotten). */
static void
s_note_answer(kb_factory_t *f, json_t *m, int kfd)
{
    char key[24];
    snprintf(key, sizeof key, "%lu", ++f->answered);
    /* The kernel's pid as the factory's box sees it, and a pidfd of it
     * that tells us its host pid. */
    pid_t host = kfd >= 0 ? sb_pidfd_pid(kfd) : -1;
    json_int_t inbox = json_integer_value(json_object_get(m, "pid"));
    json_t *v;
    if (json_is_true(json_object_get(m, "ok")) && host > 0) {
        char in[24];
        snprintf(in, sizeof in, "%lld", (long long)inbox);
        json_object_set_new(f->host_pid, in, json_integer(host));
        v = json_integer(host);
    } else {
        const char *why = json_string_value(json_object_get(m, "error"));
        v = json_string(why ? why : "failed (no pid)");
    }
    if (json_object_get(f->forgotten, key)) {
        json_object_del(f->forgotten, key);
        json_decref(v); /* its box is gone, and the kernel with it */
    } else {
        json_object_set_new(f->answers, key, v);
    }
}

/* Take in whatever the factory said, waiting up to timeout_ms for the
 * first message. */
static void
s_drain(kb_factory_t *f, int timeout_ms)
{
    json_t *m;
    int kfd = -1;
    while ((m = s_recv(f, timeout_ms, &kfd))) {
        if (!s_note_exit(f, m))
            s_note_answer(f, m, kfd);
        if (kfd >= 0)
            close(kfd);
        json_decref(m);
        timeout_ms = 0;
    }
}

int
kb_factory_fork_result(kb_factory_t *f, unsigned long ticket, pid_t *pid,
                       err_t *err)
{
    char key[24];
    snprintf(key, sizeof key, "%lu", ticket);
    if (!json_object_get(f->answers, key))
        s_drain(f, 0);
    json_t *v = json_object_get(f->answers, key);
    if (!v)
        return 0;
    int rc = 1;
    if (json_is_integer(v))
        *pid = (pid_t)json_integer_value(v);
    else
        rc = err_set(err, ERR_SANDBOX, "factory: forked kernel: %s",
                     json_string_value(v));
    json_object_del(f->answers, key);
    return rc;
}

void
kb_factory_fork_forget(kb_factory_t *f, unsigned long ticket)
{
    if (!f || !ticket)
        return;
    char key[24];
    snprintf(key, sizeof key, "%lu", ticket);
    if (json_object_get(f->answers, key))
        json_object_del(f->answers, key);
    else if (ticket > f->answered)
        json_object_set_new(f->forgotten, key, json_true());
}

int
kb_factory_ctl_fd(const kb_factory_t *f)
{
    return f->ctl;
}

int
kb_factory_exit_status(kb_factory_t *f, pid_t pid, int *status)
{
    s_drain(f, 0);
    char key[24];
    snprintf(key, sizeof key, "%d", (int)pid);
    json_t *st = json_object_get(f->exited, key);
    if (!json_is_integer(st))
        return 0;
    *status = (int)json_integer_value(st);
    return 1;
}
