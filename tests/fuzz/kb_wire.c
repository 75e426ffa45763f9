/*
 * Fuzz target: kb_wire_parse on arbitrary frames.
 * Input format: a sequence of frames, each a 2-byte little-endian length
 * followed by that many bytes (a short tail is one last frame). Parsed twice:
 * with a key (exercises signature rejection) and unsigned (exercises JSON).
 */
#include "kernel-bridge/kb_wire.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
            /* The parent id read off the wire text (kb_wire keeps a plain
             * parent_header as text) is jansson's, whenever jansson
             * parses that parent_header to an object. */
            const char *id = kb_msg_parent_id(msg);
            char copy[64];
            snprintf(copy, sizeof copy, "%s", id);
            json_t *parent = kb_msg_parent_header(msg);
            const char *parsed =
                json_string_value(json_object_get(parent, "msg_id"));
            if (json_object_size(parent) && strlen(id) < sizeof copy &&
                strcmp(copy, parsed ? parsed : "") != 0)
                abort();
            kb_wire_out_t out;
            if (kb_wire_serialize(msg, keys[k], &out, NULL) == 0)
                kb_wire_out_release(&out);
        }
        kb_msg_destroy(&msg);
        kb_key_destroy(&keys[k]);
    }
    return 0;
}
