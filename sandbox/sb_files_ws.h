/*
 * sb_files_ws: a live box's workspace seen from the host as a small file
 * system, for servers that give clients one (the E2B door's files and
 * filesystem RPC), under sandbox/sb_files.h's rules:
 *
 * - every path is a relative path that sb_files_check_relpath accepts
 *   ("" is the top), reached from the workspace's directory fd with
 *   openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS
 *   | RESOLVE_NO_XDEV): a symlink anywhere on the way is refused, never
 *   followed; a symlink as the last component is reported (stat, list)
 *   or replaced/removed as a name (write, move, remove), never followed;
 * - reads are of regular files only (a FIFO cannot block us);
 * - what is created is created as `owner`/`group`, the box's user (the
 *   calling thread's fsuid and fsgid are switched meanwhile), so the box
 *   sees its own files and the host's privileges play no part;
 * - writes land in a temporary dot-file of the target's directory and
 *   are renamed over the target when complete, so no one sees half a
 *   file; bytes are capped (the disk cap), and the tmpfs's own size
 *   holds too (ENOSPC).
 *
 * Functions return 0 (or an fd) on success and -errno on failure, with
 * err naming the path: callers map ENOENT, EEXIST, ENOSPC... to their
 * protocol's codes.
 */
#ifndef SANDBOX_SB_FILES_WS_H
#define SANDBOX_SB_FILES_WS_H

#include "common/err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

typedef struct sb_ws_entry {
    char *path;        /* owned: relative to the workspace ("" = top) */
    const char *name;  /* its last component (borrowed from path) */
    struct stat st;    /* lstat: a symlink is itself */
    char *link_target; /* owned: a symlink's text, or NULL */
} sb_ws_entry_t;

void sb_ws_entry_release(sb_ws_entry_t *e);

/* lstat `rel`. */
int sb_ws_stat(int ws_fd, const char *rel, sb_ws_entry_t *out, err_t *err);
/* The entries under directory `rel`, `depth` levels down (1 = its own),
 * at most `max` (then -E2BIG with what was found): *out a new array of *n
 * (sb_ws_entries_free). Symlinked directories are listed, not entered. */
int sb_ws_list(int ws_fd, const char *rel, unsigned depth, size_t max,
               sb_ws_entry_t **out, size_t *n, err_t *err);
void sb_ws_entries_free(sb_ws_entry_t *v, size_t n);

/* mkdir -p `rel` (mode 0755). *created says whether the last one is new
 * (an existing directory is fine; an existing non-directory is -EEXIST
 * ... -ENOTDIR). */
int sb_ws_mkdirs(int ws_fd, const char *rel, uid_t owner, gid_t group,
                 bool *created, err_t *err);

/* Open regular file `rel` for reading (blocking); *st filled. */
int sb_ws_open_read(int ws_fd, const char *rel, struct stat *st, err_t *err);

/* Open directory `rel` (O_RDONLY | O_DIRECTORY), e.g. to watch it
 * through /proc/self/fd/N, which names exactly this directory. */
int sb_ws_open_dir(int ws_fd, const char *rel, err_t *err);

/* A file being written. */
typedef struct sb_ws_upload sb_ws_upload_t;
/* Begin writing `rel` (parents made as by sb_ws_mkdirs); at most
 * max_bytes. NULL + err (and *rc = -errno). */
sb_ws_upload_t *sb_ws_upload_begin(int ws_fd, const char *rel, uid_t owner,
                                   gid_t group, uint64_t max_bytes, int *rc,
                                   err_t *err);
int sb_ws_upload_write(sb_ws_upload_t *u, const void *data, size_t len,
                       err_t *err);
/* Rename into place (over a file or symlink of that name; never over a
 * directory: -EISDIR). Destroys *u. */
int sb_ws_upload_commit(sb_ws_upload_t **u, err_t *err);
/* Remove the temporary file; destroys *u (NULL accepted). */
void sb_ws_upload_abort(sb_ws_upload_t **u);
/* The path being written (borrowed). */
const char *sb_ws_upload_path(const sb_ws_upload_t *u);

/* rename `from` to `to` (replacing a file there, as mv does; parents of
 * `to` made). */
int sb_ws_move(int ws_fd, const char *from, const char *to, uid_t owner,
               gid_t group, err_t *err);
/* Remove `rel`: a file or symlink, or a directory with everything below
 * it (never following a symlink). The top ("") is refused (-EBUSY). */
int sb_ws_remove(int ws_fd, const char *rel, uid_t owner, gid_t group,
                 err_t *err);

#endif
