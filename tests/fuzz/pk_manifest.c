/*
 * Fuzz target: the manifest parser (manifest.json bytes -> entries) and
 * requirement resolution over what it accepted. No signature check on this
 * path: the parser must be safe on any bytes, signed or not.
 */
#include "packages/pk_manifest.h"
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
    pk_manifest_t *m = pk_manifest_parse((const char *)data, size, &err);
    if (!m) {
        /* A refusal always explains itself. */
        if (err.code != ERR_VERIFY || err.text[0] == '\0')
            abort();
        return 0;
    }
    const pk_manifest_entry_t *out[4];
    for (size_t i = 0; i < pk_manifest_count(m); i++) {
        const pk_manifest_entry_t *e = pk_manifest_entry(m, i);
        /* Invariants of an accepted entry. */
        if (!e || e->fd != -1 || strchr(e->filename, '/') ||
            e->filename[0] == '.' || strlen(e->sha256) != 64)
            abort();
        if (pk_manifest_resolve(m, e->name, out, 4, &err) < 1)
            abort();
    }
    pk_manifest_resolve(m, "demo-pkg==1.0", out, 4, &err);
    pk_manifest_resolve(m, "x>=1", out, 4, &err);
    pk_manifest_destroy(&m);
    return 0;
}
