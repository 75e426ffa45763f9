/* Fuzz target: arbitrary bytes as a connection file. Every input either
 * parses into a struct that satisfies kb_conn.h's invariants or fails with a
 * message; neither path may crash or leak. */
#include "kernel-bridge/kb_conn.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kb_conn_t c;
    err_t err;
    char ep[256];

    err_clear(&err);
    if (kb_conn_parse(&c, (const char *)data, size, "fuzz.json", &err) == 0) {
        for (int ch = 0; ch < KB_NCHANNELS; ch++) {
            if (c.ports[ch] < 1 || c.ports[ch] > 65535)
                abort();
            /* Endpoints either fit or are refused whole. */
            if (kb_conn_endpoint(&c, (kb_channel_t)ch, ep, sizeof ep) == 0 &&
                strlen(ep) >= sizeof ep)
                abort();
        }
        if (!c.ip || !c.key || !c.signature_scheme || !c.kernel_name)
            abort();
    } else if (err.text[0] == '\0') {
        abort(); /* a failure always says why */
    }
    kb_conn_release(&c);
    return 0;
}
