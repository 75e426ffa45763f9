#include "packages/pk_wheel.h"

#include "common/strv.h"
#include "common/xalloc.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

/* --- CRC-32 and raw DEFLATE, from zlib -------------------------------- */

uint32_t
pk_wheel_crc32(const void *data, size_t len)
{
    uLong c = crc32(0L, Z_NULL, 0);
    const Bytef *p = data;
    while (len > 0) { /* zlib takes uInt lengths */
        uInt n = len > 0x40000000u ? 0x40000000u : (uInt)len;
        c = crc32(c, p, n);
        p += n;
        len -= n;
    }
    return (uint32_t)c;
}

unsigned char *
pk_wheel_inflate(const unsigned char *in, size_t inlen, size_t max_out,
                 size_t *outlen)
{
    if (inlen > UINT32_MAX || max_out > UINT32_MAX - 1)
        return NULL;
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, -15) != Z_OK) /* raw deflate, as zip stores it */
        return NULL;
    /* One byte more than allowed, to tell "exactly max_out" from "more". */
    unsigned char *out = xmalloc(max_out + 1);
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = (uInt)inlen;
    z.next_out = out;
    z.avail_out = (uInt)(max_out + 1);
    int rc = inflate(&z, Z_FINISH);
    size_t n = (size_t)z.total_out;
    inflateEnd(&z);
    if (rc != Z_STREAM_END || n > max_out) {
        free(out);
        return NULL;
    }
    *outlen = n;
    return out;
}

/* --- zip -------------------------------------------------------------- */

#define EOCD_SIG 0x06054b50u
#define CDIR_SIG 0x02014b50u
#define LOCAL_SIG 0x04034b50u
#define EOCD_MIN 22
#define CDIR_MIN 46
#define LOCAL_MIN 30
#define CDIR_MAX ((uint64_t)64 << 20) /* central directory size cap */

static uint16_t
s_le16(const unsigned char *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t
s_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static int
s_read_exact(const pk_wheel_src_t *src, void *buf, size_t len, uint64_t off)
{
    if (off > src->size || len > src->size - off)
        return -1;
    long n = src->read_at(src->arg, buf, len, off);
    return n >= 0 && (size_t)n == len ? 0 : -1;
}

/* A central directory entry we may read. */
typedef struct member {
    uint16_t method;    /* 0 stored, 8 deflate */
    uint16_t flags;     /* general purpose bits */
    uint32_t crc;       /* CRC-32 of the uncompressed bytes */
    uint32_t csize;     /* compressed size */
    uint32_t usize;     /* uncompressed size */
    uint32_t local_off; /* offset of the local header */
} member_t;

/* Is `name` (n bytes) "<dir>.dist-info/METADATA" with no other '/'? Then
 * returns the length of <dir>, else 0. */
static size_t
s_metadata_dir(const unsigned char *name, size_t n)
{
    static const char tail[] = ".dist-info/METADATA";
    size_t tl = sizeof tail - 1;
    if (n <= tl || memcmp(name + n - tl, tail, tl) != 0)
        return 0;
    if (memchr(name, '/', n - tl))
        return 0;
    return n - tl;
}

static char *
s_read_member(const pk_wheel_src_t *src, const member_t *m, const char *label,
              size_t *len, err_t *err)
{
    unsigned char hdr[LOCAL_MIN];
    unsigned char *comp = NULL;
    char *out = NULL;
    if (m->flags & 1) {
        err_set(err, ERR_VERIFY, "%s: METADATA is encrypted", label);
        goto out;
    }
    if (m->method != 0 && m->method != 8) {
        err_set(err, ERR_VERIFY,
                "%s: METADATA uses zip compression method %u (only stored "
                "and deflate are read)",
                label, m->method);
        goto out;
    }
    if (m->usize > PK_WHEEL_METADATA_MAX ||
        (m->method == 0 && m->csize != m->usize)) {
        err_set(err, ERR_VERIFY, "%s: METADATA is too large or malformed",
                label);
        goto out;
    }
    if (s_read_exact(src, hdr, sizeof hdr, m->local_off) ||
        s_le32(hdr) != LOCAL_SIG) {
        err_set(err, ERR_VERIFY, "%s: bad local header for METADATA", label);
        goto out;
    }
    uint64_t data_off = (uint64_t)m->local_off + LOCAL_MIN + s_le16(hdr + 26) +
                        s_le16(hdr + 28);
    if (data_off > src->size || m->csize > src->size - data_off ||
        m->csize > PK_WHEEL_METADATA_MAX + PK_WHEEL_METADATA_MAX / 8) {
        err_set(err, ERR_VERIFY, "%s: METADATA runs past the end of the file",
                label);
        goto out;
    }
    comp = xmalloc(m->csize ? m->csize : 1);
    if (s_read_exact(src, comp, m->csize, data_off)) {
        err_set(err, ERR_VERIFY, "%s: METADATA runs past the end of the file",
                label);
        goto out;
    }
    size_t n = m->csize;
    if (m->method == 8) {
        unsigned char *raw =
            pk_wheel_inflate(comp, m->csize, PK_WHEEL_METADATA_MAX, &n);
        if (!raw) {
            err_set(err, ERR_VERIFY, "%s: METADATA does not inflate", label);
            goto out;
        }
        free(comp);
        comp = raw;
    }
    if (n != m->usize || pk_wheel_crc32(comp, n) != m->crc) {
        err_set(err, ERR_VERIFY, "%s: METADATA fails its CRC-32 check", label);
        goto out;
    }
    out = xmalloc(n + 1);
    memcpy(out, comp, n);
    out[n] = '\0';
    *len = n;
out:
    free(comp);
    return out;
}

char *
pk_wheel_metadata(const pk_wheel_src_t *src, const char *dist_prefix,
                  const char *label, size_t *len, err_t *err)
{
    unsigned char *tail = NULL, *cdir = NULL;
    char *result = NULL;
    size_t plen = dist_prefix ? strlen(dist_prefix) : 0;
    if (src->size < EOCD_MIN) {
        err_set(err, ERR_VERIFY, "%s: not a zip archive (too short)", label);
        goto out;
    }
    /* The EOCD record: its 22 bytes plus a comment of up to 65535. */
    size_t tlen =
        src->size < 65535 + EOCD_MIN ? (size_t)src->size : 65535 + EOCD_MIN;
    tail = xmalloc(tlen);
    if (s_read_exact(src, tail, tlen, src->size - tlen)) {
        err_set(err, ERR_VERIFY, "%s: cannot read: %s", label,
                errno ? strerror(errno) : "short read");
        goto out;
    }
    const unsigned char *eocd = NULL;
    for (size_t i = tlen - EOCD_MIN + 1; i-- > 0;)
        if (s_le32(tail + i) == EOCD_SIG &&
            i + EOCD_MIN + s_le16(tail + i + 20) == tlen) {
            eocd = tail + i;
            break;
        }
    if (!eocd) {
        err_set(err, ERR_VERIFY, "%s: not a zip archive (no end record)",
                label);
        goto out;
    }
    uint16_t entries = s_le16(eocd + 10);
    uint32_t cd_size = s_le32(eocd + 12), cd_off = s_le32(eocd + 16);
    if (entries == 0xffff || cd_size == 0xffffffffu || cd_off == 0xffffffffu) {
        err_set(err, ERR_VERIFY,
                "%s: ZIP64 archives are not supported for reading METADATA",
                label);
        goto out;
    }
    if (cd_size > CDIR_MAX || (uint64_t)cd_off + cd_size > src->size) {
        err_set(err, ERR_VERIFY, "%s: central directory out of bounds", label);
        goto out;
    }
    cdir = xmalloc(cd_size ? cd_size : 1);
    if (s_read_exact(src, cdir, cd_size, cd_off)) {
        err_set(err, ERR_VERIFY, "%s: cannot read the central directory",
                label);
        goto out;
    }
    member_t best = {0}, first = {0};
    bool have_best = false, have_first = false;
    size_t pos = 0;
    for (unsigned i = 0; i < entries; i++) {
        if (cd_size - pos < CDIR_MIN || s_le32(cdir + pos) != CDIR_SIG) {
            err_set(err, ERR_VERIFY, "%s: malformed central directory", label);
            goto out;
        }
        const unsigned char *e = cdir + pos;
        size_t nlen = s_le16(e + 28), xlen = s_le16(e + 30),
               clen = s_le16(e + 32);
        if (cd_size - pos - CDIR_MIN < nlen + xlen + clen) {
            err_set(err, ERR_VERIFY, "%s: malformed central directory", label);
            goto out;
        }
        size_t dlen = s_metadata_dir(e + CDIR_MIN, nlen);
        if (dlen) {
            member_t m = {.flags = s_le16(e + 8),
                          .method = s_le16(e + 10),
                          .crc = s_le32(e + 16),
                          .csize = s_le32(e + 20),
                          .usize = s_le32(e + 24),
                          .local_off = s_le32(e + 42)};
            if (!have_first) {
                first = m;
                have_first = true;
            }
            if (!have_best && plen && dlen >= plen &&
                strncasecmp((const char *)e + CDIR_MIN, dist_prefix, plen) ==
                    0) {
                best = m;
                have_best = true;
            }
        }
        pos += CDIR_MIN + nlen + xlen + clen;
    }
    if (!have_first) {
        err_set(err, ERR_VERIFY,
                "%s: no *.dist-info/METADATA in the wheel; it is not a valid "
                "wheel",
                label);
        goto out;
    }
    result = s_read_member(src, have_best ? &best : &first, label, len, err);
out:
    free(tail);
    free(cdir);
    return result;
}

static long
s_fd_read_at(void *arg, void *buf, size_t len, uint64_t off)
{
    int fd = *(int *)arg;
    size_t done = 0;
    while (done < len) {
        ssize_t n =
            pread(fd, (char *)buf + done, len - done, (off_t)(off + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        done += (size_t)n;
    }
    return (long)done;
}

char *
pk_wheel_metadata_fd(int fd, uint64_t size, const char *dist_prefix,
                     const char *label, size_t *len, err_t *err)
{
    pk_wheel_src_t src = {.read_at = s_fd_read_at, .arg = &fd, .size = size};
    errno = 0;
    return pk_wheel_metadata(&src, dist_prefix, label, len, err);
}

typedef struct mem_src {
    const unsigned char *data; /* borrowed */
    size_t size;               /* bytes */
} mem_src_t;

static long
s_mem_read_at(void *arg, void *buf, size_t len, uint64_t off)
{
    const mem_src_t *m = arg;
    if (off >= m->size)
        return 0;
    size_t n = m->size - (size_t)off < len ? m->size - (size_t)off : len;
    memcpy(buf, m->data + off, n);
    return (long)n;
}

char *
pk_wheel_metadata_mem(const void *data, size_t size, const char *dist_prefix,
                      const char *label, size_t *len, err_t *err)
{
    mem_src_t m = {.data = data, .size = size};
    pk_wheel_src_t src = {.read_at = s_mem_read_at, .arg = &m, .size = size};
    return pk_wheel_metadata(&src, dist_prefix, label, len, err);
}

/* --- METADATA headers ----------------------------------------------------- */

static char *
s_trim(const char *s, size_t n)
{
    while (n && isspace((unsigned char)*s))
        s++, n--;
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    return xstrndup(s, n);
}

char **
pk_wheel_requires_dist(const char *metadata)
{
    static const char key[] = "requires-dist:";
    char **v = xcalloc(1, sizeof *v);
    size_t n = 0;
    const char *p = metadata;
    while (*p) {
        const char *eol = strchr(p, '\n');
        size_t l = eol ? (size_t)(eol - p) : strlen(p);
        size_t content = l && p[l - 1] == '\r' ? l - 1 : l;
        if (content == 0)
            break; /* the body starts */
        if (strncasecmp(p, key, sizeof key - 1) == 0) {
            /* Join folded continuation lines (leading whitespace). */
            char *value =
                s_trim(p + sizeof key - 1, content - (sizeof key - 1));
            const char *q = eol ? eol + 1 : p + l;
            while (*q == ' ' || *q == '\t') {
                const char *e2 = strchr(q, '\n');
                size_t l2 = e2 ? (size_t)(e2 - q) : strlen(q);
                char *more = s_trim(q, l2);
                char *joined = xasprintf("%s %s", value, more);
                free(value);
                free(more);
                value = joined;
                q = e2 ? e2 + 1 : q + l2;
            }
            strv_push(&v, &n, value);
            p = q;
            continue;
        }
        p = eol ? eol + 1 : p + l;
    }
    return v;
}
