/* ZMTP 3.0 as bytes for a NULL-mechanism SUB peer (see kb_zmtp.h; the
 * wire is RFC 23/ZMTP and RFC 37/ZMTP-NULL of rfc.zeromq.org). */
#include "kb_zmtp.h"

#include "common/check.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define GREETING_LEN 64
#define FLAG_MORE 0x01
#define FLAG_LONG 0x02
#define FLAG_COMMAND 0x04
/* The peer's READY names a socket type and perhaps an identity; anything
 * longer is not a Jupyter kernel's iopub. */
#define HANDSHAKE_MAX 4096

/* Greeting: signature (0xFF, 8 padding bytes ending in 1 as libzmq sends
 * them, 0x7F), version 3.0, mechanism "NULL" padded to 20 bytes, as-server
 * 0, 31 bytes of filler. Then READY with Socket-Type=SUB. */
/* clang-format off */
static const uint8_t s_hello[KB_ZMTP_HELLO_LEN] = {
    0xFF, 0, 0, 0, 0, 0, 0, 0, 1, 0x7F, 3, 0, 'N', 'U', 'L', 'L',
    [64] = FLAG_COMMAND, 25, 5, 'R', 'E', 'A', 'D', 'Y', 11, 'S', 'o', 'c',
    'k', 'e', 't', '-', 'T', 'y', 'p', 'e', 0, 0, 0, 3, 'S', 'U', 'B'};
/* clang-format on */

/* The ZMTP 3.0 subscription: a one-frame message of 0x01 and the topic,
 * here empty (everything). */
static const uint8_t s_subscribe[KB_ZMTP_SUBSCRIBE_LEN] = {0, 1, 1};

const uint8_t *
kb_zmtp_hello(void)
{
    return s_hello;
}

const uint8_t *
kb_zmtp_subscribe(void)
{
    return s_subscribe;
}

void
kb_zmtp_init(kb_zmtp_t *z, size_t max_bytes, size_t max_frames)
{
    memset(z, 0, sizeof *z);
    z->max_bytes = max_bytes;
    z->max_frames = max_frames;
}

__attribute__((format(printf, 2, 3))) static kb_zmtp_result_t
s_broken(kb_zmtp_t *z, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(z->why, sizeof z->why, fmt, ap);
    va_end(ap);
    for (char *p = z->why; *p; p++) /* the peer chose some of these bytes */
        if (!isprint((unsigned char)*p))
            *p = '?';
    z->state = KB_ZMTP_BROKEN;
    return KB_ZMTP_ERROR;
}

static uint64_t
s_be(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

/* One frame header at data[0..len): 1 and its flags, body size and header
 * length; 0 when more bytes are needed; -1 (z broken) when invalid. */
static int
s_header(kb_zmtp_t *z, const uint8_t *data, size_t len, uint8_t *flags,
         uint64_t *size, size_t *hlen)
{
    if (len < 1)
        return 0;
    *flags = data[0];
    if (*flags & ~(FLAG_MORE | FLAG_LONG | FLAG_COMMAND)) {
        s_broken(z, "a frame with reserved flag bits set (0x%02x)", *flags);
        return -1;
    }
    if ((*flags & FLAG_COMMAND) && (*flags & FLAG_MORE)) {
        s_broken(z, "a command frame marked as continued");
        return -1;
    }
    *hlen = (*flags & FLAG_LONG) ? 9 : 2;
    if (len < *hlen)
        return 0;
    *size = s_be(data + 1, *hlen - 1);
    if (*size > INT64_MAX) {
        s_broken(z, "a frame size of more than 2^63 bytes");
        return -1;
    }
    return 1;
}

/* The peer's greeting, of which the first `have` bytes (at most 64) are
 * here. Each part is judged as soon as all its bytes are, as libzmq does:
 * a peer that is not ZMTP 3 with NULL (an HTTP client, a ZMTP 2.0 peer)
 * may send less than 64 bytes and then wait for more from us, and must be
 * refused then, not waited on. The parts are checked in wire order, so the
 * refusal does not depend on how the bytes were split. */
static kb_zmtp_result_t
s_greeting(kb_zmtp_t *z, const uint8_t *g, size_t have)
{
    static const uint8_t null_mech[20] = "NULL";
    if ((have > 0 && g[0] != 0xFF) || (have > 9 && g[9] != 0x7F))
        return s_broken(z, "the peer does not speak ZMTP (bad signature)");
    if (have > 11 && g[10] < 3)
        return s_broken(z, "the peer speaks ZMTP %u.%u; 3.0 or later needed",
                        g[10], g[11]);
    if (have >= 12 + sizeof null_mech &&
        memcmp(g + 12, null_mech, sizeof null_mech) != 0)
        return s_broken(z,
                        "the peer asks for the %.20s security mechanism; "
                        "Jupyter kernels use NULL",
                        (const char *)(g + 12));
    if (have == GREETING_LEN)
        z->state = KB_ZMTP_HANDSHAKE;
    return KB_ZMTP_NEED;
}

/* The body of the peer's first command: READY with a PUB-side Socket-Type
 * (or ERROR with its reason). */
static kb_zmtp_result_t
s_ready(kb_zmtp_t *z, const uint8_t *b, size_t len)
{
    size_t nl = len ? b[0] : 0;
    if (!len || nl + 1 > len)
        return s_broken(z, "an empty or truncated handshake command");
    if (nl == 5 && !memcmp(b + 1, "ERROR", 5)) {
        size_t rl = len > 6 ? b[6] : 0;
        if (rl > len - 7)
            rl = len > 7 ? len - 7 : 0;
        return s_broken(z, "the peer refused the handshake: %.*s", (int)rl,
                        (const char *)(b + 7));
    }
    if (nl != 5 || memcmp(b + 1, "READY", 5))
        return s_broken(z, "the handshake began with a %.*s command, not READY",
                        (int)nl, (const char *)(b + 1));
    bool typed = false;
    for (size_t at = 6; at < len;) {
        size_t pn = b[at];
        if (pn == 0 || at + 1 + pn + 4 > len)
            return s_broken(z, "a truncated READY property");
        const char *name = (const char *)(b + at + 1);
        uint64_t vl = s_be(b + at + 1 + pn, 4);
        const char *value = (const char *)(b + at + 1 + pn + 4);
        if (vl > len - (at + 1 + pn + 4))
            return s_broken(z, "a READY property value past its command");
        if (pn == 11 && !strncasecmp(name, "Socket-Type", 11)) {
            if (!(vl == 3 && !memcmp(value, "PUB", 3)) &&
                !(vl == 4 && !memcmp(value, "XPUB", 4)))
                return s_broken(z,
                                "the peer is a %.*s socket; iopub must be PUB",
                                (int)(vl < 16 ? vl : 16), value);
            typed = true;
        }
        at += 1 + pn + 4 + vl;
    }
    if (!typed)
        return s_broken(z, "the peer's READY names no Socket-Type");
    z->state = KB_ZMTP_OPEN;
    return KB_ZMTP_NEED;
}

/* Skip bytes still due of a dropped frame or an ignored command. */
static void
s_skip(kb_zmtp_t *z, size_t len, size_t *at)
{
    uint64_t k = len - *at < z->skip ? len - *at : z->skip;
    *at += (size_t)k;
    z->skip -= k;
}

/* Past the handshake, from data[*at]: a complete message (its frames), a
 * drop, or NEED with *at left at the message's start. */
static kb_zmtp_result_t
s_message(kb_zmtp_t *z, const uint8_t *data, size_t len, size_t *at,
          kb_frame_t *frames, size_t *n)
{
    size_t pos = *at, total = 0, nf = 0;
    for (;;) {
        uint8_t flags = 0;
        uint64_t size = 0;
        size_t hlen = 0;
        int h = s_header(z, data + pos, len - pos, &flags, &size, &hlen);
        if (h < 0)
            return KB_ZMTP_ERROR;
        if (h == 0)
            return KB_ZMTP_NEED;
        if (flags & FLAG_COMMAND) {
            if (nf)
                return s_broken(z, "a command inside a message");
            *at = pos + hlen; /* e.g. PING: nothing we must answer */
            z->skip = size;
            return KB_ZMTP_NEED;
        }
        /* (the cap may have been lowered since this message began) */
        if (nf == z->max_frames || total > z->max_bytes ||
            size > z->max_bytes - total) {
            *at = pos + hlen;
            z->skip = size;
            z->dropping = flags & FLAG_MORE;
            return KB_ZMTP_DROPPED;
        }
        if (size > len - pos - hlen)
            return KB_ZMTP_NEED;
        frames[nf++] = (kb_frame_t){data + pos + hlen, (size_t)size};
        total += (size_t)size;
        pos += hlen + (size_t)size;
        if (!(flags & FLAG_MORE)) {
            *at = pos;
            *n = nf;
            return KB_ZMTP_MSG;
        }
    }
}

kb_zmtp_result_t
kb_zmtp_decode(kb_zmtp_t *z, const uint8_t *data, size_t len, size_t *used,
               kb_frame_t *frames, size_t *n)
{
    size_t at = 0;
    kb_zmtp_result_t r = KB_ZMTP_NEED;
    *n = 0;
    while (r == KB_ZMTP_NEED) {
        size_t before = at;
        uint8_t flags = 0; /* of the frame at `at`, where one is read */
        uint64_t size = 0;
        size_t hlen = 0;
        int h; /* s_header's answer */
        const uint8_t *p = data + at;
        size_t left = len - at;
        if (z->state == KB_ZMTP_BROKEN) {
            r = KB_ZMTP_ERROR;
        } else if (z->skip) {
            s_skip(z, len, &at);
            if (z->skip)
                break;
        } else if (z->dropping) { /* the next frame of a dropped message */
            if ((h = s_header(z, p, left, &flags, &size, &hlen)) < 0)
                r = KB_ZMTP_ERROR;
            else if (h > 0 && (flags & FLAG_COMMAND))
                r = s_broken(z, "a command inside a message");
            else if (h > 0) {
                at += hlen;
                z->skip = size;
                z->dropping = flags & FLAG_MORE;
            }
        } else if (z->state == KB_ZMTP_GREETING) {
            r = s_greeting(z, p, left < GREETING_LEN ? left : GREETING_LEN);
            if (z->state == KB_ZMTP_HANDSHAKE)
                at += GREETING_LEN;
        } else if (z->state == KB_ZMTP_HANDSHAKE) {
            if ((h = s_header(z, p, left, &flags, &size, &hlen)) < 0)
                r = KB_ZMTP_ERROR;
            else if (h > 0 && !(flags & FLAG_COMMAND))
                r = s_broken(z, "a message before the handshake finished");
            else if (h > 0 && size > HANDSHAKE_MAX)
                r = s_broken(z, "a handshake command of %llu bytes",
                             (unsigned long long)size);
            else if (h > 0 && size <= len - at - hlen) {
                r = s_ready(z, data + at + hlen, (size_t)size);
                at += hlen + (size_t)size;
            }
        } else if (NEVER(z->state != KB_ZMTP_OPEN)) {
            r = s_broken(z, "the decoder is in no known state (%d)",
                         (int)z->state);
        } else {
            r = s_message(z, data, len, &at, frames, n);
        }
        if (r == KB_ZMTP_NEED && at == before)
            break; /* nothing more can be decoded from these bytes */
    }
    *used = at;
    return r;
}
