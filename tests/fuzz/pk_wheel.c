/*
 * Fuzz target: a wheel's bytes -> METADATA (zip central directory, local
 * header, inflate, CRC-32) -> Requires-Dist -> PEP 508 requirements and
 * markers. The installer reads these from signed wheels, but the reader must
 * be safe on any bytes. The same input also goes to inflate as a raw stream.
 */
#include "packages/pk_wheel.h"
#include "common/err.h"
#include "common/strv.h"
#include "packages/pk_pyreq.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    err_t err;
    err_clear(&err);
    size_t n = 0;
    unsigned char *raw = pk_wheel_inflate(data, size, 1 << 16, &n);
    if (raw && n > (1 << 16))
        abort(); /* the output cap holds */
    free(raw);
    char *meta =
        pk_wheel_metadata_mem(data, size, "pkg-1.0", "fuzz.whl", &n, &err);
    if (!meta) {
        /* A refusal always explains itself. */
        if (err.code != ERR_VERIFY || err.text[0] == '\0')
            abort();
        return 0;
    }
    if (n > PK_WHEEL_METADATA_MAX || meta[n] != '\0')
        abort();
    json_t *env = json_pack("{s:s, s:s}", "python_version", "3.11",
                            "sys_platform", "linux");
    char **reqs = pk_wheel_requires_dist(meta);
    for (char **r = reqs; *r; r++) {
        pk_pyreq_t q;
        if (pk_pyreq_parse(*r, &q, NULL) == 0) {
            bool v;
            if (q.marker)
                pk_pyreq_marker_eval(q.marker, env, NULL, &v, NULL);
            pk_pyreq_spec_match(q.specifier, "1.0", NULL);
            pk_pyreq_release(&q);
        }
    }
    strv_free(reqs);
    json_decref(env);
    free(meta);
    return 0;
}
