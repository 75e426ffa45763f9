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
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
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

/* Open `host_path` for reading as an input file: a regular file (a FIFO
 * or device is refused without blocking) of at most `max_bytes`, which
 * --disk sets. Returns a blocking fd with *st filled, or -1 with ERR_USAGE
 * naming the file and what to do. */
int sb_files_open_input(const char *host_path, uint64_t max_bytes,
                        struct stat *st, err_t *err);

/* Copy host file `host_path` (a regular file, at most `max_bytes`) to
 * `name` in the workspace, created fresh (O_EXCL). When `owner` is not
 * (uid_t)-1 the file is created with that filesystem uid/gid (the calling
 * thread's fsuid is switched and restored), as a userns tmpfs requires. */
int sb_files_copy_in(int ws_fd, const char *host_path, const char *name,
                     uint64_t max_bytes, uid_t owner, gid_t group, err_t *err);

/* sb_files_open_input for `relpath` below directory fd `dir_fd` (shown
 * as `dir_shown` in messages): relative, no "." or ".." component, opened
 * with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | ...), so neither
 * it nor a directory on the way may be a symbolic link. For files a user
 * names from a directory the box does not see (the agent kernel's %upload). */
int sb_files_open_input_at(int dir_fd, const char *relpath,
                           const char *dir_shown, uint64_t max_bytes,
                           struct stat *st, err_t *err);
/* sb_files_copy_in from `in`, an fd sb_files_open_input(_at) returned
 * (named `shown` in messages; not closed). A copy that fails midway
 * removes what it created. */
int sb_files_copy_in_fd(int ws_fd, int in, const char *shown, const char *name,
                        uint64_t max_bytes, uid_t owner, gid_t group,
                        err_t *err);

/* Read workspace file `relpath` (regular, at most `max_bytes`). On success
 * *data is a new NUL-terminated buffer (caller frees), *len its size. */
int sb_files_read(int ws_fd, const char *relpath, size_t max_bytes, char **data,
                  size_t *len, err_t *err);

/* Files leaving a box: the rules (docs/security-model.md, "Files out").
 * - DIR is created new (an existing empty directory of ours is fine);
 *   an existing non-empty one only with `force`, and then files already
 *   there are never overwritten. DIR itself must not be a symlink or
 *   belong to another user. Everything below DIR is reached from the
 *   directory fd we opened, with openat2(RESOLVE_BENEATH |
 *   RESOLVE_NO_SYMLINKS), files created O_EXCL.
 * - Modes are 0644 for files and 0755 for directories: never setuid,
 *   setgid or sticky; 0755 for a file the box made executable only with
 *   `keep_exec`.
 * - Dot-files and dot-directories (.git, .bashrc, .ssh ...) are never
 *   copied; nor are symlinks, FIFOs, sockets, devices.
 * - Caps on bytes, entries (files + directories) and depth.
 * Each skipped entry is named (escaped, common/escape.h) in the error. */
/* Told of each file a copy-out put on the host, once it is there: DIR
 * as given, the path relative to it, and the directory that holds the
 * file (an fd) with its name there, to hash it (the --audit log's
 * file_out records). */
typedef void (*sb_files_out_fn)(void *arg, const char *dir, const char *rel,
                                int dirfd, const char *name);

typedef struct sb_files_out_opts {
    sb_files_out_fn on_file; /* NULL: nobody is told */
    void *on_file_arg;
    uint64_t max_bytes; /* all files together */
    size_t max_entries; /* files and directories created (10000) */
    unsigned max_depth; /* directory levels below DIR (16) */
    bool force;         /* DIR may exist and hold entries already */
    bool keep_exec;     /* keep the owner's exec bit (as 0755) */
} sb_files_out_opts_t;

#define SB_FILES_OUT_MAX_ENTRIES 10000
#define SB_FILES_OUT_MAX_DEPTH 16

/* Defaults above with `max_bytes`. */
void sb_files_out_opts_init(sb_files_out_opts_t *o, uint64_t max_bytes);

/* A directory for files out, opened once and filled by copies and writes
 * that share its caps. */
typedef struct sb_outdir sb_outdir_t;

/* Create (or, see the rules, open) DIR `path`. NULL + err (ERR_USAGE for
 * a refused DIR, ERR_IO otherwise). */
sb_outdir_t *sb_outdir_open(const char *path, const sb_files_out_opts_t *o,
                            err_t *err);
/* Would sb_outdir_open(path, o) accept `path`? The same checks, before a
 * session starts, creating nothing: 0 (DIR is missing but can be made in
 * its parent, or exists and is acceptable) or -1 + err (ERR_USAGE). */
int sb_outdir_check(const char *path, const sb_files_out_opts_t *o, err_t *err);
void sb_outdir_destroy(sb_outdir_t **p);
/* As given to sb_outdir_open (borrowed). */
const char *sb_outdir_path(const sb_outdir_t *d);
/* Its caps and rules (borrowed). */
const sb_files_out_opts_t *sb_outdir_opts(const sb_outdir_t *d);
/* Files and directories charged so far (created, or refused only once
 * already charged: an existing name met at the rename). */
size_t sb_outdir_entries(const sb_outdir_t *d);
/* Write `len` bytes as new file `name` (a plain name, sb_files_check_name)
 * directly in DIR, O_EXCL, mode 0644, charged against the caps. */
int sb_outdir_write(sb_outdir_t *d, const char *name, const void *data,
                    size_t len, err_t *err);
/* Copy what is under workspace dir `rel_dir` ("." for all) into DIR.
 * Returns 0 when everything was copied, -1 otherwise (what could be copied
 * was; a cap stops the copy); *n_copied (may be NULL) gets the number of
 * files and directories created. */
int sb_outdir_copy(sb_outdir_t *d, int ws_fd, const char *rel_dir,
                   size_t *n_copied, err_t *err);

/* Entries skipped as unsafe: `rel` (borrowed, escaped when reported)
 * was not copied because `why`. sb_outdir_report names them. */
void sb_outdir_refuse(sb_outdir_t *d, const char *rel, const char *why);
/* End a copy whose result is `rc` (0 or -1 with err set): with entries
 * skipped since the last report, 0 becomes -1 with ERR_IO "copied the
 * rest, but skipped N unsafe entries: ..." and a -1's text gets "; skipped
 * N unsafe entries before: ..." appended. Forgets them; returns the new
 * rc. */
int sb_outdir_report(sb_outdir_t *d, int rc, err_t *err);

/* Files that arrive in pieces (from a kernel that shares no filesystem
 * with us, kernel-bridge/kb_files.h), under the same rules and caps as
 * sb_outdir_copy. `relpath` is the path below DIR the source claims: it
 * is refused unless every component is a plain name (no "", ".", "..",
 * no leading '.', at most 255 bytes; the whole under 4096 bytes) and it
 * has at most max_depth directories above the file. Missing directories
 * on the way are created 0755, each one charged as an entry.
 *
 * Messages and the skipped list name the entry `label` (NULL: relpath),
 * e.g. its path in the source, as sb_outdir_copy names "out/x" when it
 * copies "out".
 *
 * sb_outdir_create charges one entry and `size` (the announced size)
 * against the caps and creates the file under a temporary dot-name in its
 * directory (O_EXCL, 0644, or 0755 when `exec` and keep_exec). Returns 0
 * with *out set; 1 when the entry was refused and recorded with
 * sb_outdir_refuse (skip it, go on); -1 + err when the copy must stop (a
 * cap, an I/O error). */
typedef struct sb_outfile sb_outfile_t;
/* Why sb_outdir_create (is_dir false) or sb_outdir_mkdir (true) refuses
 * `relpath` with `max_depth`, or NULL when it does not (a static string). */
const char *sb_files_out_refusal(const char *relpath, bool is_dir,
                                 unsigned max_depth);
int sb_outdir_create(sb_outdir_t *d, const char *relpath, const char *label,
                     uint64_t size, bool exec, sb_outfile_t **out, err_t *err);
/* Directory `relpath` (and those above it), same rules and returns. */
int sb_outdir_mkdir(sb_outdir_t *d, const char *relpath, const char *label,
                    err_t *err);
/* Append `len` bytes; every byte is charged against the byte cap. 0, or
 * -1 + err (the file is not removed: call sb_outfile_abort). */
int sb_outfile_write(sb_outfile_t *f, const void *data, size_t len, err_t *err);
/* Rename the temporary file to its name, never over an existing entry.
 * 0; 1 when something exists there (refused and recorded, the temporary
 * file removed); -1 + err. Destroys *f and sets it to NULL in every case. */
int sb_outfile_commit(sb_outfile_t **f, err_t *err);
/* Remove the temporary file and destroy *f (NULL accepted). */
void sb_outfile_abort(sb_outfile_t **f);

/* sb_outdir_open + sb_outdir_copy + sb_outdir_destroy. */
int sb_files_copy_out(int ws_fd, const char *rel_dir, const char *dest_dir,
                      const sb_files_out_opts_t *o, size_t *n_copied,
                      err_t *err);

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
