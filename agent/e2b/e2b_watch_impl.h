/*
 * e2b_watch_impl: the inotify core shared by the streamed WatchDir
 * (e2b_watch.c) and the polling watchers (e2b_watch_poll.c). A core
 * watches one directory of a sandbox's workspace (and, recursive, the
 * ones below it, up to E2B_WATCH_MAX_DIRS) and turns what inotify has
 * queued into envd's FilesystemEvent messages when asked: it has no
 * thread of its own, so what nobody reads waits in the kernel's queue
 * (fs.inotify.max_queued_events); past it the core reports the loss.
 */
#ifndef AGENT_E2B_E2B_WATCH_IMPL_H
#define AGENT_E2B_E2B_WATCH_IMPL_H

#include "agent/e2b/e2b_sandbox.h"
#include "common/err.h"

#include <jansson.h>
#include <stdatomic.h>

typedef struct e2b_wcore e2b_wcore_t;

/* One of the sandbox's E2B_WATCHERS_MAX watch places: its counter (the
 * holder decrements it when done), or NULL when all are taken. */
atomic_int *e2b_watch_take(e2b_sandbox_t *sb);

/* A core (it takes a watch place) for the request `msg` (a WatchDirRequest or
 * CreateWatcherRequest: path, recursive, includeEntry; borrowed) on `sb`
 * (borrowed: the caller keeps the sandbox alive while the core lives). NULL
 * with *code (the Connect error code) and err. */
e2b_wcore_t *e2b_wcore_new(e2b_sandbox_t *sb, const json_t *msg,
                           const char **code, err_t *err);
void e2b_wcore_destroy(e2b_wcore_t **c);
/* The inotify fd, for poll(2) (borrowed). */
int e2b_wcore_fd(const e2b_wcore_t *c);

/* Read once what inotify has queued (at most 16 KiB of it, never
 * blocking; with what new directories already held, at most 2048
 * events) and call emit(ctx, fe) with each FilesystemEvent (fe
 * borrowed: {"name", "type"[, "entry"]}). 1 something was read, 0
 * nothing was queued, -1 the watch is over (*why says why: the watched
 * directory went, events were lost). */
int e2b_wcore_read(e2b_wcore_t *c, void (*emit)(void *ctx, const json_t *fe),
                   void *ctx, const char **why);

#endif
