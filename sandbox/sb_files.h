/*
 * sb_files: files into and out of a sandbox workspace, safely.
 *
 * Everything is relative to a directory fd of the workspace (the
 * /mnt/data tmpfs), never a path the sandboxed code could redirect: opens
 * use openat2() with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV and O_NOFOLLOW | O_NONBLOCK
 * (a FIFO cannot block us), then fstat() must say "regular file".
 * Each refusal names the file and why.
 */
#ifndef SANDBOX_SB_FILES_H
#define SANDBOX_SB_FILES_H

#include "common/err.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* An upload name: non-empty, at most 255 bytes, no '/', no leading '.',
 * no control characters. Returns 0 or -1 with ERR_USAGE naming it. */
int sb_files_check_name(const char *name, err_t *err);
/* A relative path inside the workspace: not absolute, no "." or ".."
 * components, no empty components. Returns 0 or -1 with ERR_USAGE. */
int sb_files_check_relpath(const char *relpath, err_t *err);

/* Create directory NAME (one checked name, see sb_files_check_name) at the
 * top of the workspace, mode 0755. When owner is not (uid_t)-1 the inode
 * is created with that fsuid/fsgid (the box's user; the workspace tmpfs
 * lives in the box's user namespace, where host root has no mapping). An
 * existing directory is fine. 0, or -1 + err. */
int sb_files_mkdir(int ws_fd, const char *name, uid_t owner, gid_t group,
                   err_t *err);

/* Copy host file `host_path` (a regular file, at most `max_bytes`) to
 * `name` in the workspace, created fresh (O_EXCL). When `owner` is not
 * (uid_t)-1 the file is created with that filesystem uid/gid (the calling
 * thread's fsuid is switched and restored), as a userns tmpfs requires. */
int sb_files_copy_in(int ws_fd, const char *host_path, const char *name,
                     uint64_t max_bytes, uid_t owner, gid_t group, err_t *err);

/* Read workspace file `relpath` (regular, at most `max_bytes`). On success
 * *data is a new NUL-terminated buffer (caller frees), *len its size. */
int sb_files_read(int ws_fd, const char *relpath, size_t max_bytes, char **data,
                  size_t *len, err_t *err);

/* Copy regular files under workspace dir `rel_dir` ("." for all) into host
 * directory `dest_dir` (created if missing), recursively, at most
 * `max_total` bytes in all. Unsafe entries (symlinks, FIFOs, sockets,
 * devices) are skipped and listed in the error; returns 0 when everything
 * was copied, -1 otherwise (what could be copied still was). */
int sb_files_copy_out(int ws_fd, const char *rel_dir, const char *dest_dir,
                      uint64_t max_total, err_t *err);

/* Copy the regular files and directories under dir fd `src_fd` into dir
 * fd `dest_fd` (both workspaces), at most `max_total` bytes; unsafe
 * entries are skipped silently. With `owner` != (uid_t)-1 the calling
 * thread's fsuid/fsgid are `owner`/`group` meanwhile. Returns 0 or -1. */
int sb_files_copy_tree(int src_fd, int dest_fd, uint64_t max_total, uid_t owner,
                       gid_t group, err_t *err);

/* Regular files under the workspace as a JSON array of {"path", "size"}
 * (new reference), at most `max_entries`; unsafe entries are left out. */
json_t *sb_files_list(int ws_fd, size_t max_entries);

/* Remove `path` and everything below it without following symlinks, at
 * any depth: iterative, openat-based, two fds at most, ".." checked
 * against the identity recorded on the way down. 0, or -1 when something
 * could not be removed (what could be, was). */
int sb_files_remove_tree(const char *path);

#endif
