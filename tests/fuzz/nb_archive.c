/*
 * Fuzz target: arbitrary bytes as a report archive (a zip).
 *
 * Every input either reads or fails with ERR_VERIFY and a message. What was
 * read holds only entries that pass the name rules, each once, and every
 * top-level file kept in memory hashes to the digest recorded for it.
 * Nothing is extracted. Neither path may crash or leak.
 */
#include "notebook-io/nb_archive.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    err_t err;
    err_clear(&err);
    nb_archive_limits_t lim;
    nb_archive_limits_init(&lim);
    lim.max_total_bytes = (uint64_t)64 << 20; /* keep each run small */
    nb_archive_t *a = nb_archive_read_mem(data, size, &lim, &err);
    if (!a) {
        if (err.text[0] == '\0' || err.code != ERR_VERIFY)
            abort(); /* a refusal always says why */
        return 0;
    }
    for (size_t i = 0; i < a->nfiles; i++) {
        const nb_archive_file_t *f = &a->files[i];
        if (nb_archive_name_check(f->name, NULL) != 0)
            abort();
        for (size_t j = 0; j < i; j++)
            if (strcmp(a->files[j].name, f->name) == 0)
                abort();
        if (f->data) {
            char hex[NB_SHA256_HEX];
            nb_sha256_hex(f->data, f->size, hex);
            if (strcmp(hex, f->sha256) != 0 || f->data[f->size] != '\0')
                abort();
        }
    }
    nb_archive_destroy(&a);
    return 0;
}
