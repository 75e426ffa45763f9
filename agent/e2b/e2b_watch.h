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
 */
#ifndef AGENT_E2B_E2B_WATCH_H
#define AGENT_E2B_E2B_WATCH_H

#include "agent/e2b/e2b_http.h"
#include "agent/e2b/e2b_sandbox.h"

/* Directories one watch may cover (recursive): more is an error event. */
#define E2B_WATCH_MAX_DIRS 1024

/* Answer a WatchDir call (the request body is its WatchDirRequest). */
void e2b_watch_dir(e2b_req_t *r, e2b_sandbox_t *sb);

#endif
