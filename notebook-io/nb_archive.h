/*
 * nb_archive: the container of a report archive (a zip file, through
 * libarchive), written and read as hostile input.
 *
 * Writing streams each file into the archive while hashing it (SHA-256), to
 * a temporary file next to the destination that is renamed into place only
 * when the whole archive was written.
 *
 * Reading is one pass over the archive that hashes every entry, keeps the
 * small top-level files in memory and, when asked, extracts the rest into a
 * directory the caller created empty. It refuses, naming the entry:
 *   - a name that is absolute, has an empty, "." or ".." component, a
 *     backslash, a control byte or invalid UTF-8, or is longer than
 *     NB_ARCHIVE_NAME_MAX;
 *   - anything but a regular file or a directory (symlinks, hard links,
 *     devices, FIFOs, sockets);
 *   - a name that occurs twice;
 *   - more than max_entries entries, more than max_total_bytes of content,
 *     or content more than max_ratio times the archive's own size (a zip
 *     bomb);
 *   - a truncated or corrupt archive (libarchive's CRC and structure checks).
 * Extraction never follows a symlink: every directory is created by us
 * (mkdirat, 0700) and walked with O_NOFOLLOW, every file is created O_EXCL
 * with mode 0600.
 *
 * Errors: ERR_VERIFY for a refused or damaged archive, ERR_USAGE for a file
 * that cannot be opened, ERR_IO for a failure to write.
 */
#ifndef NOTEBOOK_IO_NB_ARCHIVE_H
#define NOTEBOOK_IO_NB_ARCHIVE_H

#include "common/err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NB_ARCHIVE_NAME_MAX 1024
#define NB_SHA256_BYTES 32
#define NB_SHA256_HEX 65 /* 64 hex digits and a NUL */

/* ---- writing ------------------------------------------------------------ */

typedef struct nb_archive_writer nb_archive_writer_t;

/* Start writing a zip archive that will become `path` (which must not
 * exist unless `force`). NULL with err set on failure. */
nb_archive_writer_t *nb_archive_writer_new(const char *path, bool force,
                                           err_t *err);

/* Add `name` (checked as a reader would) holding data[0..len), or the
 * contents of the regular file `host_path` (opened O_NOFOLLOW). `sha_hex`
 * (optional) gets the content's SHA-256. 0, or -1 with err set. */
int nb_archive_add_mem(nb_archive_writer_t *w, const char *name,
                       const void *data, size_t len,
                       char sha_hex[NB_SHA256_HEX], err_t *err);
int nb_archive_add_file(nb_archive_writer_t *w, const char *name,
                        const char *host_path, char sha_hex[NB_SHA256_HEX],
                        uint64_t *size_out, err_t *err);
/* The same from an open regular file (borrowed; read from where it is). */
int nb_archive_add_fd(nb_archive_writer_t *w, const char *name, int fd,
                      char sha_hex[NB_SHA256_HEX], uint64_t *size_out,
                      err_t *err);

/* Finish and rename into place (0), or on failure remove the temporary
 * file (-1). Always destroys the writer and sets *pw = NULL. */
int nb_archive_writer_commit(nb_archive_writer_t **pw, err_t *err);
/* Abandon: remove the temporary file. Accepts NULL. */
void nb_archive_writer_destroy(nb_archive_writer_t **pw);

/* ---- reading ------------------------------------------------------------ */

typedef struct nb_archive_limits {
    size_t max_entries;       /* default 100 000 */
    uint64_t max_total_bytes; /* uncompressed content, default 64 GiB */
    uint64_t max_ratio;       /* content / archive size, default 200 */
    size_t max_kept_bytes;    /* each top-level file kept in memory,
                                 default 256 MiB */
    /* Which files to read at all (NULL: every one). Called with each
     * regular file's checked name before any of its content is read:
     * 0 reads it, -1 refuses the archive with err filled (ERR_VERIFY). */
    int (*admit)(void *ctx, const char *name, err_t *err);
    /* Which top-level files to keep in memory and the most bytes each may
     * hold (NULL: every top-level file, max_kept_bytes). Returns 0 for a
     * file only hashed (and extracted, when asked). */
    size_t (*keep)(void *ctx, const char *name);
    void *ctx; /* passed to admit and keep */
} nb_archive_limits_t;

void nb_archive_limits_init(nb_archive_limits_t *l);

/* One regular file of the archive. */
typedef struct nb_archive_file {
    char *name;                 /* owned */
    uint64_t size;              /* content bytes */
    char sha256[NB_SHA256_HEX]; /* of the content */
    char *data;                 /* owned copy with a NUL after `size` bytes
                                   for top-level files, else NULL */
} nb_archive_file_t;

typedef struct nb_archive {
    nb_archive_file_t *files; /* owned, in archive order */
    size_t nfiles;
    uint64_t archive_bytes; /* size of the archive file itself */
    uint64_t content_bytes; /* sum of the files' sizes */
} nb_archive_t;

/* Read `path` in one pass under `lim` (NULL = defaults). When
 * `extract_dirfd` >= 0 every file that is not kept in memory is also
 * written below it. Returns a new nb_archive_t, or NULL with err set. */
nb_archive_t *nb_archive_read(const char *path, int extract_dirfd,
                              const nb_archive_limits_t *lim, err_t *err);
/* The content of the one top-level file `name` of the zip at `path`, read
 * in a pass that reads no other entry's content (a signature read before
 * anything it covers). A new string with a NUL after *len bytes, or NULL
 * with err set: ERR_VERIFY when `name` is missing, damaged or larger than
 * `max` bytes, or the archive has more than lim->max_entries entries. */
char *nb_archive_read_one(const char *path, const char *name, size_t max,
                          const nb_archive_limits_t *lim, size_t *len,
                          err_t *err);
/* The same over bytes in memory (nothing extracted): the fuzz target. */
nb_archive_t *nb_archive_read_mem(const void *data, size_t len,
                                  const nb_archive_limits_t *lim, err_t *err);
void nb_archive_destroy(nb_archive_t **p);

/* The file called `name`, or NULL. Borrowed. */
const nb_archive_file_t *nb_archive_find(const nb_archive_t *a,
                                         const char *name);

/* Is `name` acceptable as an entry name (rules above)? 0, or -1 with
 * ERR_VERIFY naming what is wrong. */
int nb_archive_name_check(const char *name, err_t *err);

/* SHA-256 and size of the regular file `path` (a symlink at its end is
 * refused). 0, or -1 with err set. */
int nb_sha256_file(const char *path, char hex[NB_SHA256_HEX], uint64_t *size,
                   err_t *err);

/* SHA-256 of data[0..len) as lowercase hex. */
void nb_sha256_hex(const void *data, size_t len, char out[NB_SHA256_HEX]);

#endif
