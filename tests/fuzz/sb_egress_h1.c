/*
 * Fuzz target: the request stream a hostile box sends inside a TLS
 * connection the egress proxy terminates (--net-secret), rewritten by
 * sb_egress_h1. The first byte picks where to split the rest in two: fed
 * whole or in two pieces, the verdict and the bytes sent upstream must be
 * the same, and a refusal must say why with a status it promises.
 */
#include "sandbox/sb_egress_h1.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const sb_egress_inject_t s_inj = {.host = "api.test",
                                         .port = 443,
                                         .header = "Authorization",
                                         .value = "Bearer fuzz",
                                         .value_len = 11};

/* Feed in[0..n) in pieces cut at `cut`; the verdict, output in `out`. */
static int
s_run(const char *in, size_t n, size_t cut, buf_t *out, int *status)
{
    sb_egress_h1_t *p = malloc(sizeof *p);
    if (!p)
        abort();
    sb_egress_h1_init(p);
    const char *why = NULL;
    int rc = 0;
    size_t parts[2][2] = {{0, cut}, {cut, n}};
    for (int i = 0; i < 2 && rc == 0; i++) {
        size_t a = parts[i][0], b = parts[i][1];
        if (b > a)
            rc = sb_egress_h1_feed(p, &s_inj, in + a, b - a, out, status, &why);
    }
    if (rc < 0 && (!why || p->state != SB_H1_DEAD))
        abort(); /* a refusal says why, and nothing more passes */
    if (rc < 0 && *status != 400 && *status != 403 && *status != 405 &&
        *status != 431 && *status != 500 && *status != 501)
        abort();
    free(p);
    return rc;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    size_t n = size - 1;
    size_t cut = n ? data[0] % (n + 1) : 0;
    const char *in = (const char *)data + 1;
    buf_t whole, split;
    buf_init(&whole, 0);
    buf_init(&split, 0);
    int s1 = 0, s2 = 0;
    int r1 = s_run(in, n, n, &whole, &s1);
    int r2 = s_run(in, n, cut, &split, &s2);
    if (r1 != r2 || s1 != s2)
        abort(); /* where TLS records end must not change the verdict */
    if (r1 == 0 && (whole.len != split.len ||
                    (whole.len && memcmp(whole.data, split.data, whole.len))))
        abort(); /* nor the bytes that go upstream */
    buf_release(&whole);
    buf_release(&split);
    return 0;
}
