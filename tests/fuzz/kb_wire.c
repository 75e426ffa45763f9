/*
 * Fuzz target: kb_wire_parse on arbitrary frames.
 * Input format: a sequence of frames, each a 2-byte little-endian length
 * followed by that many bytes (a short tail is one last frame). Parsed twice:
 * with a key (exercises signature rejection) and unsigned (exercises JSON).
 */
#include "kernel-bridge/wire/kb_wire.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* `early` (an id kb_wire read off the text; kb_msg keeps it after parsing
 * the part) equals part[key] as jansson parsed it, unless the part did not
 * parse ({}). */
static void
s_same_id(const char *early, json_t *part, const char *key)
{
    const char *parsed = json_string_value(json_object_get(part, key));
    if (json_object_size(part) && strcmp(early, parsed ? parsed : "") != 0)
        abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kb_frame_t frames[64];
    size_t n = 0, pos = 0;
    while (pos < size && n < 64) {
        size_t len =
            pos + 1 < size ? (size_t)(data[pos] | data[pos + 1] << 8) : 0;
        pos += 2;
        if (pos > size)
            pos = size;
        if (len > size - pos)
            len = size - pos;
        frames[n++] = (kb_frame_t){data + pos, len};
        pos += len;
    }
    kb_key_t *keys[2] = {kb_key_new("fuzz-key", 8), kb_key_new("", 0)};
    for (int k = 0; k < 2; k++) {
        kb_wire_stats_t stats = {0};
        kb_msg_t *msg = kb_wire_parse(frames, n, keys[k], NULL, &stats, NULL);
        if (msg) {
            /* The ids read off the wire text (kb_wire keeps plain parts as
             * text) are jansson's, whenever jansson parses that part to an
             * object. */
            s_same_id(kb_msg_type(msg), kb_msg_header(msg), "msg_type");
            s_same_id(kb_msg_id(msg), kb_msg_header(msg), "msg_id");
            s_same_id(kb_msg_parent_id(msg), kb_msg_parent_header(msg),
                      "msg_id");
            kb_wire_out_t out;
            if (kb_wire_serialize(msg, keys[k], &out, NULL) == 0)
                kb_wire_out_release(&out);
        }
        kb_msg_destroy(&msg);
        kb_key_destroy(&keys[k]);
    }
    return 0;
}
