/*
 * notebook_io: read + write one notebook in memory with nb_notebook, the
 * way nbformat.reads + nbformat.writes do it (no file I/O in the timings).
 *
 *     notebook_io FILE [-n ROUNDS]
 *
 * Prints one JSON object: {"client", "bytes", "cells", "read_us": [...],
 * "write_us": [...], "read_cpu_us": [...], "write_cpu_us": [...] (this
 * process's CPU time, user + system, per round: steadier than wall time on
 * a busy machine), "identical": whether the text written equals the file
 * (true for a file nbformat wrote), "cpu_user_us", "cpu_sys_us"}.
 */
#include "bench/bench.h"
#include "common/clock.h"
#include "common/err.h"
#include "notebook-io/nb_notebook.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *
s_slurp(const char *path, size_t *len, err_t *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        err_set(err, ERR_IO, "cannot open %s", path);
        return NULL;
    }
    size_t cap = 1 << 20, n = 0, got;
    char *buf = malloc(cap);
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap)
            buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    *len = n;
    return buf;
}

static int64_t
s_cpu_us(void)
{
    int64_t user, sys;
    bench_cpu_us(&user, &sys);
    return user + sys;
}

int
main(int argc, char **argv)
{
    err_t err = {0};
    if (argc < 2) {
        err_set(&err, ERR_USAGE, "usage: notebook_io FILE [-n ROUNDS]");
        return bench_fail("notebook_io", &err);
    }
    long rounds =
        argc >= 4 && strcmp(argv[2], "-n") == 0 ? bench_int_arg(argv[3], 5) : 5;
    size_t len = 0;
    char *text = s_slurp(argv[1], &len, &err);
    if (!text)
        return bench_fail("notebook_io", &err);

    json_t *reads = json_array(), *writes = json_array();
    json_t *read_cpu = json_array(), *write_cpu = json_array();
    bool identical = true;
    size_t cells = 0;
    for (long r = 0; r < rounds; r++) {
        int64_t c0 = s_cpu_us(), t0 = clock_mono_us();
        nb_notebook_t *nb = nb_notebook_read_mem(text, len, argv[1], &err);
        int64_t t1 = clock_mono_us(), c1 = s_cpu_us();
        if (!nb) {
            free(text);
            json_decref(reads);
            json_decref(writes);
            json_decref(read_cpu);
            json_decref(write_cpu);
            return bench_fail("notebook_io", &err);
        }
        size_t out_len = 0;
        char *out = nb_notebook_write_mem(nb, &out_len);
        int64_t t2 = clock_mono_us(), c2 = s_cpu_us();
        json_array_append_new(reads, json_integer(t1 - t0));
        json_array_append_new(writes, json_integer(t2 - t1));
        json_array_append_new(read_cpu, json_integer(c1 - c0));
        json_array_append_new(write_cpu, json_integer(c2 - c1));
        identical = identical && out_len == len && memcmp(out, text, len) == 0;
        cells = nb_notebook_ncells(nb);
        free(out);
        nb_notebook_destroy(&nb);
    }
    int64_t user, sys;
    bench_cpu_us(&user, &sys);
    bench_emit(json_pack(
        "{s:s, s:I, s:I, s:o, s:o, s:o, s:o, s:b, s:I, s:I}", "client",
        "jupyter-agent nb_notebook", "bytes", (json_int_t)len, "cells",
        (json_int_t)cells, "read_us", reads, "write_us", writes, "read_cpu_us",
        read_cpu, "write_cpu_us", write_cpu, "identical", identical,
        "cpu_user_us", (json_int_t)user, "cpu_sys_us", (json_int_t)sys));
    free(text);
    return 0;
}
