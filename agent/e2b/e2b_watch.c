#include "agent/e2b/e2b_watch.h"
#include "agent/e2b/e2b_watch_impl.h"

#include "agent/e2b/e2b_connect.h"
#include "agent/e2b/e2b_path.h"
#include "common/clock.h"
#include "common/xalloc.h"
#include "sandbox/sb_files_ws.h"

#include <errno.h>
#include <fcntl.h>
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

struct e2b_wcore {
    e2b_sandbox_t *sb; /* borrowed */
    int ifd;           /* owned inotify fd */
    char *top;         /* owned: the watched directory, workspace-relative */
    bool recursive, include_entry;
    s_dir_t *dirs; /* owned */
    size_t ndirs;
    atomic_int *places; /* the sandbox's watch count we hold one of */
    const char *lost;   /* static: events were lost (the next read says) */
    size_t scan_left;   /* names new directories may still report in this
                           read (E2B_WATCH_MAX_DIRS each read) */
};

void
e2b_wcore_destroy(e2b_wcore_t **cp)
{
    e2b_wcore_t *c = *cp;
    if (!c)
        return;
    *cp = NULL;
    for (size_t i = 0; i < c->ndirs; i++)
        free(c->dirs[i].rel);
    free(c->dirs);
    if (c->ifd >= 0)
        close(c->ifd);
    free(c->top);
    if (c->places)
        atomic_fetch_sub(c->places, 1);
    free(c);
}

int
e2b_wcore_fd(const e2b_wcore_t *c)
{
    return c->ifd;
}

static char *
s_join(const char *a, const char *b)
{
    return *a ? xasprintf("%s/%s", a, b) : xstrdup(b);
}

/* Watch directory `rel` (below top) through a pinned fd. Call between
 * e2b_sandbox_enter and _leave. 0, or -1 with err. */
static int
s_add(e2b_wcore_t *c, int ws, const char *rel, err_t *err)
{
    if (c->ndirs >= E2B_WATCH_MAX_DIRS)
        return err_set(err, ERR_USAGE,
                       "the watch covers %d directories, the most one "
                       "watch may; watch a smaller tree",
                       E2B_WATCH_MAX_DIRS);
    char *path = s_join(c->top, rel);
    int fd;
    if (*path)
        fd = sb_ws_open_dir(ws, path, err);
    else if ((fd = fcntl(ws, F_DUPFD_CLOEXEC, 0)) < 0) /* the workspace */
        err_errno(err, ERR_IO, "cannot watch the workspace");
    free(path);
    if (fd < 0)
        return -1;
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    int wd = inotify_add_watch(c->ifd, proc, WATCH_MASK);
    close(fd);
    if (wd < 0)
        return err_errno(err, ERR_IO, "cannot watch '%s'", *rel ? rel : ".");
    for (size_t i = 0; i < c->ndirs; i++)
        if (c->dirs[i].wd == wd)
            return 0; /* the same directory again (a rename back) */
    c->dirs = xrealloc(c->dirs, (c->ndirs + 1) * sizeof *c->dirs);
    c->dirs[c->ndirs++] = (s_dir_t){.wd = wd, .rel = xstrdup(rel)};
    return 0;
}

static json_t *s_event(e2b_wcore_t *c, const char *name, const char *type);

#define S_LOST_SCAN                                                            \
    "new directories held more names than one read reports before their "      \
    "watches were added: events were lost; watch again"

/* What a new directory already holds, reported as created. */
typedef struct s_emitter {
    void (*fn)(void *ctx, const json_t *fe);
    void *ctx;
} s_emitter_t;

/* The directories below top, depth first, for a recursive watch. With
 * `em` (a directory that appeared while watched), every name found in it
 * is reported as CREATE: it may have been made before its watch was. */
static int
s_add_tree(e2b_wcore_t *c, int ws, const char *rel, const s_emitter_t *em,
           err_t *err)
{
    if (s_add(c, ws, rel, err) < 0)
        return -1;
    char *path = s_join(c->top, rel);
    sb_ws_entry_t *v = NULL;
    size_t n = 0;
    int rc = sb_ws_list(ws, path, 1, E2B_WATCH_MAX_DIRS, &v, &n, err);
    free(path);
    if (rc == -E2BIG && em) {
        /* What it held is reported as far as it was listed, and the loss
         * of the rest at the next read. */
        c->lost = S_LOST_SCAN;
        rc = 0;
    }
    if (rc < 0) {
        sb_ws_entries_free(v, n);
        return -1;
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        char *sub = s_join(rel, v[i].name);
        if (em && c->scan_left == 0) {
            c->lost = S_LOST_SCAN;
        } else if (em) {
            c->scan_left--;
            json_t *fe = s_event(c, sub, "EVENT_TYPE_CREATE");
            em->fn(em->ctx, fe);
            json_decref(fe);
        }
        if (S_ISDIR(v[i].st.st_mode))
            rc = s_add_tree(c, ws, sub, em, err);
        free(sub);
    }
    sb_ws_entries_free(v, n);
    return rc;
}

e2b_wcore_t *
e2b_wcore_new(e2b_sandbox_t *sb, const json_t *msg, const char **code,
              err_t *err)
{
    e2b_wcore_t *c = xcalloc(1, sizeof *c);
    c->sb = sb;
    c->ifd = -1;
    c->recursive = json_is_true(json_object_get(msg, "recursive"));
    c->include_entry = json_is_true(json_object_get(msg, "includeEntry"));
    c->top = e2b_path_rel(json_string_value(json_object_get(msg, "path")), err);
    if (!c->top) {
        *code = "permission_denied";
        goto fail;
    }
    c->places = e2b_watch_take(sb);
    if (!c->places) {
        *code = "resource_exhausted";
        err_set(err, ERR_USAGE,
                "the sandbox has %d watches open, the most it may; stop or "
                "remove one first",
                E2B_WATCHERS_MAX);
        goto fail;
    }
    c->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (c->ifd < 0) {
        *code = "resource_exhausted";
        err_errno(err, ERR_IO, "cannot watch: inotify_init1");
        goto fail;
    }
    if (!e2b_sandbox_enter(sb)) {
        *code = "unavailable";
        err_set(err, ERR_IO, "the sandbox ended");
        goto fail;
    }
    int ws = e2b_sandbox_workspace_fd(sb);
    int rc =
        c->recursive ? s_add_tree(c, ws, "", NULL, err) : s_add(c, ws, "", err);
    e2b_sandbox_leave(sb);
    if (rc == 0)
        return c;
    /* envd answers a missing or non-directory path as not found. */
    *code = err->code == ERR_USAGE ? "invalid_argument" : "not_found";
fail:
    e2b_wcore_destroy(&c);
    return NULL;
}

static const s_dir_t *
s_dir(const e2b_wcore_t *c, int wd)
{
    for (size_t i = 0; i < c->ndirs; i++)
        if (c->dirs[i].wd == wd)
            return &c->dirs[i];
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

static json_t *
s_event(e2b_wcore_t *c, const char *name, const char *type)
{
    json_t *fe = json_pack("{s:s,s:s}", "name", name, "type", type);
    if (c->include_entry && strcmp(type, "EVENT_TYPE_REMOVE") != 0 &&
        strcmp(type, "EVENT_TYPE_RENAME") != 0 && e2b_sandbox_enter(c->sb)) {
        sb_ws_entry_t e = {0};
        err_t err = {0};
        char *path = s_join(c->top, name);
        if (sb_ws_stat(e2b_sandbox_workspace_fd(c->sb), path, &e, &err) == 0)
            json_object_set_new(fe, "entry", e2b_path_entry_json(&e));
        sb_ws_entry_release(&e);
        free(path);
        e2b_sandbox_leave(c->sb);
    }
    return fe;
}

int
e2b_wcore_read(e2b_wcore_t *c, void (*emit)(void *ctx, const json_t *fe),
               void *ctx, const char **why)
{
    if (c->lost) {
        *why = c->lost;
        return -1;
    }
    c->scan_left = E2B_WATCH_MAX_DIRS;
    _Alignas(struct inotify_event) char buf[16384];
    ssize_t n = read(c->ifd, buf, sizeof buf);
    if (n < 0) {
        if (errno == EAGAIN || errno == EINTR)
            return 0;
        *why = "the watch failed";
        return -1;
    }
    for (char *p = buf; p < buf + n;) {
        const struct inotify_event *ev = (const struct inotify_event *)p;
        p += sizeof *ev + ev->len;
        if (ev->mask & IN_Q_OVERFLOW) {
            *why = "too many changes at once: events were lost; watch again";
            return -1;
        }
        const s_dir_t *d = s_dir(c, ev->wd);
        if (!d)
            continue;
        if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF)) {
            if (!*d->rel) {
                *why = "the watched directory was removed or moved";
                return -1;
            }
            continue; /* a subdirectory: its parent reports the name */
        }
        const char *type = s_type(ev->mask);
        if (!type || !ev->len)
            continue;
        char *name = s_join(d->rel, ev->name);
        json_t *fe = s_event(c, name, type);
        emit(ctx, fe);
        json_decref(fe);
        if (c->recursive && (ev->mask & IN_ISDIR) &&
            (ev->mask & (IN_CREATE | IN_MOVED_TO)) &&
            e2b_sandbox_enter(c->sb)) {
            err_t err = {0};
            /* A directory that cannot be watched (a symlink put there, the
             * cap) leaves the rest of the watch as it was. */
            s_emitter_t em = {.fn = emit, .ctx = ctx};
            s_add_tree(c, e2b_sandbox_workspace_fd(c->sb), name, &em, &err);
            e2b_sandbox_leave(c->sb);
        }
        free(name);
    }
    return 1;
}

/* ---- the streamed WatchDir --------------------------------------------- */

typedef struct s_watch {
    e2b_sandbox_t *sb;     /* borrowed through entry */
    ag_reg_entry_t *entry; /* a reference of our own */
    e2b_stream_t *st;      /* the producer's reference */
    e2b_wcore_t *core;     /* owned */
    int keepalive_ms;      /* the client's ping interval, or 0 */
} s_watch_t;

static void
s_watch_free(s_watch_t *w)
{
    e2b_wcore_destroy(&w->core);
    ag_reg_unref(&w->entry);
    free(w);
}

static void
s_emit(void *ctx, const json_t *fe)
{
    s_watch_t *w = ctx;
    json_t *msg = json_pack("{s:O}", "filesystem", fe);
    e2b_connect_stream_send(w->st, msg);
    json_decref(msg);
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
        struct pollfd pf = {.fd = e2b_wcore_fd(w->core), .events = POLLIN};
        if (poll(&pf, 1, SLICE_MS) > 0)
            e2b_wcore_read(w->core, s_emit, w, &why);
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
    const char *code = NULL;
    e2b_wcore_t *core = e2b_wcore_new(sb, msg, &code, &err);
    json_decref(msg);
    if (!core) {
        e2b_connect_error(r, code, "%s", err.text);
        return;
    }
    s_watch_t *w = xcalloc(1, sizeof *w);
    w->sb = sb;
    w->core = core;
    const char *ka = e2b_req_header(r, "Keepalive-Ping-Interval");
    int secs = ka ? atoi(ka) : 0;
    w->keepalive_ms = secs > 0 && secs <= 3600 ? secs * 1000 : 0;
    /* The thread outlives the request: it holds the entry (the caller's
     * reference keeps it alive until here). */
    w->entry = ag_reg_ref(e2b_sandbox_entry(sb));
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
