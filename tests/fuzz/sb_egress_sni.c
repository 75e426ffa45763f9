/*
 * Fuzz target: the egress proxy's request parsers on bytes a hostile box
 * sends: the TLS ClientHello SNI reader (after CONNECT) and the request
 * head parser, each on the whole input. Neither may read past the input
 * or return a name that breaks its own promises.
 */
#include "sandbox/sb_egress_sni.h"
#include "sandbox/sb_egress_http.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char name[256];
    memset(name, 'x', sizeof name);
    sb_egress_sni_rc_t rc = sb_egress_sni_parse(data, size, name, sizeof name);
    if (rc == SB_SNI_FOUND) {
        size_t n = strnlen(name, sizeof name);
        if (n == 0 || n == sizeof name)
            abort(); /* found means a non-empty NUL-terminated name */
    } else if (rc != SB_SNI_NONE && rc != SB_SNI_MORE && rc != SB_SNI_NOT_TLS) {
        abort();
    }
    /* The head parser takes a copy that ends where the input ends. */
    char *h = malloc(size ? size : 1);
    if (!h)
        return 0;
    memcpy(h, data, size);
    sb_egress_req_t r;
    const char *why = NULL;
    if (sb_egress_req_parse(h, size, &r, &why) == 0) {
        if (!r.host[0] || (r.connect && r.port == 0) ||
            (!r.connect && r.path_off + r.path_len > size))
            abort();
        (void)sb_egress_req_host_matches(&r);
    } else if (!why) {
        abort(); /* a refusal always says why */
    }
    free(h);
    return 0;
}
