/*
 * startup: cold start of a kernel through our kernel manager.
 *
 *   startup [-l plain|sandbox] [-r RUNS] [-w WARMUP]
 *
 * Each run starts a fresh python3 ipykernel with kb_kernel_start() and
 * records two times from the call: "ready" when kb_kernel_start returns
 * (the first kernel_info_reply was received and iopub delivered its
 * status, so no output can be missed) and "result" when the execute_result
 * of `1+1` arrives (on_iopub hook). The kernel is then shut down, untimed.
 * WARMUP runs first fill the page cache and are not reported.
 *
 * With -l sandbox the kernel runs in a fresh sandbox per start
 * (kb_launcher_sandbox_new with the default policy). If that launcher cannot
 * be built on this machine the program prints {"skipped": reason}.
 */
#include "bench/bench.h"
#include "common/clock.h"
#include "kernel-bridge/kb_kernel.h"
#include "kernel-bridge/kb_launch_sandbox.h"

#include <string.h>
#include <unistd.h>

static kb_launcher_t *
s_sandbox_factory(void *arg, err_t *err)
{
    (void)arg;
    return kb_launcher_sandbox_new(NULL, err);
}

/* When the first execute_result arrived (0 = not yet). */
static void
s_on_iopub(const kb_msg_t *msg, void *arg)
{
    int64_t *when = arg;
    if (*when == 0 && strcmp(kb_msg_type(msg), "execute_result") == 0)
        *when = clock_mono_us();
}

int
main(int argc, char **argv)
{
    const char *launcher = "plain";
    long runs = 10, warm = 1;
    int opt;
    while ((opt = getopt(argc, argv, "l:r:w:")) != -1) {
        if (opt == 'l')
            launcher = optarg;
        else if (opt == 'r')
            runs = bench_int_arg(optarg, runs);
        else if (opt == 'w')
            warm = strcmp(optarg, "0") == 0 ? 0 : bench_int_arg(optarg, warm);
        else
            return ERR_USAGE;
    }
    bool sandbox = strcmp(launcher, "sandbox") == 0;
    if (!sandbox && strcmp(launcher, "plain") != 0) {
        fprintf(stderr, "startup: -l takes plain or sandbox\n");
        return ERR_USAGE;
    }
    err_t err = {0};
    if (sandbox) { /* can this machine build one at all? */
        kb_launcher_t *probe = kb_launcher_sandbox_new(NULL, &err);
        if (!probe) {
            bench_emit(json_pack("{s:s, s:s++}", "launcher", launcher,
                                 "skipped",
                                 "sandbox launcher not available: ", err.text));
            return 0;
        }
        kb_launcher_destroy(&probe);
    }
    kb_kernel_opts_t opts = {.kernel_name = "python3",
                             .launcher = sandbox ? s_sandbox_factory : NULL};
    json_t *ready = json_array(), *result = json_array();
    int rc = 0;
    for (long i = 0; i < warm + runs; i++) {
        int64_t t0 = clock_mono_us();
        kb_kernel_t *k = kb_kernel_start(&opts, &err);
        int64_t t1 = clock_mono_us();
        if (!k) {
            rc = bench_fail("start", &err);
            goto out;
        }
        int64_t t2 = 0;
        kb_exec_hooks_t hooks = {.on_iopub = s_on_iopub, .arg = &t2};
        kb_output_t *out = kb_output_new(NULL, 0);
        int r = kb_kernel_execute(k, "1+1", NULL, 30000, out, &hooks, &err);
        kb_output_destroy(&out);
        kb_kernel_destroy(&k);
        if (r == 0 && t2 == 0)
            r = err_set(&err, ERR_KERNEL, "1+1 produced no execute_result");
        if (r != 0) {
            rc = bench_fail("execute", &err);
            goto out;
        }
        if (i >= warm) {
            json_array_append_new(ready, json_integer(t1 - t0));
            json_array_append_new(result, json_integer(t2 - t0));
        }
    }
    bench_emit(json_pack("{s:s, s:O, s:O}", "launcher", launcher, "ready_us",
                         ready, "result_us", result));
out:
    json_decref(ready);
    json_decref(result);
    return rc;
}
