/*
 * startup_warm: time to first result and to first chart of a NEW isolated
 * session, cold versus warm.
 *
 *   startup_warm -m cold|pool|factory|serve|serve-factory [-r RUNS]
 *                [-w WARMUP] [-P PRELOAD]
 *
 * Each run creates a new session and records, from the moment the session
 * is asked for:
 *   ready_us   kb_kernel_start returned (kernel_info answered);
 *   result_us  the execute_result of `1+1` arrived;
 *   chart_us   then the PNG of `pd.DataFrame(...).plot()` arrived (same
 *              session, right after; includes importing pandas/matplotlib
 *              unless the warm kernel preloaded them).
 * Modes: cold  = a fresh sandbox + ipykernel per session (kb_kernel_start);
 *        pool  = kb_pool in this process (take + hand-over);
 *        factory = kb_pool filled by a kb_factory (forked kernels);
 *        serve = a `jupyter-agent serve` child on a private socket, the
 *                session taken over the socket as exec does;
 *        serve-factory = the same with `serve --factory`.
 * Before each warm run the pool is allowed to refill (untimed), so a run
 * measures a hit, not a refill competing for the CPU; misses are reported.
 * The session is destroyed after each run, untimed.
 */
#include "agent/cli/ag_cmd.h"
#include "bench/bench.h"
#include "common/clock.h"
#include "kernel-bridge/kb_kernel.h"
#include "kernel-bridge/launch/kb_launch_sandbox.h"
#include "kernel-bridge/pool/kb_factory.h"
#include "kernel-bridge/pool/kb_pool.h"
#include "kernel-bridge/pool/kb_serve.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHART_CODE                                                             \
    "import pandas as pd\n"                                                    \
    "pd.DataFrame({'a': [1, 3, 2], 'b': [2, 1, 3]}).plot();"

typedef struct src {
    kb_launcher_t *l; /* the launcher for this session (cold: made lazily) */
} src_t;

static kb_launcher_t *
s_factory(void *arg, err_t *err)
{
    src_t *s = arg;
    if (!s->l)
        s->l = kb_launcher_sandbox_new(NULL, err);
    return s->l;
}

typedef struct marks {
    int64_t result; /* execute_result seen */
    int64_t png;    /* display_data with image/png seen */
} marks_t;

static void
s_on_iopub(const kb_msg_t *msg, void *arg)
{
    marks_t *m = arg;
    const char *t = kb_msg_type(msg);
    if (!m->result && strcmp(t, "execute_result") == 0)
        m->result = clock_mono_us();
    json_t *data = json_object_get(kb_msg_content(msg), "data");
    if (!m->png && strcmp(t, "display_data") == 0 &&
        json_object_get(data, "image/png"))
        m->png = clock_mono_us();
}

static char s_sock[128];

static pid_t
s_server(const char *preload, unsigned size, bool factory)
{
    int pfd[2];
    if (pipe(pfd))
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pfd[1], 1);
        close(pfd[0]);
        char n[16];
        snprintf(n, sizeof n, "%u", size);
        char a0[] = "serve", a1[] = "--pool", a3[] = "--preload",
             a5[] = "--socket";
        char a7[] = "--factory";
        char *argv[] = {
            a0,  a1, n, a3, (char *)preload, a5, s_sock, factory ? a7 : NULL,
            NULL};
        _exit(ag_cmd_serve(factory ? 8 : 7, argv));
    }
    close(pfd[1]);
    char line[256];
    ssize_t got = read(pfd[0], line, sizeof line);
    close(pfd[0]);
    return got > 0 ? pid : -1;
}

static unsigned
s_ready(kb_pool_t *pool)
{
    if (pool) {
        kb_pool_stats_t st;
        kb_pool_poll(pool, 100);
        kb_pool_stats(pool, &st);
        return st.ready;
    }
    err_t err;
    json_t *r = kb_serve_request(s_sock, "stats", &err);
    unsigned n = (unsigned)json_integer_value(json_object_get(r, "ready"));
    json_decref(r);
    usleep(50000);
    return n;
}

int
main(int argc, char **argv)
{
    const char *mode = "cold";
    const char *preload = "import pandas, matplotlib.pyplot";
    long runs = 10, warm = 1;
    int opt;
    while ((opt = getopt(argc, argv, "m:r:w:P:")) != -1) {
        if (opt == 'm')
            mode = optarg;
        else if (opt == 'r')
            runs = bench_int_arg(optarg, runs);
        else if (opt == 'w')
            warm = strcmp(optarg, "0") == 0 ? 0 : bench_int_arg(optarg, warm);
        else if (opt == 'P')
            preload = optarg;
        else
            return ERR_USAGE;
    }
    bool cold = strcmp(mode, "cold") == 0;
    bool serve_factory = strcmp(mode, "serve-factory") == 0;
    bool serve = strcmp(mode, "serve") == 0 || serve_factory;
    bool factory = strcmp(mode, "factory") == 0;
    if (!cold && !serve && !factory && strcmp(mode, "pool") != 0) {
        fprintf(stderr, "startup_warm: -m takes cold, pool, factory, serve "
                        "or serve-factory\n");
        return ERR_USAGE;
    }
    kb_factory_t *fac = NULL;
    err_t err = {0};
    kb_pool_t *pool = NULL;
    pid_t server = -1;
    char dir[] = "/tmp/ja-bench-serve-XXXXXX";
    if (!cold && !serve) {
        if (factory) {
            kb_factory_opts_t fo = {.preload = preload};
            if (!(fac = kb_factory_new(&fo, &err)))
                return bench_fail("factory", &err);
        }
        kb_pool_opts_t po = {.size = 1, .preload = preload, .factory = fac};
        pool = kb_pool_new(&po, &err);
    } else if (serve) {
        if (!mkdtemp(dir))
            return ERR_IO;
        snprintf(s_sock, sizeof s_sock, "%s/s.sock", dir);
        server = s_server(preload, 1, serve_factory);
        if (server < 0) {
            err_set(&err, ERR_KERNEL, "serve did not start");
            return bench_fail("serve", &err);
        }
    }
    json_t *ready = json_array(), *result = json_array(), *chart = json_array();
    int rc = 0;
    long misses = 0;
    for (long i = 0; i < warm + runs; i++) {
        if (!cold) { /* let the pool refill, untimed */
            int64_t end = clock_mono_ms() + 120000;
            while (s_ready(pool) < 1 && clock_mono_ms() < end)
                ;
            usleep(200000); /* let the warm-up's last work settle */
        }
        src_t src = {0};
        marks_t m = {0};
        int64_t t0 = clock_mono_us();
        if (pool) {
            src.l = kb_pool_take(pool, NULL, NULL, &err);
        } else if (serve) {
            bool no_server;
            src.l = kb_serve_take(s_sock, NULL, NULL, &no_server, &err);
        }
        if (!cold && !src.l)
            misses++; /* falls back to a cold start, as exec would */
        kb_kernel_opts_t ko = {.launcher = s_factory, .launcher_arg = &src};
        kb_kernel_t *k = kb_kernel_start(&ko, &err);
        int64_t t_ready = clock_mono_us();
        if (!k) {
            rc = bench_fail("start", &err);
            goto out;
        }
        kb_exec_hooks_t hooks = {.on_iopub = s_on_iopub, .arg = &m};
        kb_output_t *out = kb_output_new(NULL, 0);
        int r = kb_kernel_execute(k, "1+1", NULL, 30000, out, &hooks, &err);
        if (r == 0)
            r = kb_kernel_execute(k, CHART_CODE, NULL, 60000, out, &hooks,
                                  &err);
        kb_output_destroy(&out);
        kb_kernel_destroy(&k);
        if (r == 0 && (!m.result || !m.png))
            r = err_set(&err, ERR_KERNEL, "no result or no PNG");
        if (r != 0) {
            rc = bench_fail("execute", &err);
            goto out;
        }
        if (i >= warm) {
            json_array_append_new(ready, json_integer(t_ready - t0));
            json_array_append_new(result, json_integer(m.result - t0));
            json_array_append_new(chart, json_integer(m.png - t0));
        }
    }
    double load[3] = {0, 0, 0};
    getloadavg(load, 3);
    bench_emit(json_pack("{s:s, s:s, s:O, s:O, s:O, s:i, s:f}", "mode", mode,
                         "preload", cold ? "" : preload, "ready_us", ready,
                         "result_us", result, "chart_us", chart, "misses",
                         (int)misses, "loadavg", load[0]));
out:
    kb_pool_destroy(&pool);
    kb_factory_destroy(&fac);
    if (server > 0) {
        json_decref(kb_serve_request(s_sock, "stop", NULL));
        waitpid(server, NULL, 0);
        rmdir(dir);
    }
    json_decref(ready);
    json_decref(result);
    json_decref(chart);
    return rc;
}
