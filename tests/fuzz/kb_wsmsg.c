/* Fuzz target: arbitrary bytes as a frame from a Jupyter Server's kernel
 * WebSocket. The first byte picks the framing (v1 or legacy) and the frame
 * type (binary or text); the rest is the frame. Every input is either a
 * message on a real channel, which re-encodes and decodes to the same
 * header, or refused with a reason; nothing may crash, leak or read past
 * the frame (ASan). */
#include "kernel-bridge/wire/kb_wsmsg.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    kb_ws_proto_t proto = (data[0] & 1) ? KB_WS_V1 : KB_WS_LEGACY;
    bool binary = (data[0] & 2) != 0;
    /* A copy of exactly the frame's size, so ASan sees any overread. */
    size_t len = size - 1;
    uint8_t *frame = malloc(len ? len : 1);
    memcpy(frame, data + 1, len);
    kb_wire_stats_t stats = {0};
    kb_channel_t ch = KB_HB;
    err_t err;
    kb_msg_t *m =
        kb_ws_decode(frame, len, binary, proto, NULL, &stats, &ch, &err);
    if (m) {
        if (ch >= KB_HB || stats.accepted != 1)
            abort();
        buf_t b;
        buf_init(&b, 0);
        bool bin = false;
        kb_channel_t again = KB_HB;
        if (kb_ws_encode(m, ch, proto, &b, &bin, &err))
            abort();
        kb_msg_t *m2 =
            kb_ws_decode(b.data, b.len, bin, proto, NULL, NULL, &again, &err);
        if (!m2 || again != ch ||
            !json_equal(kb_msg_header(m), kb_msg_header(m2)) ||
            kb_msg_buffer_count(m) != kb_msg_buffer_count(m2))
            abort();
        kb_msg_destroy(&m2);
        buf_release(&b);
        kb_msg_destroy(&m);
    } else if (err.text[0] == '\0' ||
               kb_wire_stats_refused(&(kb_wire_stats_t){0}, &stats, NULL, 0) +
                       stats.foreign !=
                   1) {
        abort(); /* a refusal always says why, and is counted once */
    }
    free(frame);
    return 0;
}
