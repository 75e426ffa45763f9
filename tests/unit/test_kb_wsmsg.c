/* kb_wsmsg: the frames of a Jupyter Server's kernel WebSocket, both
 * framings, and what a hostile server cannot make it do. */
#include "../tap.h"

#include "kernel-bridge/wire/kb_wsmsg.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char s_hdr[] =
    "{\"msg_id\":\"m1\",\"msg_type\":\"stream\",\"session\":\"s\","
    "\"username\":\"u\",\"date\":\"2024-01-01T00:00:00Z\",\"version\":\"5.3\"}";
static const char s_parent[] = "{\"msg_id\":\"p1\"}";
static const char s_content[] = "{\"name\":\"stdout\",\"text\":\"hi\\n\"}";

static void
s_le64(buf_t *b, uint64_t v)
{
    uint8_t w[8];
    for (int i = 0; i < 8; i++, v >>= 8)
        w[i] = (uint8_t)v;
    buf_append(b, w, 8);
}

/* A v1 frame exactly as jupyter_server's serialize_msg_to_ws_v1 builds
 * it: count, offsets (from the frame start), channel, parts. */
static void
s_v1(buf_t *b, const char *channel, const char *const *parts, size_t n)
{
    uint64_t off = 8 * (1 + 2 + n);
    s_le64(b, 2 + n);
    s_le64(b, off);
    off += strlen(channel);
    s_le64(b, off);
    for (size_t i = 0; i < n; i++) {
        off += strlen(parts[i]);
        s_le64(b, off);
    }
    buf_puts(b, channel);
    for (size_t i = 0; i < n; i++)
        buf_puts(b, parts[i]);
}

static const char *const s_parts[] = {s_hdr, s_parent, "{}", s_content, "BUF"};

static kb_msg_t *
s_decode(const buf_t *b, bool binary, kb_ws_proto_t p,
         const kb_frames_limits_t *lim, kb_wire_stats_t *st, kb_channel_t *ch)
{
    err_t err;
    return kb_ws_decode(b->data, b->len, binary, p, lim, st, ch, &err);
}

static void
s_set_le64(buf_t *b, size_t at, uint64_t v)
{
    for (int i = 0; i < 8; i++, v >>= 8)
        b->data[at + i] = (char)(uint8_t)v;
}

int
main(void)
{
    buf_t b;
    kb_wire_stats_t st = {0};
    kb_channel_t ch = KB_HB;

    buf_init(&b, 0);
    s_v1(&b, "iopub", s_parts, 5);
    kb_msg_t *m = s_decode(&b, true, KB_WS_V1, NULL, &st, &ch);
    ok(m && ch == KB_IOPUB, "a v1 frame as jupyter_server builds it decodes");
    is_str(m ? kb_msg_type(m) : NULL, "stream", "its header is kept");
    is_str(m ? kb_msg_parent_id(m) : NULL, "p1", "its parent is kept");
    ok(m && kb_msg_buffer_count(m) == 1 && kb_msg_buffer(m, 0)->len == 3 &&
           !memcmp(kb_msg_buffer(m, 0)->data, "BUF", 3),
       "its binary buffer is kept");

    buf_t enc;
    buf_init(&enc, 0);
    bool bin = false;
    err_t err;
    kb_channel_t ch2 = KB_HB;
    ok(m && kb_ws_encode(m, KB_SHELL, KB_WS_V1, &enc, &bin, &err) == 0 && bin,
       "a message encodes as a binary v1 frame");
    kb_msg_t *m2 = s_decode(&enc, bin, KB_WS_V1, NULL, NULL, &ch2);
    ok(m2 && ch2 == KB_SHELL &&
           json_equal(kb_msg_header(m), kb_msg_header(m2)) &&
           kb_msg_buffer_count(m2) == 1,
       "what we encode decodes to the same message on the same channel");
    kb_msg_destroy(&m2);
    buf_reset(&enc);
    ok(m && kb_ws_encode(m, KB_HB, KB_WS_V1, &enc, &bin, &err) != 0,
       "nothing is sent on the heartbeat channel over a WebSocket");
    buf_reset(&enc);
    ok(m && kb_ws_encode(m, KB_STDIN, KB_WS_LEGACY, &enc, &bin, &err) == 0 &&
           bin,
       "legacy framing sends a message with buffers as a binary frame");
    m2 = s_decode(&enc, bin, KB_WS_LEGACY, NULL, NULL, &ch2);
    ok(m2 && ch2 == KB_STDIN && kb_msg_buffer_count(m2) == 1,
       "... which decodes with its channel and buffer");
    kb_msg_destroy(&m2);
    kb_msg_destroy(&m);

    /* Hostile offsets. */
    size_t good_len = b.len;
    char *good = malloc(good_len);
    memcpy(good, b.data, good_len);
    s_set_le64(&b, 8 * 3, (uint64_t)1 << 62);
    memset(&st, 0, sizeof st);
    m = s_decode(&b, true, KB_WS_V1, NULL, &st, &ch);
    ok(!m && st.malformed == 1, "an offset past the frame is refused");
    memcpy(b.data, good, good_len);
    s_set_le64(&b, 8 * 3, 8 * 2); /* before the offset table ends */
    m = s_decode(&b, true, KB_WS_V1, NULL, &st, &ch);
    ok(!m && st.malformed == 2, "an offset into the offset table is refused");
    memcpy(b.data, good, good_len);
    s_set_le64(&b, 0, (uint64_t)-1);
    m = s_decode(&b, true, KB_WS_V1, NULL, &st, &ch);
    ok(!m && st.malformed == 3, "a count of 2^64-1 offsets is refused");
    memcpy(b.data, good, good_len);
    s_set_le64(&b, 0, 200);
    m = s_decode(&b, true, KB_WS_V1, NULL, &st, &ch);
    ok(!m && st.malformed == 4,
       "more parts than a ZeroMQ message may have are refused");
    memcpy(b.data, good, good_len);
    buf_t trunc = b;
    trunc.len = 20;
    m = s_decode(&trunc, true, KB_WS_V1, NULL, &st, &ch);
    ok(!m && st.malformed == 5, "a frame cut inside its table is refused");
    memcpy(b.data, good, good_len);
    m = s_decode(&b, false, KB_WS_V1, NULL, &st, &ch);
    ok(!m && st.malformed == 6, "a text frame on the v1 protocol is refused");
    free(good);

    buf_reset(&b);
    s_v1(&b, "evil", s_parts, 4);
    m = s_decode(&b, true, KB_WS_V1, NULL, &st, &ch);
    ok(!m && st.bad_channel == 1 && st.malformed == 6,
       "a frame for an unknown channel is refused, counted as such");
    ok(kb_ws_channel(b.data, b.len, true, KB_WS_V1, &st, &ch, &err) != 0 &&
           st.bad_channel == 2,
       "... also when only its channel is asked for");
    buf_reset(&b);
    s_v1(&b, "hb", s_parts, 4);
    ok(kb_ws_channel(b.data, b.len, true, KB_WS_V1, NULL, &ch, &err) != 0,
       "a frame for the heartbeat channel is refused");

    buf_reset(&b);
    s_v1(&b, "iopub", s_parts, 4);
    kb_frames_limits_t lim = {.parent_id = "someone-else"};
    m = s_decode(&b, true, KB_WS_V1, &lim, &st, &ch);
    ok(!m && st.foreign == 1,
       "a message for another parent is dropped before its JSON is parsed");
    lim = (kb_frames_limits_t){.max_bytes = 64};
    m = s_decode(&b, true, KB_WS_V1, &lim, &st, &ch);
    ok(!m && st.oversized == 1 && st.malformed == 6,
       "a frame over the size cap is refused, counted as oversized");
    char why[128];
    ok(kb_wire_stats_refused(&(kb_wire_stats_t){0}, &st, why, sizeof why) ==
               9 &&
           !strcmp(why, "oversized: 1, malformed: 6, unknown channel: 2"),
       "the refused messages are named by kind (not the foreign one): %s", why);

    /* Legacy JSON. */
    buf_reset(&b);
    buf_printf(&b,
               "{\"header\":%s,\"parent_header\":%s,\"metadata\":{},"
               "\"content\":%s,\"channel\":\"iopub\",\"buffers\":[]}",
               s_hdr, s_parent, s_content);
    m = s_decode(&b, false, KB_WS_LEGACY, NULL, &st, &ch);
    ok(m && ch == KB_IOPUB && !strcmp(kb_msg_type(m), "stream"),
       "a legacy JSON text frame decodes");
    kb_msg_destroy(&m);
    buf_reset(&b);
    buf_printf(&b, "{\"header\":%s,\"parent_header\":{},\"content\":{}}",
               s_hdr);
    m = s_decode(&b, false, KB_WS_LEGACY, NULL, &st, &ch);
    ok(!m && st.bad_channel == 3,
       "a legacy frame without a channel is refused");
    buf_reset(&b);
    buf_puts(&b, "{\"channel\":\"iopub\",\"header\":");
    for (int i = 0; i < 1000; i++)
        buf_puts(&b, "[");
    for (int i = 0; i < 1000; i++)
        buf_puts(&b, "]");
    buf_puts(&b, "}");
    m = s_decode(&b, false, KB_WS_LEGACY, NULL, &st, &ch);
    ok(!m && st.malformed == 7, "JSON nested 1000 deep is refused unparsed");

    buf_release(&b);
    buf_release(&enc);
    return done_testing();
}
