/*
 * e2b_watch: filesystem.Filesystem/WatchDir, envd's directory watch, over
 * the sandbox's workspace: a server stream that starts with {"start": {}}
 * and then carries one {"filesystem": {"name", "type"[, "entry"]}} per
 * change (names relative to the watched directory; types as envd's
 * fsnotify gives them: CREATE for a new or moved-in name, WRITE, REMOVE,
 * RENAME for a moved-out name, CHMOD), with {"keepalive": {}} at the
 * client's Keepalive-Ping-Interval. inotify on the host watches each
 * directory through the fd sb_ws_open_dir gave (so a symlink in the box
 * never points a watch elsewhere); `recursive` adds the directories
 * below, and those created later, up to E2B_WATCH_MAX_DIRS. The stream
 * ends when the client leaves, the sandbox ends or the watched directory
 * is removed.
 *
 * The polling watchers (CreateWatcher -> {watcherId}, GetWatcherEvents ->
 * {events: [...]} drained since the last call, RemoveWatcher) watch the
 * same way without a stream (e2b_watch_poll.c); they live on the sandbox
 * and go when it pauses or ends. Streams and watchers together: at most
 * E2B_WATCHERS_MAX per sandbox.
 */
#ifndef AGENT_E2B_E2B_WATCH_H
#define AGENT_E2B_E2B_WATCH_H

#include "agent/e2b/e2b_http.h"
#include "agent/e2b/e2b_sandbox.h"

/* Directories one watch may cover (recursive): more is an error event. */
#define E2B_WATCH_MAX_DIRS 1024

/* Watches (streams and polling watchers) one sandbox may have open. */
#define E2B_WATCHERS_MAX 8
/* Events one GetWatcherEvents answers at most (plus the rest of one read:
 * 16 KiB of inotify's queue and what new directories held, at most 2048
 * events); the rest waits for the next call. */
#define E2B_WATCHER_MAX_EVENTS 4096

/* Answer a WatchDir call (the request body is its WatchDirRequest). */
void e2b_watch_dir(e2b_req_t *r, e2b_sandbox_t *sb);
/* Answer `method` when it is CreateWatcher, GetWatcherEvents or
 * RemoveWatcher (true); false for any other method (nothing answered). */
bool e2b_watch_rpc(e2b_req_t *r, e2b_sandbox_t *sb, const char *method);

#endif
