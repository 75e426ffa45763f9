/* kb_zmtp: the ZMTP 3.0 bytes of an iopub SUB peer. What we send is what
 * libzmq expects; what a PUB sends is decoded the same however the bytes
 * are split; every protocol break a hostile kernel could try is refused
 * with a printable reason; caps drop a message without buffering it. */
#include "../tap.h"

#include "../tools/zmtp_wire.h"
#include "common/buf.h"
#include "kernel-bridge/wire/kb_zmtp.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAXF 8

/* A greeting as libzmq 4.3 sends it (version 3.1), then its READY. */
static void
s_peer_hello(buf_t *b, const char *type)
{
    static const uint8_t g[12] = {0xFF, 0, 0, 0, 0, 0, 0, 0, 1, 0x7F, 3, 1};
    uint8_t rest[52] = "NULL";
    buf_append(b, g, sizeof g);
    buf_append(b, rest, sizeof rest);
    size_t tl = strlen(type);
    uint8_t cmd[64] = {0x04, (uint8_t)(1 + 5 + 1 + 11 + 4 + tl), 5};
    memcpy(cmd + 3, "READY", 5);
    cmd[8] = 11;
    memcpy(cmd + 9, "Socket-Type", 11);
    cmd[20] = cmd[21] = cmd[22] = 0;
    cmd[23] = (uint8_t)tl;
    memcpy(cmd + 24, type, tl);
    buf_append(b, cmd, 24 + tl);
}

/* What decoding a whole stream yields, written as text: "m:a|b;" per
 * message, "d;" per drop, "E:why" at an error. Bytes are handed over
 * `step` at a time (0: all at once), as a socket might deliver them. */
static void
s_run(const buf_t *in, size_t step, size_t max_bytes, buf_t *out)
{
    kb_zmtp_t z;
    kb_zmtp_init(&z, max_bytes, MAXF);
    buf_reset(out);
    size_t fed = 0, start = 0;
    const uint8_t *data = (const uint8_t *)in->data;
    for (;;) {
        size_t avail = step && fed + step < in->len ? fed + step : in->len;
        fed = avail;
        kb_frame_t f[MAXF];
        size_t used = 0, n = 0;
        kb_zmtp_result_t r =
            kb_zmtp_decode(&z, data + start, fed - start, &used, f, &n);
        start += used;
        if (r == KB_ZMTP_MSG) {
            buf_puts(out, "m:");
            for (size_t i = 0; i < n; i++) {
                buf_append(out, f[i].data, f[i].len);
                buf_puts(out, i + 1 < n ? "|" : ";");
            }
        } else if (r == KB_ZMTP_DROPPED) {
            buf_puts(out, "d;");
        } else if (r == KB_ZMTP_ERROR) {
            buf_printf(out, "E:%s", z.why);
            return;
        } else if (fed == in->len) {
            return;
        }
    }
}

/* The stream decodes to `want` whole, byte by byte and 7 at a time. */
static void
s_expect(const buf_t *in, size_t max_bytes, const char *want, const char *what)
{
    buf_t out;
    buf_init(&out, 0);
    size_t steps[] = {0, 1, 7};
    for (size_t i = 0; i < 3; i++) {
        s_run(in, steps[i], max_bytes, &out);
        if (!ok(strcmp(buf_cstr(&out), want) == 0, "%s (%s)", what,
                i == 0   ? "all at once"
                : i == 1 ? "byte by byte"
                         : "7 bytes at a time"))
            diag("got: %s\n#  want: %s", buf_cstr(&out), want);
    }
    buf_release(&out);
}

/* The stream ends in an error whose reason contains `why`. */
static void
s_refused(const buf_t *in, const char *why, const char *what)
{
    buf_t out;
    buf_init(&out, 0);
    s_run(in, 1, 1 << 20, &out);
    const char *got = buf_cstr(&out);
    const char *e = strstr(got, "E:");
    if (!ok(e && strstr(e, why), "refused: %s", what))
        diag("got: %s", got);
    for (const char *p = e ? e : ""; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e) {
            ok(0, "its reason is printable");
            break;
        }
    buf_release(&out);
}

static void
test_hello(void)
{
    const uint8_t *h = kb_zmtp_hello();
    ok(h[0] == 0xFF && h[9] == 0x7F && (h[8] & 1),
       "the greeting starts with the ZMTP signature");
    ok(h[10] == 3 && h[11] == 0, "it asks for ZMTP 3.0");
    ok(!memcmp(h + 12, "NULL\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 20) && h[32] == 0,
       "with the NULL mechanism, as client");
    ok(h[64] == 0x04 && h[65] == KB_ZMTP_HELLO_LEN - 66 &&
           !memcmp(h + 66, "\5READY\13Socket-Type\0\0\0\3SUB", 25),
       "then READY names a SUB socket, and that is all");
    const uint8_t *s = kb_zmtp_subscribe();
    ok(s[0] == 0 && s[1] == 1 && s[2] == 1,
       "the subscription is one frame: 0x01 and an empty topic");
}

static void
test_stream(void)
{
    buf_t in;
    buf_init(&in, 0);
    s_peer_hello(&in, "PUB");
    zmtp_frame(&in, 1, "hi", 2);
    zmtp_frame(&in, 0, "there", 5);
    s_expect(&in, 1 << 20, "m:hi|there;", "a two-frame message after READY");

    char big[300];
    memset(big, 'x', sizeof big);
    zmtp_frame(&in, 0x04, "\4PING\0\0", 7); /* a heartbeat: skipped */
    zmtp_frame(&in, 0x02, big, sizeof big);
    zmtp_frame(&in, 0x02, "", 0);
    buf_t want;
    buf_init(&want, 0);
    buf_puts(&want, "m:hi|there;m:");
    buf_append(&want, big, sizeof big);
    buf_puts(&want, ";m:;");
    s_expect(&in, 1 << 20, buf_cstr(&want),
             "a long-form frame, an empty one, a command between messages");

    buf_reset(&in);
    s_peer_hello(&in, "XPUB");
    zmtp_frame(&in, 0, "ok", 2);
    s_expect(&in, 1 << 20, "m:ok;", "an XPUB peer (ipykernel's iopub) too");
    buf_release(&want);
    buf_release(&in);
}

static void
test_caps(void)
{
    buf_t in;
    buf_init(&in, 0);
    s_peer_hello(&in, "PUB");
    char big[200];
    memset(big, 'y', sizeof big);
    zmtp_frame(&in, 1, "a", 1);
    zmtp_frame(&in, 0x03, big, sizeof big); /* passes 100 bytes in all */
    zmtp_frame(&in, 1, big, sizeof big);
    zmtp_frame(&in, 0, "tail", 4);
    zmtp_frame(&in, 0, "next", 4);
    s_expect(&in, 100, "d;m:next;",
             "a message over the byte cap is dropped, the next one kept");

    buf_reset(&in);
    s_peer_hello(&in, "PUB");
    for (int i = 0; i < MAXF + 3; i++)
        zmtp_frame(&in, i < MAXF + 2 ? 1 : 0, "f", 1);
    zmtp_frame(&in, 0, "next", 4);
    s_expect(&in, 1 << 20, "d;m:next;",
             "a message of too many frames is dropped, the next one kept");

    /* A frame announcing 2^40 bytes is dropped as its header arrives: the
     * decoder consumes (skips) what comes, never asking to buffer it. */
    buf_reset(&in);
    s_peer_hello(&in, "PUB");
    uint8_t h[9] = {0x02, 0, 0, 1, 0, 0, 0, 0, 0};
    buf_append(&in, h, sizeof h);
    kb_zmtp_t z;
    kb_zmtp_init(&z, 1 << 20, MAXF);
    kb_frame_t f[MAXF];
    size_t used = 0, n = 0;
    kb_zmtp_result_t r =
        kb_zmtp_decode(&z, (const uint8_t *)in.data, in.len, &used, f, &n);
    ok(r == KB_ZMTP_DROPPED && used == in.len,
       "a 1 TiB frame is dropped at its header");
    static uint8_t junk[1 << 16];
    size_t skipped = 0;
    for (int i = 0; i < 64; i++) {
        r = kb_zmtp_decode(&z, junk, sizeof junk, &used, f, &n);
        skipped += used;
    }
    ok(r == KB_ZMTP_NEED && skipped == 64 * sizeof junk,
       "what follows it is consumed as it arrives (4 MiB skipped, none kept)");
    buf_release(&in);
}

static void
test_refusals(void)
{
    buf_t in;
    buf_init(&in, 0);
    uint8_t g[64] = {0xFF, 0,    0, 0, 0,   0,   0,   0,
                     1,    0x7F, 3, 0, 'N', 'U', 'L', 'L'};

    buf_append(&in,
               "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
               "0123456789012345678901234567890123456789",
               64);
    s_refused(&in, "does not speak ZMTP", "an HTTP request for a greeting");

    buf_reset(&in);
    g[10] = 2;
    buf_append(&in, g, 64);
    s_refused(&in, "speaks ZMTP 2.0", "a ZMTP 2 peer");

    /* Less than a greeting, then silence: refused on the bytes there, not
     * waited on (these peers wait for more of ours before they go on). */
    buf_reset(&in);
    buf_puts(&in, "GET / HTTP/1.1\r\n\r\n");
    s_refused(&in, "does not speak ZMTP", "a short HTTP request");
    static const uint8_t zmtp2[14] = {0xFF, 0, 0,    0, 0, 0, 0,
                                      0,    1, 0x7F, 1, 1, 0, 0};
    buf_reset(&in);
    buf_append(&in, zmtp2, sizeof zmtp2);
    s_refused(&in, "3.0 or later needed",
              "a ZMTP 2.0 greeting (signature, revision, type, identity)");
    buf_reset(&in);
    g[10] = 3;
    memcpy(g + 12, "CURVE\0\0\0", 8);
    buf_append(&in, g, 32);
    s_refused(&in, "CURVE security mechanism",
              "a CURVE greeting up to its mechanism");

    buf_reset(&in);
    g[10] = 3;
    memcpy(g + 12, "CURVE\0\0\0", 8);
    buf_append(&in, g, 64);
    s_refused(&in, "CURVE security mechanism", "a CURVE peer");

    memcpy(g + 12, "NULL\0\0\0\0", 8);
    buf_reset(&in);
    buf_append(&in, g, 64);
    zmtp_frame(&in, 0x04, "\5ERROR\7go\naway", 14);
    s_refused(&in, "refused the handshake: go?away",
              "an ERROR command (its reason kept, made printable)");

    buf_reset(&in);
    buf_append(&in, g, 64);
    zmtp_frame(&in, 0x04, "\5HELLO", 6);
    s_refused(&in, "HELLO command, not READY", "a handshake without READY");

    buf_reset(&in);
    buf_append(&in, g, 64);
    zmtp_frame(&in, 0, "data", 4);
    s_refused(&in, "message before the handshake",
              "a message before the handshake");

    buf_reset(&in);
    s_peer_hello(&in, "ROUTER");
    s_refused(&in, "ROUTER socket", "a peer that is not a PUB");

    buf_reset(&in);
    buf_append(&in, g, 64);
    zmtp_frame(&in, 0x04, "\5READY\4Name\0\0\0\1x", 16);
    s_refused(&in, "names no Socket-Type", "a READY without a socket type");

    buf_reset(&in);
    buf_append(&in, g, 64);
    zmtp_frame(&in, 0x04, "\5READY\13Socket-Type\0\0\1\0PUB", 25);
    s_refused(&in, "past its command", "a property longer than its command");

    buf_reset(&in);
    buf_append(&in, g, 64);
    zmtp_frame(&in, 0x04, "\5READY\0", 7);
    s_refused(&in, "truncated READY property", "an empty property name");

    buf_reset(&in);
    buf_append(&in, g, 64);
    uint8_t hc[9] = {0x06, 0, 0, 0, 0, 0, 1, 0, 0};
    buf_append(&in, hc, 9);
    s_refused(&in, "handshake command of 65536 bytes",
              "a handshake command too long to be a READY");

    buf_reset(&in);
    s_peer_hello(&in, "PUB");
    zmtp_frame(&in, 0x08, "x", 1);
    s_refused(&in, "reserved flag bits", "reserved flag bits");

    buf_reset(&in);
    s_peer_hello(&in, "PUB");
    zmtp_frame(&in, 0x05, "x", 1);
    s_refused(&in, "command frame marked as continued", "a continued command");

    buf_reset(&in);
    s_peer_hello(&in, "PUB");
    zmtp_frame(&in, 1, "a", 1);
    zmtp_frame(&in, 0x04, "\4PING", 5);
    s_refused(&in, "command inside a message", "a command inside a message");

    buf_reset(&in);
    s_peer_hello(&in, "PUB");
    uint8_t hh[9] = {0x02, 0x80, 0, 0, 0, 0, 0, 0, 1};
    buf_append(&in, hh, 9);
    s_refused(&in, "more than 2^63", "a frame size past 2^63");
    buf_release(&in);
}

int
main(void)
{
    test_hello();
    test_stream();
    test_caps();
    test_refusals();
    return done_testing();
}
