/*
 * density: how many idle sandboxed sessions fit, and do they still answer.
 *
 *   density -n N -m fresh|factory [-P PRELOAD] [-j STARTING]
 *
 * Starts N sessions, each a kernel in its own sandbox with PRELOAD
 * imported (default numpy, pandas, matplotlib.pyplot), handed over to a
 * kb_kernel as a real session is, and runs `1+1` once in each. Then, with
 * all of them idle:
 *   pss_kb      per session: the sum of Pss in /proc/PID/smaps_rollup over
 *               every process in the session's box (its cgroup.procs);
 *   factory_kb  the factory process's own Pss (factory mode), which is
 *               reported apart and also spread over the sessions in
 *               per_session_total_kb;
 *   rtt_us      `1+1` round trip in each session in turn, the others idle;
 *   burst_us    `1+1` sent to all N at once: when each answered.
 * Modes: fresh   = a new interpreter per session (the pool's kb_warm_start);
 *        factory = forked from one preloaded kb_factory (kb_warm_fork).
 * Warm-ups run at most STARTING at a time (default 4).
 */
#include "bench/bench.h"
#include "common/clock.h"
#include "kernel-bridge/kb_kernel.h"
#include "kernel-bridge/pool/kb_factory.h"
#include "kernel-bridge/pool/kb_warm.h"

#include <string.h>
#include <unistd.h>

static kb_launcher_t *
s_once(void *arg, err_t *err)
{
    kb_launcher_t *l = arg;
    if (!l)
        err_set(err, ERR_KERNEL, "no launcher");
    return l;
}

static long
s_pss_kb(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/smaps_rollup", (int)pid);
    FILE *f = fopen(path, "r");
    long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "Pss:", 4) == 0)
            kb = strtol(line + 4, NULL, 10);
    if (f)
        fclose(f);
    return kb;
}

/* Pss of every process in the box's memory (else pids) cgroup. */
static long
s_box_pss_kb(sb_sandbox_t *box)
{
    const char *dir = sb_sandbox_cgroup_dir(box, "memory");
    if (!dir)
        dir = sb_sandbox_cgroup_dir(box, "pids");
    if (!dir)
        return -1;
    char path[512];
    snprintf(path, sizeof path, "%s/cgroup.procs", dir);
    FILE *f = fopen(path, "r");
    long kb = 0, pid;
    while (f && fscanf(f, "%ld", &pid) == 1)
        kb += s_pss_kb((pid_t)pid);
    if (f)
        fclose(f);
    return kb;
}

static int
s_exec(kb_kernel_t *k, err_t *err)
{
    kb_output_t *out = kb_output_new(NULL, 0);
    int rc = kb_kernel_execute(k, "1+1", NULL, 30000, out, NULL, err);
    kb_output_destroy(&out);
    return rc;
}

int
main(int argc, char **argv)
{
    const char *mode = "fresh";
    const char *preload = "import numpy, pandas, matplotlib.pyplot";
    long n = 10, starting = 4;
    int opt;
    while ((opt = getopt(argc, argv, "n:m:P:j:")) != -1) {
        if (opt == 'n')
            n = bench_int_arg(optarg, n);
        else if (opt == 'm')
            mode = optarg;
        else if (opt == 'P')
            preload = optarg;
        else if (opt == 'j')
            starting = bench_int_arg(optarg, starting);
        else
            return ERR_USAGE;
    }
    bool factory_mode = strcmp(mode, "factory") == 0;
    if (!factory_mode && strcmp(mode, "fresh") != 0) {
        fprintf(stderr, "density: -m takes fresh or factory\n");
        return ERR_USAGE;
    }
    err_t err = {0};
    int rc = 0;
    kb_factory_t *fac = NULL;
    kb_warm_t **warm = calloc((size_t)n, sizeof *warm);
    kb_kernel_t **k = calloc((size_t)n, sizeof *k);
    json_t *pss = json_array(), *rtt = json_array(), *burst = json_array();
    int64_t t0 = clock_mono_ms();
    if (factory_mode) {
        kb_factory_opts_t fo = {.preload = preload};
        if (!(fac = kb_factory_new(&fo, &err))) {
            rc = bench_fail("factory", &err);
            goto out;
        }
    }
    /* Warm up n kernels, `starting` at a time. */
    long started = 0, ready = 0;
    kb_warm_opts_t wo = {.preload = preload};
    while (ready < n) {
        long inflight = 0;
        for (long i = 0; i < started; i++)
            inflight += warm[i] && kb_warm_poll(warm[i], 0) == KB_WARM_STARTING;
        while (started < n && inflight < starting) {
            warm[started] =
                fac ? kb_warm_fork(fac, &wo, &err) : kb_warm_start(&wo, &err);
            if (!warm[started]) {
                rc = bench_fail("warm-up", &err);
                goto out;
            }
            started++;
            inflight++;
        }
        ready = 0;
        for (long i = 0; i < started; i++) {
            kb_warm_state_t s = kb_warm_poll(warm[i], i == 0 ? 50 : 0);
            if (s == KB_WARM_FAILED) {
                err_set(&err, ERR_KERNEL, "%s", kb_warm_error(warm[i]));
                rc = bench_fail("warm-up", &err);
                goto out;
            }
            ready += s == KB_WARM_READY;
        }
    }
    int64_t t_warm = clock_mono_ms();
    for (long i = 0; i < n; i++) {
        kb_launcher_t *l = kb_warm_launcher(&warm[i], &err);
        kb_kernel_opts_t ko = {.launcher = s_once, .launcher_arg = l};
        if (!l || !(k[i] = kb_kernel_start(&ko, &err)) || s_exec(k[i], &err)) {
            rc = bench_fail("session", &err);
            goto out;
        }
    }
    sleep(3); /* idle */
    long total = 0;
    for (long i = 0; i < n; i++) {
        long kb = s_box_pss_kb(kb_launcher_warm_box(kb_kernel_launcher(k[i])));
        total += kb;
        json_array_append_new(pss, json_integer(kb));
    }
    long fac_kb = fac ? s_pss_kb(kb_factory_pid(fac)) : 0;
    for (long i = 0; i < n; i++) {
        int64_t a = clock_mono_us();
        if (s_exec(k[i], &err)) {
            rc = bench_fail("1+1", &err);
            goto out;
        }
        json_array_append_new(rtt, json_integer(clock_mono_us() - a));
    }
    /* All at once. */
    kb_exec_t **x = calloc((size_t)n, sizeof *x);
    int64_t b0 = clock_mono_us();
    for (long i = 0; i < n; i++)
        x[i] =
            kb_client_execute_start(kb_kernel_client(k[i]), "1+1", NULL, &err);
    for (long i = 0; i < n; i++) {
        kb_output_t *out = kb_output_new(NULL, 0);
        int r =
            x[i] ? kb_client_execute_wait(kb_kernel_client(k[i]), x[i], out,
                                          NULL, clock_mono_ms() + 30000, &err)
                 : -1;
        kb_output_destroy(&out);
        kb_exec_destroy(&x[i]);
        json_array_append_new(burst,
                              json_integer(r ? -1 : clock_mono_us() - b0));
    }
    free(x);
    double load[3] = {0, 0, 0};
    getloadavg(load, 3);
    bench_emit(json_pack(
        "{s:s, s:i, s:s, s:O, s:I, s:I, s:O, s:O, s:I, s:f}", "mode", mode, "n",
        (int)n, "preload", preload, "pss_kb", pss, "factory_kb",
        (json_int_t)fac_kb, "per_session_total_kb",
        (json_int_t)((total + fac_kb) / n), "rtt_us", rtt, "burst_us", burst,
        "warmup_ms", (json_int_t)(t_warm - t0), "loadavg", load[0]));
out:
    for (long i = 0; i < n; i++) {
        kb_kernel_destroy(&k[i]);
        kb_warm_destroy(&warm[i]);
    }
    kb_factory_destroy(&fac);
    free(k);
    free(warm);
    json_decref(pss);
    json_decref(rtt);
    json_decref(burst);
    return rc;
}
