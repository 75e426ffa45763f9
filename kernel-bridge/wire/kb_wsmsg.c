#include "kb_wsmsg.h"

#include "common/jsonlim.h"
#include "common/xalloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Channels a server may name, indexed by kb_channel_t. */
static const char *const s_names[] = {[KB_SHELL] = "shell",
                                      [KB_IOPUB] = "iopub",
                                      [KB_STDIN] = "stdin",
                                      [KB_CONTROL] = "control"};

int
kb_ws_channel_from_name(const char *name, size_t len)
{
    for (int ch = 0; ch < KB_HB; ch++)
        if (strlen(s_names[ch]) == len && memcmp(s_names[ch], name, len) == 0)
            return ch;
    return -1;
}

static uint64_t
s_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint32_t
s_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
           p[3];
}

static void
s_put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++, v >>= 8)
        p[i] = (uint8_t)v;
}

static void
s_put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static kb_msg_t *
s_refuse(uint64_t *counter, err_t *err, const char *why)
{
    if (counter)
        (*counter)++;
    err_set(err, ERR_KERNEL, "dropped a message from the server: %s", why);
    return NULL;
}

/* The views of a v1 frame: views[0] the channel, then the parts. Every
 * offset is checked before use. Returns the number of views, or 0. */
static size_t
s_v1_split(const uint8_t *d, size_t len, kb_frame_t *views, size_t max,
           const char **why)
{
    if (len < 8) {
        *why = "a v1 frame shorter than its offset count";
        return 0;
    }
    uint64_t n = s_le64(d);
    /* channel start and end, then the end of each of >= 4 parts */
    if (n < 6 || n > max + 1) {
        *why = "a v1 frame with a bad number of offsets";
        return 0;
    }
    if ((n + 1) * 8 > len) {
        *why = "a v1 offset table longer than its frame";
        return 0;
    }
    uint64_t prev = (n + 1) * 8;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t off = s_le64(d + 8 * (i + 1));
        if (off < prev || off > len) {
            *why = "a v1 offset outside its frame or out of order";
            return 0;
        }
        if (i > 0)
            views[i - 1] = (kb_frame_t){d + prev, off - prev};
        prev = off;
    }
    if (prev != len) {
        *why = "a v1 frame with bytes after its last part";
        return 0;
    }
    return (size_t)n - 1;
}

int
kb_ws_channel(const void *data, size_t len, bool binary, kb_ws_proto_t proto,
              kb_wire_stats_t *stats, kb_channel_t *ch, err_t *err)
{
    if (proto == KB_WS_V1 && binary) {
        kb_frame_t views[KB_WS_MAX_PARTS + 1];
        const char *why = NULL;
        if (!s_v1_split(data, len, views, KB_WS_MAX_PARTS + 1, &why)) {
            s_refuse(stats ? &stats->malformed : NULL, err, why);
            return -1;
        }
        int c = kb_ws_channel_from_name(views[0].data, views[0].len);
        if (c < 0) {
            s_refuse(stats ? &stats->bad_channel : NULL, err,
                     "unknown channel");
            return -1;
        }
        *ch = (kb_channel_t)c;
        return 0;
    }
    /* Legacy: the channel is a member of the JSON object (the first part
     * of a binary frame), read off its top level when that is plain. */
    const char *json = data;
    size_t jlen = len;
    if (binary) {
        const uint8_t *d = data;
        uint32_t n = len >= 8 ? s_be32(d) : 0;
        size_t o0 = n ? s_be32(d + 4) : 0,
               o1 = n > 1 && len >= 12 ? s_be32(d + 8) : len;
        if (n < 1 || n > KB_WS_MAX_PARTS || 4 + 4 * (size_t)n > len ||
            o0 > o1 || o1 > len)
            json = NULL; /* kb_ws_decode says what is wrong */
        else
            json = (const char *)d + o0, jlen = o1 - o0;
    }
    static const char *const key[1] = {"channel"};
    const char *name;
    size_t nlen = 0;
    if (json && kb_wire_scan_object(json, jlen, key, 1, &name, &nlen) && name) {
        int c = kb_ws_channel_from_name(name, nlen);
        if (c < 0) {
            s_refuse(stats ? &stats->bad_channel : NULL, err,
                     "unknown channel");
            return -1;
        }
        *ch = (kb_channel_t)c;
        return 0;
    }
    kb_wire_stats_t seen = {0};
    kb_msg_t *m = kb_ws_decode(data, len, binary, proto, NULL, &seen, ch, err);
    seen.accepted = 0; /* counted when the frame is decoded for use */
    if (stats)
        kb_wire_stats_add(stats, &seen);
    if (!m)
        return -1;
    kb_msg_destroy(&m);
    return 0;
}

/* A message the receiver would ignore, judged from raw bytes before any
 * JSON is parsed: `parent` holds the parent_header (or, for legacy
 * frames, the whole JSON object), `header` the header (or the same). */
static bool
s_foreign(const kb_frames_limits_t *lim, const kb_frame_t *header,
          const kb_frame_t *parent)
{
    return lim && ((lim->status_only &&
                    !memmem(header->data, header->len, "status", 6)) ||
                   (lim->parent_id &&
                    !memmem(parent->data, parent->len, lim->parent_id,
                            strlen(lim->parent_id))));
}

static kb_msg_t *
s_decode_v1(const uint8_t *d, size_t len, const kb_frames_limits_t *lim,
            kb_wire_stats_t *stats, kb_channel_t *ch, err_t *err)
{
    uint64_t *malformed = stats ? &stats->malformed : NULL;
    /* views[0] the channel, views[1..] the parts; as kb_wire frames:
     * delimiter, empty signature, parts */
    kb_frame_t views[KB_WS_MAX_PARTS + 1];
    kb_frame_t frames[KB_WS_MAX_PARTS + 2];
    const char *why = NULL;
    size_t n = s_v1_split(d, len, views, KB_WS_MAX_PARTS + 1, &why);
    if (!n)
        return s_refuse(malformed, err, why);
    int c = kb_ws_channel_from_name(views[0].data, views[0].len);
    if (c < 0)
        return s_refuse(stats ? &stats->bad_channel : NULL, err,
                        "unknown channel");
    if (s_foreign(lim, &views[1], &views[2]))
        return s_refuse(stats ? &stats->foreign : NULL, err,
                        "meant for someone else");
    frames[0] = (kb_frame_t){KB_WIRE_DELIM, KB_WIRE_DELIM_LEN};
    frames[1] = (kb_frame_t){"", 0};
    for (size_t i = 1; i < n; i++)
        frames[i + 1] = views[i];
    kb_key_t *none = kb_key_new("", 0);
    kb_wire_limits_t wl = {KB_WIRE_DEFAULT_JSON_BYTES,
                           KB_WIRE_DEFAULT_JSON_DEPTH,
                           lim ? lim->json_allowance : 0};
    kb_msg_t *m = kb_wire_parse(frames, n + 1, none, &wl, stats, err);
    kb_key_destroy(&none);
    if (m)
        *ch = (kb_channel_t)c;
    return m;
}

/* One legacy JSON message (text, or the first part of a binary frame). */
static kb_msg_t *
s_decode_json(const void *d, size_t len, const kb_frames_limits_t *lim,
              kb_wire_stats_t *stats, kb_channel_t *ch, err_t *err)
{
    uint64_t *malformed = stats ? &stats->malformed : NULL;
    kb_frame_t all = {d, len};
    if (s_foreign(lim, &all, &all))
        return s_refuse(stats ? &stats->foreign : NULL, err,
                        "meant for someone else");
    jsonlim_scan_t scan = jsonlim_scan(d, len);
    jsonlim_t jl = {KB_WIRE_DEFAULT_JSON_DEPTH, lim ? lim->json_allowance : 0};
    char why[160];
    if (!jsonlim_fits(&scan, len, &jl, why, sizeof why))
        return s_refuse(malformed, err, why);
    json_error_t jerr;
    json_t *root = json_loadb(d, len, 0, &jerr);
    if (!root)
        return s_refuse(malformed, err, "invalid JSON");
    kb_msg_t *m = NULL;
    json_t *cj = json_object_get(root, "channel");
    int c = json_is_string(cj) ? kb_ws_channel_from_name(json_string_value(cj),
                                                         json_string_length(cj))
                               : -1;
    if (c < 0) {
        s_refuse(stats ? &stats->bad_channel : NULL, err, "unknown channel");
        goto out;
    }
    static const char *const keys[4] = {"header", "parent_header", "metadata",
                                        "content"};
    json_t *parts[4];
    for (int i = 0; i < 4; i++) {
        parts[i] = json_object_get(root, keys[i]);
        if (!parts[i] && i == 2)
            parts[i] = json_object(); /* metadata may be left out */
        else
            json_incref(parts[i]);
    }
    m = kb_msg_from_parts(parts[0], parts[1], parts[2], parts[3]);
    if (!m) {
        s_refuse(malformed, err, "a message part is not an object");
        goto out;
    }
    if (!json_is_string(json_object_get(kb_msg_header(m), "msg_type"))) {
        kb_msg_destroy(&m);
        s_refuse(malformed, err, "header has no msg_type");
        goto out;
    }
    *ch = (kb_channel_t)c;
    if (stats)
        stats->accepted++;
out:
    json_decref(root);
    return m;
}

static kb_msg_t *
s_decode_legacy_binary(const uint8_t *d, size_t len,
                       const kb_frames_limits_t *lim, kb_wire_stats_t *stats,
                       kb_channel_t *ch, err_t *err)
{
    uint64_t *malformed = stats ? &stats->malformed : NULL;
    if (len < 4)
        return s_refuse(malformed, err, "a binary frame without a count");
    uint32_t n = s_be32(d);
    if (n < 1 || n > KB_WS_MAX_PARTS || 4 + 4 * (size_t)n > len)
        return s_refuse(malformed, err, "a binary frame with bad offsets");
    size_t off[KB_WS_MAX_PARTS + 1];
    size_t prev = 4 + 4 * (size_t)n;
    for (uint32_t i = 0; i < n; i++) {
        off[i] = s_be32(d + 4 + 4 * i);
        if (off[i] < prev || off[i] > len)
            return s_refuse(malformed, err,
                            "a binary offset outside its frame or out of "
                            "order");
        prev = off[i];
    }
    off[n] = len;
    kb_msg_t *m =
        s_decode_json(d + off[0], off[1] - off[0], lim, stats, ch, err);
    for (uint32_t i = 1; m && i < n; i++)
        kb_msg_add_buffer(m, d + off[i], off[i + 1] - off[i]);
    return m;
}

kb_msg_t *
kb_ws_decode(const void *data, size_t len, bool binary, kb_ws_proto_t proto,
             const kb_frames_limits_t *lim, kb_wire_stats_t *stats,
             kb_channel_t *ch, err_t *err)
{
    err_clear(err);
    if (lim && lim->max_bytes && len > lim->max_bytes)
        return s_refuse(stats ? &stats->oversized : NULL, err,
                        "a frame larger than the message size cap");
    if (proto == KB_WS_V1) {
        if (!binary)
            return s_refuse(stats ? &stats->malformed : NULL, err,
                            "a text frame on the v1 protocol");
        return s_decode_v1(data, len, lim, stats, ch, err);
    }
    if (binary)
        return s_decode_legacy_binary(data, len, lim, stats, ch, err);
    return s_decode_json(data, len, lim, stats, ch, err);
}

static int
s_encode_v1(const kb_msg_t *msg, kb_channel_t ch, buf_t *out, err_t *err)
{
    json_t *parts[4] = {kb_msg_header(msg), kb_msg_parent_header(msg),
                        kb_msg_metadata(msg), kb_msg_content(msg)};
    char *text[4] = {0};
    size_t nbuf = kb_msg_buffer_count(msg);
    size_t n = 2 + 4 + nbuf; /* offsets */
    int rc = -1;
    for (int i = 0; i < 4; i++)
        if (!(text[i] = json_dumps(parts[i], JSON_COMPACT))) {
            err_set(err, ERR_KERNEL, "cannot encode message part %d", i);
            goto out;
        }
    uint8_t word[8];
    uint64_t off = 8 * (n + 1);
    s_put_le64(word, n);
    rc = buf_append(out, word, 8);
    s_put_le64(word, off);
    rc |= buf_append(out, word, 8);
    off += strlen(s_names[ch]);
    s_put_le64(word, off);
    rc |= buf_append(out, word, 8);
    for (size_t i = 0; i < 4 + nbuf; i++) {
        off += i < 4 ? strlen(text[i]) : kb_msg_buffer(msg, i - 4)->len;
        s_put_le64(word, off);
        rc |= buf_append(out, word, 8);
    }
    rc |= buf_puts(out, s_names[ch]);
    for (int i = 0; i < 4; i++)
        rc |= buf_puts(out, text[i]);
    for (size_t i = 0; i < nbuf; i++)
        rc |= buf_append(out, kb_msg_buffer(msg, i)->data,
                         kb_msg_buffer(msg, i)->len);
    if (rc)
        err_set(err, ERR_KERNEL, "message too large to send");
out:
    for (int i = 0; i < 4; i++)
        free(text[i]);
    return rc ? -1 : 0;
}

static int
s_encode_legacy(const kb_msg_t *msg, kb_channel_t ch, buf_t *out, bool *binary,
                err_t *err)
{
    json_t *root = json_pack(
        "{s:O, s:O, s:O, s:O, s:s, s:[]}", "header", kb_msg_header(msg),
        "parent_header", kb_msg_parent_header(msg), "metadata",
        kb_msg_metadata(msg), "content", kb_msg_content(msg), "channel",
        s_names[ch], "buffers");
    char *text = root ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    if (!text)
        return err_set(err, ERR_KERNEL, "cannot encode a message");
    size_t nbuf = kb_msg_buffer_count(msg);
    int rc = 0;
    *binary = nbuf > 0;
    if (nbuf) {
        uint8_t word[4];
        size_t n = 1 + nbuf;
        size_t off = 4 + 4 * n;
        s_put_be32(word, (uint32_t)n);
        rc |= buf_append(out, word, 4);
        for (size_t i = 0; i < n; i++) {
            s_put_be32(word, (uint32_t)off);
            rc |= buf_append(out, word, 4);
            off += i == 0 ? strlen(text) : kb_msg_buffer(msg, i - 1)->len;
        }
    }
    rc |= buf_puts(out, text);
    for (size_t i = 0; i < nbuf; i++)
        rc |= buf_append(out, kb_msg_buffer(msg, i)->data,
                         kb_msg_buffer(msg, i)->len);
    free(text);
    return rc ? err_set(err, ERR_KERNEL, "message too large to send") : 0;
}

int
kb_ws_encode(const kb_msg_t *msg, kb_channel_t ch, kb_ws_proto_t proto,
             buf_t *out, bool *binary, err_t *err)
{
    if (ch >= KB_HB)
        return err_set(err, ERR_KERNEL, "no %s channel over a WebSocket",
                       kb_channel_name(ch));
    if (proto == KB_WS_V1) {
        *binary = true;
        return s_encode_v1(msg, ch, out, err);
    }
    return s_encode_legacy(msg, ch, out, binary, err);
}
