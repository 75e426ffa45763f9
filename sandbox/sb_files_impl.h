/*
 * sb_files_impl.h: what sb_files.c lends sb_outdir.c (the copy-out half
 * of sandbox/sb_files.h). Calls go sb_outdir.c -> sb_files.c only.
 */
#ifndef SANDBOX_SB_FILES_IMPL_H
#define SANDBOX_SB_FILES_IMPL_H

#include "common/err.h"

#include <stdint.h>
#include <sys/types.h>

/* How deep a copied or listed tree may go. */
#define MAX_DEPTH 16

/* "directory", "symbolic link", "FIFO" ... for messages. */
const char *sb_files_kind(mode_t m);
/* openat2 beneath `dirfd`, never through a symlink, a magic link or onto
 * another mount; returns fd or -errno. */
int sb_files_open_beneath(int dirfd, const char *rel, int flags);
/* The error for opening `rel` in /mnt/data failing with errno `e`: -1. */
int sb_files_open_error(err_t *err, const char *rel, int e);
/* Copy `in` to `out`, at most `max` bytes in all (*copied counts them),
 * `what` naming the file in messages. 0, or -1 + err. */
int sb_files_copy_fd(int in, int out, uint64_t max, uint64_t *copied,
                     const char *what, err_t *err);

#endif
