/*
 * zmtp_wire: ZMTP 3 frames as a peer writes them, for tests of our own
 * iopub reader (kb_zmtp, kb_zmtp_sub). Header-only, like kernel_run.h.
 */
#ifndef TESTS_TOOLS_ZMTP_WIRE_H
#define TESTS_TOOLS_ZMTP_WIRE_H

#include "common/buf.h"

#include <stdbool.h>
#include <stdint.h>

/* Append one frame: `flags` (0x01 more, 0x04 command; 0x02 asks for the
 * 8-byte size form, which a body over 255 bytes gets anyway). */
static inline void
zmtp_frame(buf_t *b, uint8_t flags, const void *body, size_t len)
{
    bool longform = (flags & 0x02) || len > 255;
    uint8_t h[9] = {(uint8_t)(flags | (longform ? 0x02 : 0))};
    size_t hl = 2;
    if (longform) {
        for (int i = 0; i < 8; i++)
            h[1 + i] = (uint8_t)((uint64_t)len >> (56 - 8 * i));
        hl = 9;
    } else {
        h[1] = (uint8_t)len;
    }
    buf_append(b, h, hl);
    if (len)
        buf_append(b, body, len);
}

#endif
