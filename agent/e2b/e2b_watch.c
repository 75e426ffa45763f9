#include "agent/e2b/e2b_watch.h"

#include "agent/e2b/e2b_connect.h"
#include "agent/e2b/e2b_path.h"
#include "common/clock.h"
#include "common/xalloc.h"
#include "sandbox/sb_files_ws.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

/* How long one wait for events lasts before the thread looks at the
 * client, the sandbox and the keepalive again. */
#define SLICE_MS 250
/* A directory's own changes, and the names in it. */
#define WATCH_MASK                                                             \
    (IN_CREATE | IN_MOVED_TO | IN_MODIFY | IN_DELETE | IN_MOVED_FROM |         \
     IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK)

typedef struct s_dir {
    int wd;
    char *rel; /* owned: relative to the watched directory ("" = it) */
} s_dir_t;

typedef struct s_watch {
    e2b_sandbox_t *sb;     /* borrowed through entry */
    ag_reg_entry_t *entry; /* a reference of our own */
    e2b_stream_t *st;      /* the producer's reference */
    int ifd;               /* owned inotify fd */
    char *top; /* owned: the watched directory, workspace-relative */
    bool recursive, include_entry;
    int keepalive_ms; /* the client's ping interval, or 0 */
    s_dir_t *dirs;    /* owned */
    size_t ndirs;
} s_watch_t;

static void
s_watch_free(s_watch_t *w)
{
    for (size_t i = 0; i < w->ndirs; i++)
        free(w->dirs[i].rel);
    free(w->dirs);
    if (w->ifd >= 0)
        close(w->ifd);
    free(w->top);
    ag_reg_unref(&w->entry);
    free(w);
}

static char *
s_join(const char *a, const char *b)
{
    return *a ? xasprintf("%s/%s", a, b) : xstrdup(b);
}

/* Watch directory `rel` (below top) through a pinned fd. Call between
 * e2b_sandbox_enter and _leave. 0, or -1 with err. */
static int
s_add(s_watch_t *w, int ws, const char *rel, err_t *err)
{
    if (w->ndirs >= E2B_WATCH_MAX_DIRS)
        return err_set(err, ERR_USAGE,
                       "the watch covers %d directories, the most one "
                       "watch may; watch a smaller tree",
                       E2B_WATCH_MAX_DIRS);
    char *path = s_join(w->top, rel);
    int fd = sb_ws_open_dir(ws, path, err);
    free(path);
    if (fd < 0)
        return -1;
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    int wd = inotify_add_watch(w->ifd, proc, WATCH_MASK);
    close(fd);
    if (wd < 0)
        return err_errno(err, ERR_IO, "cannot watch '%s'", *rel ? rel : ".");
    for (size_t i = 0; i < w->ndirs; i++)
        if (w->dirs[i].wd == wd)
            return 0; /* the same directory again (a rename back) */
    w->dirs = xrealloc(w->dirs, (w->ndirs + 1) * sizeof *w->dirs);
    w->dirs[w->ndirs++] = (s_dir_t){.wd = wd, .rel = xstrdup(rel)};
    return 0;
}

/* The directories below top, depth first, for a recursive watch. */
static int
s_add_tree(s_watch_t *w, int ws, const char *rel, err_t *err)
{
    if (s_add(w, ws, rel, err) < 0)
        return -1;
    char *path = s_join(w->top, rel);
    sb_ws_entry_t *v = NULL;
    size_t n = 0;
    int rc = sb_ws_list(ws, path, 1, E2B_WATCH_MAX_DIRS, &v, &n, err);
    free(path);
    if (rc < 0)
        return -1;
    for (size_t i = 0; i < n && rc == 0; i++)
        if (S_ISDIR(v[i].st.st_mode)) {
            char *sub = s_join(rel, v[i].name);
            rc = s_add_tree(w, ws, sub, err);
            free(sub);
        }
    for (size_t i = 0; i < n; i++)
        sb_ws_entry_release(&v[i]);
    free(v);
    return rc;
}

static const s_dir_t *
s_dir(const s_watch_t *w, int wd)
{
    for (size_t i = 0; i < w->ndirs; i++)
        if (w->dirs[i].wd == wd)
            return &w->dirs[i];
    return NULL;
}

/* envd's names for what inotify saw (fsnotify's mapping). */
static const char *
s_type(uint32_t mask)
{
    if (mask & (IN_CREATE | IN_MOVED_TO))
        return "EVENT_TYPE_CREATE";
    if (mask & IN_MODIFY)
        return "EVENT_TYPE_WRITE";
    if (mask & IN_DELETE)
        return "EVENT_TYPE_REMOVE";
    if (mask & IN_MOVED_FROM)
        return "EVENT_TYPE_RENAME";
    if (mask & IN_ATTRIB)
        return "EVENT_TYPE_CHMOD";
    return NULL;
}

static void
s_send(s_watch_t *w, const char *name, const char *type)
{
    json_t *fe = json_pack("{s:s,s:s}", "name", name, "type", type);
    if (w->include_entry && strcmp(type, "EVENT_TYPE_REMOVE") != 0 &&
        strcmp(type, "EVENT_TYPE_RENAME") != 0 && e2b_sandbox_enter(w->sb)) {
        sb_ws_entry_t e = {0};
        err_t err = {0};
        char *path = s_join(w->top, name);
        if (sb_ws_stat(e2b_sandbox_workspace_fd(w->sb), path, &e, &err) == 0)
            json_object_set_new(fe, "entry", e2b_path_entry_json(&e));
        sb_ws_entry_release(&e);
        free(path);
        e2b_sandbox_leave(w->sb);
    }
    json_t *msg = json_pack("{s:o}", "filesystem", fe);
    e2b_connect_stream_send(w->st, msg);
    json_decref(msg);
}

/* Read and forward what inotify has. NULL, or why the stream ends. */
static const char *
s_drain(s_watch_t *w)
{
    _Alignas(struct inotify_event) char buf[16384];
    ssize_t n = read(w->ifd, buf, sizeof buf);
    if (n < 0)
        return errno == EAGAIN || errno == EINTR ? NULL : "the watch failed";
    for (char *p = buf; p < buf + n;) {
        const struct inotify_event *ev = (const struct inotify_event *)p;
        p += sizeof *ev + ev->len;
        if (ev->mask & IN_Q_OVERFLOW)
            return "too many changes at once: events were lost; watch again";
        const s_dir_t *d = s_dir(w, ev->wd);
        if (!d)
            continue;
        if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF)) {
            if (!*d->rel)
                return "the watched directory was removed or moved";
            continue; /* a subdirectory: its parent reports the name */
        }
        const char *type = s_type(ev->mask);
        if (!type || !ev->len)
            continue;
        char *name = s_join(d->rel, ev->name);
        s_send(w, name, type);
        if (w->recursive && (ev->mask & IN_ISDIR) &&
            (ev->mask & (IN_CREATE | IN_MOVED_TO)) &&
            e2b_sandbox_enter(w->sb)) {
            err_t err = {0};
            /* A directory that cannot be watched (a symlink put there, the
             * cap) leaves the rest of the watch as it was. */
            s_add_tree(w, e2b_sandbox_workspace_fd(w->sb), name, &err);
            e2b_sandbox_leave(w->sb);
        }
        free(name);
    }
    return NULL;
}

static void *
s_watch_thread(void *arg)
{
    s_watch_t *w = arg;
    int64_t last = clock_mono_ms();
    const char *why = NULL;
    while (!why) {
        if (e2b_stream_gone(w->st))
            break; /* the client left */
        if (e2b_sandbox_ending(w->sb)) {
            why = "the sandbox ended";
            break;
        }
        struct pollfd pf = {.fd = w->ifd, .events = POLLIN};
        int r = poll(&pf, 1, SLICE_MS);
        if (r > 0)
            why = s_drain(w);
        if (w->keepalive_ms > 0 && clock_mono_ms() - last >= w->keepalive_ms) {
            json_t *ka = json_pack("{s:{}}", "keepalive");
            e2b_connect_stream_send(w->st, ka);
            json_decref(ka);
            last = clock_mono_ms();
        }
    }
    e2b_connect_stream_end(&w->st, why ? "unavailable" : NULL, why);
    s_watch_free(w);
    return NULL;
}

void
e2b_watch_dir(e2b_req_t *r, e2b_sandbox_t *sb)
{
    json_t *msg = e2b_connect_request(r);
    if (!msg)
        return;
    err_t err = {0};
    s_watch_t *w = xcalloc(1, sizeof *w);
    w->sb = sb;
    w->ifd = -1;
    w->recursive = json_is_true(json_object_get(msg, "recursive"));
    w->include_entry = json_is_true(json_object_get(msg, "includeEntry"));
    const char *ka = e2b_req_header(r, "Keepalive-Ping-Interval");
    int secs = ka ? atoi(ka) : 0;
    w->keepalive_ms = secs > 0 && secs <= 3600 ? secs * 1000 : 0;
    w->top =
        e2b_path_rel(json_string_value(json_object_get(msg, "path")), &err);
    json_decref(msg);
    if (!w->top) {
        e2b_connect_error(r, "permission_denied", "%s", err.text);
        s_watch_free(w);
        return;
    }
    w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (w->ifd < 0) {
        e2b_connect_error(r, "resource_exhausted",
                          "cannot watch: inotify_init1: %s", strerror(errno));
        s_watch_free(w);
        return;
    }
    if (!e2b_sandbox_enter(sb)) {
        e2b_connect_error(r, "unavailable", "the sandbox ended");
        s_watch_free(w);
        return;
    }
    w->entry = ag_reg_ref(e2b_sandbox_entry(sb));
    int ws = e2b_sandbox_workspace_fd(sb);
    int rc =
        w->recursive ? s_add_tree(w, ws, "", &err) : s_add(w, ws, "", &err);
    e2b_sandbox_leave(sb);
    if (rc < 0) {
        /* envd answers a missing or non-directory path as not found. */
        e2b_connect_error(
            r, err.code == ERR_USAGE ? "invalid_argument" : "not_found", "%s",
            err.text);
        s_watch_free(w);
        return;
    }
    w->st = e2b_connect_stream_open(r);
    if (!w->st) {
        s_watch_free(w);
        return;
    }
    json_t *start = json_pack("{s:{}}", "start");
    e2b_connect_stream_send(w->st, start);
    json_decref(start);
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    if (pthread_create(&t, &at, s_watch_thread, w) != 0) {
        e2b_connect_stream_end(&w->st, "resource_exhausted",
                               "cannot start a thread for the watch");
        s_watch_free(w);
    }
    pthread_attr_destroy(&at);
}
