/*
 * roundtrip: round-trip time of executing `pass` through our client.
 *
 *   roundtrip -f CONNECTION_FILE [-n N] [-w WARMUP] [-c CODE]
 *
 * CODE defaults to `pass` (bench/mcp.py uses `1+1`, the MCP tool call it
 * compares with).
 *
 * Attaches to a running kernel (the driver, bench.py, starts one and hands
 * the same kernel to every client it compares), runs WARMUP unmeasured
 * executions, then N measured ones. One sample is the time from just
 * before kb_kernel_execute() to its return, i.e. until BOTH the
 * execute_reply on shell and the iopub status idle of that request were
 * received, verified and applied to a fresh output model — exactly what
 * `exec` and the agent loop do per cell.
 *
 * Prints {"client":..., "samples_us":[...], "cpu_user_us":...,
 * "cpu_sys_us":..., "kernel_execution_count":...}.
 */
#include "bench/bench.h"
#include "common/clock.h"
#include "kernel-bridge/kb_kernel.h"

#include <string.h>
#include <unistd.h>

int
main(int argc, char **argv)
{
    const char *conn = NULL, *code = "pass";
    long n = 1000, warm = 50;
    int opt;
    while ((opt = getopt(argc, argv, "f:n:w:c:")) != -1) {
        if (opt == 'f')
            conn = optarg;
        else if (opt == 'n')
            n = bench_int_arg(optarg, n);
        else if (opt == 'c')
            code = optarg;
        else if (opt == 'w')
            warm = bench_int_arg(optarg, warm);
        else
            return ERR_USAGE;
    }
    if (!conn) {
        fprintf(stderr, "usage: roundtrip -f CONNECTION_FILE [-n N] "
                        "[-w WARMUP]\n");
        return ERR_USAGE;
    }
    err_t err = {0};
    kb_kernel_t *k = kb_kernel_attach(conn, false, &err);
    if (!k)
        return bench_fail("attach", &err);
    json_t *samples = json_array();
    int count = -1, rc = 0;
    int64_t u0, s0, u1, s1;
    for (long i = 0; i < warm + n; i++) {
        if (i == warm)
            bench_cpu_us(&u0, &s0);
        int64_t t0 = clock_mono_us();
        kb_output_t *out = kb_output_new(NULL, 0);
        int r = kb_kernel_execute(k, code, NULL, 0, out, NULL, &err);
        int64_t t1 = clock_mono_us();
        const char *status = kb_output_status(out);
        if (r == 0 && (!status || strcmp(status, "ok") != 0))
            r = err_set(&err, ERR_KERNEL, "execute_reply status %s",
                        status ? status : "(none)");
        count = kb_output_execution_count(out);
        kb_output_destroy(&out);
        if (r != 0) {
            rc = bench_fail("execute", &err);
            goto out;
        }
        if (i >= warm)
            json_array_append_new(samples, json_integer(t1 - t0));
    }
    bench_cpu_us(&u1, &s1);
    bench_emit(json_pack("{s:s, s:O, s:I, s:I, s:i}", "client",
                         "jupyter-agent (C, kb_kernel_execute)", "samples_us",
                         samples, "cpu_user_us", (json_int_t)(u1 - u0),
                         "cpu_sys_us", (json_int_t)(s1 - s0),
                         "kernel_execution_count", count));
out:
    json_decref(samples);
    kb_kernel_destroy(&k);
    return rc;
}
