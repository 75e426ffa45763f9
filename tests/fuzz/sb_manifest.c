/*
 * Fuzz target: the manifest parser (manifest.json bytes -> entries) and
 * requirement resolution over what it accepted. No signature check on this
 * path: the parser must be safe on any bytes, signed or not.
 */
#include "sandbox/sb_manifest.h"
#include "common/err.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    err_t err;
    err_clear(&err);
    sb_manifest_t *m = sb_manifest_parse((const char *)data, size, &err);
    if (!m) {
        /* A refusal always explains itself. */
        if (err.code != ERR_VERIFY || err.text[0] == '\0')
            abort();
        return 0;
    }
    const sb_manifest_entry_t *out[4];
    for (size_t i = 0; i < sb_manifest_count(m); i++) {
        const sb_manifest_entry_t *e = sb_manifest_entry(m, i);
        /* Invariants of an accepted entry. */
        if (!e || e->fd != -1 || strchr(e->filename, '/') ||
            e->filename[0] == '.' || strlen(e->sha256) != 64)
            abort();
        if (sb_manifest_resolve(m, e->name, out, 4, &err) < 1)
            abort();
    }
    sb_manifest_resolve(m, "demo-pkg==1.0", out, 4, &err);
    sb_manifest_resolve(m, "x>=1", out, 4, &err);
    sb_manifest_destroy(&m);
    return 0;
}
