/*
 * size: the one parser for byte sizes given on the command line.
 *
 * "4096" is bytes; a number (fractions allowed) with K, M, G or T, in
 * either case and optionally followed by "i" and/or "B", is binary:
 * "512M", "1.5GiB", "64kb". A bare "B" suffix means bytes.
 *
 * "0" parses as 0 bytes: the parser does not decide what zero means. Each
 * flag does, and says so in its help: --max-output 0 means "no cap"; the
 * sandbox sizes (--memory, --disk, --tmp, --shm, --fsize) refuse 0 because
 * a zero-sized filesystem or limit is never what anyone meant.
 */
#ifndef COMMON_SIZE_H
#define COMMON_SIZE_H

#include <stdint.h>

/* Parse `s` into `*out` (bytes, fractions rounded down). Returns 0, or -1
 * (nothing stored) for a negative, malformed or >= 2^64 size. */
int size_parse(const char *s, uint64_t *out);

#endif
