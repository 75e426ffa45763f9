/*
 * sb_seccomp_audit: the --seccomp-audit listener. Each box's filter sends
 * the calls the table does not allow to a user-notification fd; a thread
 * per fd counts them by number and lets them continue, and the report
 * names them, so a trace of a real workload says which rows the table
 * lacks. The table and its compiler are in sb_seccomp.c.
 */
#include "sandbox/sb_seccomp.h"

#include "common/buf.h"
#include "common/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define S_MAX_NR 1024
#define S_MAX_LISTENERS 16

struct sb_seccomp_audit {
    pthread_mutex_t lock;           /* guards counts */
    unsigned long counts[S_MAX_NR]; /* calls per system call number */
    unsigned long other;            /* calls numbered >= S_MAX_NR */
    int stop[2]; /* owned pipe: write end wakes the threads */
    pthread_t threads[S_MAX_LISTENERS]; /* one per listener */
    int fds[S_MAX_LISTENERS];           /* owned listener fds */
    size_t n;                           /* threads running */
};

struct s_watch {
    sb_seccomp_audit_t *a; /* borrowed */
    int fd;                /* borrowed listener */
};

static void *
s_audit_thread(void *arg)
{
    struct s_watch w = *(struct s_watch *)arg;
    free(arg);
    struct seccomp_notif *req = NULL;
    struct seccomp_notif_resp *resp = NULL;
    if (seccomp_notify_alloc(&req, &resp) < 0)
        return NULL;
    for (;;) {
        struct pollfd pf[2] = {{.fd = w.fd, .events = POLLIN},
                               {.fd = w.a->stop[0], .events = POLLIN}};
        if (poll(pf, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (pf[1].revents)
            break;
        if (pf[0].revents & (POLLHUP | POLLERR | POLLNVAL))
            break; /* every process with the filter is gone */
        if (!(pf[0].revents & POLLIN))
            continue;
        memset(req, 0, sizeof *req);
        if (seccomp_notify_receive(w.fd, req) < 0)
            continue; /* the caller died meanwhile */
        pthread_mutex_lock(&w.a->lock);
        if (req->data.nr >= 0 && req->data.nr < S_MAX_NR)
            w.a->counts[req->data.nr]++;
        else
            w.a->other++;
        pthread_mutex_unlock(&w.a->lock);
        memset(resp, 0, sizeof *resp);
        resp->id = req->id;
        resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
        seccomp_notify_respond(w.fd, resp); /* ENOENT: the caller died */
    }
    seccomp_notify_free(req, resp);
    return NULL;
}

sb_seccomp_audit_t *
sb_seccomp_audit_new(err_t *err)
{
    sb_seccomp_audit_t *a = xcalloc(1, sizeof *a);
    pthread_mutex_init(&a->lock, NULL);
    if (pipe2(a->stop, O_CLOEXEC) < 0) {
        err_errno(err, ERR_SANDBOX, "seccomp audit: pipe");
        pthread_mutex_destroy(&a->lock);
        free(a);
        return NULL;
    }
    return a;
}

int
sb_seccomp_audit_watch(sb_seccomp_audit_t *a, int listener_fd, err_t *err)
{
    if (a->n == S_MAX_LISTENERS) {
        close(listener_fd);
        return err_set(err, ERR_SANDBOX,
                       "seccomp audit: more than %d boxes in one audit",
                       S_MAX_LISTENERS);
    }
    struct s_watch *w = xmalloc(sizeof *w);
    w->a = a;
    w->fd = listener_fd;
    int rc = pthread_create(&a->threads[a->n], NULL, s_audit_thread, w);
    if (rc != 0) {
        free(w);
        close(listener_fd);
        return err_errnum(err, ERR_SANDBOX, rc, "seccomp audit: thread");
    }
    a->fds[a->n++] = listener_fd;
    return 0;
}

char *
sb_seccomp_audit_report(sb_seccomp_audit_t *a)
{
    buf_t b;
    buf_init(&b, 1 << 16);
    pthread_mutex_lock(&a->lock);
    for (int nr = 0; nr < S_MAX_NR; nr++) {
        if (!a->counts[nr])
            continue;
        char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
        buf_printf(&b, "%s%s (#%d, %lu call%s)", b.len ? ", " : "",
                   name ? name : "?", nr, a->counts[nr],
                   a->counts[nr] == 1 ? "" : "s");
        free(name);
    }
    if (a->other)
        buf_printf(&b, "%sunknown numbers (%lu calls)", b.len ? ", " : "",
                   a->other);
    pthread_mutex_unlock(&a->lock);
    char *out = b.len ? xstrdup(buf_cstr(&b)) : NULL;
    buf_release(&b);
    return out;
}

void
sb_seccomp_audit_destroy(sb_seccomp_audit_t **pa)
{
    if (!pa || !*pa)
        return;
    sb_seccomp_audit_t *a = *pa;
    *pa = NULL;
    if (write(a->stop[1], "x", 1) < 0) { /* the threads also end on HUP */
    }
    for (size_t i = 0; i < a->n; i++) {
        pthread_join(a->threads[i], NULL);
        close(a->fds[i]);
    }
    close(a->stop[0]);
    close(a->stop[1]);
    pthread_mutex_destroy(&a->lock);
    free(a);
}
