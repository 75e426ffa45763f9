/*
 * pk_wheel: read a wheel's METADATA from verified bytes, on the host.
 *
 * A wheel is a zip archive. To pin a package's dependencies before anything
 * reaches the sandbox, the installer reads `{dist}-{ver}.dist-info/METADATA`
 * straight from the fd that pk_manifest verified: the end-of-central-
 * directory record, the central directory, one local header, then the
 * member's bytes, stored (method 0) or deflated (method 8, inflated by zlib;
 * the small RFC 1951 decoder in pk_wheel.c), checked against the CRC-32 the
 * archive records. Every offset and length is bounds-checked against the
 * file size; the output is capped. No zlib: the wheel bytes are signed, but
 * they are still parsed as if hostile (a fuzz target replays this path).
 *
 * Not supported (refused with a message naming the wheel): ZIP64 archives,
 * encrypted members, compression methods other than stored and deflate.
 */
#ifndef PACKAGES_PK_WHEEL_H
#define PACKAGES_PK_WHEEL_H

#include "common/err.h"
#include "common/strv.h"

#include <stddef.h>
#include <stdint.h>

#define PK_WHEEL_METADATA_MAX ((size_t)4 << 20) /* METADATA size cap */

/* A byte source: the whole archive is `size` bytes read with `read_at`
 * (return bytes read, < len only at end of file, -1 on error). */
typedef struct pk_wheel_src {
    long (*read_at)(void *arg, void *buf, size_t len, uint64_t off);
    void *arg;     /* passed to read_at */
    uint64_t size; /* archive size in bytes */
} pk_wheel_src_t;

/* Find the top-level `*.dist-info/METADATA` member (preferring the one whose
 * directory starts with `dist_prefix`, e.g. "demo_pkg-1.0", when several
 * exist; may be NULL) and return its bytes, NUL-terminated (new buffer,
 * *len without the NUL). NULL with ERR_VERIFY naming `label` on any
 * malformation, a missing METADATA, a CRC mismatch, or more than
 * PK_WHEEL_METADATA_MAX bytes. */
char *pk_wheel_metadata(const pk_wheel_src_t *src, const char *dist_prefix,
                        const char *label, size_t *len, err_t *err);

/* The same over an fd (pread), e.g. a verified manifest entry's. */
char *pk_wheel_metadata_fd(int fd, uint64_t size, const char *dist_prefix,
                           const char *label, size_t *len, err_t *err);

/* The same over bytes in memory (the fuzz target's entry point). */
char *pk_wheel_metadata_mem(const void *data, size_t size,
                            const char *dist_prefix, const char *label,
                            size_t *len, err_t *err);

/* Raw DEFLATE (RFC 1951) of in[0..inlen) into at most `max_out` bytes.
 * Returns a new buffer with *outlen, or NULL (malformed, truncated, or
 * more than max_out bytes). Exposed for tests. */
unsigned char *pk_wheel_inflate(const unsigned char *in, size_t inlen,
                                size_t max_out, size_t *outlen);

/* CRC-32 (ISO 3309, as zip records it) of data[0..len). */
uint32_t pk_wheel_crc32(const void *data, size_t len);

/* The values of every `Requires-Dist:` header of METADATA text (headers end
 * at the first empty line; folded continuation lines are joined). Returns
 * a new NULL-terminated array of new strings (free with
 * strv_free), possibly empty. */
char **pk_wheel_requires_dist(const char *metadata);

#endif
