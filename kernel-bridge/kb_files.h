/*
 * kb_files: files into and out of a kernel through the kernel itself, for
 * kernels that share no filesystem with us (a Jupyter Server or Enterprise
 * Gateway kernel). Works on any kb_kernel_t running ipykernel: every step
 * is an execute_request (silent, not stored in history, empty code, the
 * call as its user expression) to a helper module the first request of
 * each call installs in the kernel unless this very version is there
 * (kb_files.py, as sys.modules['_jupyter_agent_files']); the helper
 * answers each request with one display_data of type KB_FILES_MIME
 * carrying JSON. Nothing lands in the user's namespace or history.
 *
 * Where: the kernel's directory is kb_files_opts_t.kernel_dir, or, when
 * NULL, the kernel's working directory (os.getcwd(): /mnt/data in our
 * sandbox, the kernel's working directory on a gateway).
 *
 * In (kb_files_push): the host file goes in chunks of base64 (chunk_bytes
 * each) with each chunk's SHA-256; the kernel checks every chunk's hash
 * and offset, and at the end the size and SHA-256 of the whole file, then
 * moves its temporary file (a dot-name in the same directory) to NAME
 * without ever replacing an existing entry. A half-copied file never
 * appears under NAME. NAME follows sb_files_check_name.
 *
 * Out (kb_files_pull): the kernel is hostile. It lists the directory, then
 * each file comes in chunks; the host checks each chunk's offset, length
 * and SHA-256 and the whole file's size and SHA-256, and writes through
 * sb_outdir (sandbox/sb_files.h): the same rules and caps as a local
 * copy-out (a new DIR, no dot-names, no '..' or absolute paths, O_EXCL,
 * modes 0644/0755, bytes, entries and depth capped), each file written
 * under a temporary dot-name and renamed into place only once it checked
 * out. Unsafe names are skipped and named (escaped) in the error, as a
 * local copy-out does; a cap or a lying kernel stops the copy. What one
 * answer may cost is capped (KB_FILES_MAX_LIST_BYTES for a listing, about
 * 4/3 of a chunk for a chunk): a kernel that sends more is interrupted.
 * One message is still received and parsed whole before that cap refuses
 * it, so the client's max_msg_bytes (kb_client_opts_t) bounds the rest.
 *
 * Errors: ERR_USAGE for a refused argument, ERR_IO for a refused or failed
 * file (the kernel's refusals too, its text escaped), ERR_VERIFY for a
 * SHA-256 that does not match, ERR_KERNEL when the kernel misbehaved (no
 * answer, two answers, more than announced or asked for, an answer over
 * its cap) or died, ERR_TIMEOUT when a request took longer than
 * timeout_ms (the kernel was interrupted, see kb_kernel_execute).
 *
 * Throughput on a local kernel is bound by ipykernel's message handling
 * and the JSON and hashing on both sides: 10-12 MiB/s each way for a
 * 50 MiB file on the (shared, 2-core) test machine, 4-5 MiB/s when it is
 * loaded (bench/files; the local copy-out runs at about 1.5 GiB/s).
 */
#ifndef KERNEL_BRIDGE_KB_FILES_H
#define KERNEL_BRIDGE_KB_FILES_H

#include "common/err.h"
#include "kernel-bridge/kb_kernel.h"
#include "sandbox/sb_files.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* The MIME type of the helper's answers (display_data). */
#define KB_FILES_MIME "application/x-jupyter-agent-files+json"
/* chunk_bytes: default, and the bounds it is clamped to. */
#define KB_FILES_CHUNK_DEFAULT (1024 * 1024)
#define KB_FILES_CHUNK_MIN (4 * 1024)
#define KB_FILES_CHUNK_MAX (4 * 1024 * 1024)
/* The most a listing answer may cost (kb_output's charge). */
#define KB_FILES_MAX_LIST_BYTES (48u * 1024 * 1024)

typedef struct kb_files_opts {
    const char *kernel_dir; /* borrowed; directory in the kernel (absolute,
                               or relative to its working directory); NULL =
                               its working directory */
    size_t chunk_bytes;     /* bytes per request; 0 = 1 MiB, clamped to
                               [KB_FILES_CHUNK_MIN, KB_FILES_CHUNK_MAX] */
    int timeout_ms;         /* per request; 0 = 60 s, < 0 = none */
} kb_files_opts_t;

void kb_files_opts_init(kb_files_opts_t *o);

/* The kernel directory files go to and come from, absolute, as the kernel
 * reports it (a new string, caller frees; escape it before printing), or
 * NULL + err. Installs the helper if needed. o may be NULL. */
char *kb_files_kernel_dir(kb_kernel_t *k, const kb_files_opts_t *o, err_t *err);

/* Copy host file `host_path` (a regular file of at most `max_bytes`) to
 * `name` in the kernel's directory, which must not exist yet. 0, or -1 +
 * err naming the file; the kernel's temporary file is removed on failure
 * when the kernel still answers. o may be NULL. */
int kb_files_push(kb_kernel_t *k, const char *host_path, const char *name,
                  uint64_t max_bytes, const kb_files_opts_t *o, err_t *err);

/* kb_files_push from `fd`, a regular file sb_files_open_input(_at)
 * opened and size-checked (named `host_path` in messages; not closed). */
int kb_files_push_fd(kb_kernel_t *k, int fd, const char *host_path,
                     const char *name, const kb_files_opts_t *o, err_t *err);

/* The regular files under `rel_dir` ("." for all) of the kernel's
 * directory, as the kernel claims them: a JSON array of {"path", "size"}
 * (new reference; paths relative to the kernel's directory, in the
 * kernel's order: directories first visited, names sorted),
 * at most `max_entries`, leaving out what a copy-out would refuse. For
 * display only: kb_files_pull checks everything again. NULL + err. */
json_t *kb_files_list(kb_kernel_t *k, const char *rel_dir, size_t max_entries,
                      const kb_files_opts_t *o, err_t *err);

/* Copy what is under `rel_dir` ("." for all; a checked relative path) of
 * the kernel's directory into `d` (sb_outdir_open), files and directories
 * at their paths relative to rel_dir. Returns 0 when everything was
 * copied, -1 otherwise (what could be copied was, a cap or a misbehaving
 * kernel stops the copy, unsafe entries are skipped and named);
 * *n_copied (may be NULL) gets the number of files and directories
 * created. */
int kb_files_pull(kb_kernel_t *k, const char *rel_dir, sb_outdir_t *d,
                  const kb_files_opts_t *o, size_t *n_copied, err_t *err);

/* Read the regular file `rel_path` (a checked relative path: no '..',
 * not absolute) of the kernel's directory into memory, the way
 * kb_files_pull fetches a file: the kernel announces its size (over
 * `max_bytes` is refused before any byte comes) and SHA-256, each chunk
 * and the whole are checked here. A symbolic link, a path that leads
 * outside the kernel's directory through one, or anything but a regular
 * file is refused (by the genuine helper; a hostile kernel can only hand
 * over bytes that check out against what it announced). On success
 * *data is a new NUL-terminated buffer (caller frees) and *len its size;
 * -1 + err otherwise (ERR_IO for a missing, refused or too large file). */
int kb_files_read(kb_kernel_t *k, const char *rel_path, size_t max_bytes,
                  char **data, size_t *len, const kb_files_opts_t *o,
                  err_t *err);

/* sb_outdir_open(dest_dir, out) + kb_files_pull + sb_outdir_destroy: the
 * remote form of sb_files_copy_out. */
int kb_files_copy_out(kb_kernel_t *k, const char *rel_dir, const char *dest_dir,
                      const sb_files_out_opts_t *out, const kb_files_opts_t *o,
                      size_t *n_copied, err_t *err);

#endif
