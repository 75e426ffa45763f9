/*
 * The warm-kernel pool against real sandboxed ipykernels: hand-over with a
 * fresh key, a kernel is never handed out twice, misses are counted,
 * preload stays out of the user namespace, charts, restart in the box,
 * broken kernelspecs back off instead of spinning.
 */
#include "../tap.h"

#include "common/clock.h"
#include "kernel-bridge/kb_kernel.h"
#include "kernel-bridge/pool/kb_pool.h"
#include "kernel-bridge/pool/kb_warm.h"
#include "sandbox/sb_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* kb_kernel may ask the factory more than once (start, restart): always
 * the same launcher, so a restart stays in the same box. */
typedef struct once {
    kb_launcher_t *l; /* handed to the kernel, which owns it */
} once_t;

static kb_launcher_t *
s_once(void *arg, err_t *err)
{
    once_t *o = arg;
    if (!o->l)
        err_set(err, ERR_KERNEL, "no launcher");
    return o->l;
}

static kb_kernel_t *
s_start(kb_launcher_t *l, err_t *err, once_t *o)
{
    o->l = l;
    kb_kernel_opts_t ko = {.launcher = s_once, .launcher_arg = o};
    return kb_kernel_start(&ko, err);
}

/* Run `code`; return the text/plain of its result or its stdout (new). */
static char *
s_eval(kb_kernel_t *k, const char *code)
{
    kb_output_t *out = kb_output_new(NULL, 0);
    kb_exec_opts_t opts;
    kb_exec_opts_init(&opts);
    /* one cell after another, also after a failed one: no aborts */
    opts.stop_on_error = false;
    err_t err;
    char *text = NULL;
    if (kb_kernel_execute(k, code, &opts, 30000, out, NULL, &err) == 0) {
        size_t i;
        json_t *o;
        json_array_foreach(kb_output_outputs(out), i, o)
        {
            const char *t = json_string_value(json_object_get(o, "text"));
            json_t *d = json_object_get(o, "data");
            if (!t && d)
                t = json_string_value(json_object_get(d, "text/plain"));
            if (t && !text)
                text = strdup(t);
        }
    } else {
        diag("execute: %s", err.text);
    }
    kb_output_destroy(&out);
    if (text && *text && text[strlen(text) - 1] == '\n')
        text[strlen(text) - 1] = '\0';
    return text;
}

static bool
s_has_png(kb_kernel_t *k, const char *code)
{
    kb_output_t *out = kb_output_new(NULL, 0);
    kb_exec_opts_t opts;
    kb_exec_opts_init(&opts);
    /* one cell after another, also after a failed one: no aborts */
    opts.stop_on_error = false;
    err_t err;
    bool png = false;
    if (kb_kernel_execute(k, code, &opts, 60000, out, NULL, &err) == 0) {
        size_t i;
        json_t *o;
        json_array_foreach(kb_output_outputs(out), i, o)
        {
            json_t *d = json_object_get(o, "data");
            if (d && json_object_get(d, "image/png"))
                png = true;
        }
    }
    kb_output_destroy(&out);
    return png;
}

/* Processes whose command line contains `needle`. */
static int
s_procs_with(const char *needle)
{
    int n = 0;
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char path[300], buf[8192];
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t got = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
        if (fd >= 0)
            close(fd);
        if (got <= 0)
            continue;
        for (ssize_t i = 0; i < got; i++)
            buf[i] = buf[i] ? buf[i] : ' ';
        buf[got] = '\0';
        n += strstr(buf, needle) != NULL;
    }
    if (d)
        closedir(d);
    return n;
}

static void
s_fill(kb_pool_t *p, unsigned want, int ms)
{
    int64_t end = clock_mono_ms() + ms;
    kb_pool_stats_t st;
    do {
        kb_pool_poll(p, 200);
        kb_pool_stats(p, &st);
    } while (st.ready < want && clock_mono_ms() < end);
}

int
main(void)
{
    err_t err = {0};
    kb_pool_opts_t po = {.size = 2, .preload = "import pandas"};
    kb_pool_t *pool = kb_pool_new(&po, &err);
    ok(pool != NULL, "a pool can be created");
    s_fill(pool, 2, 60000);
    kb_pool_stats_t st;
    kb_pool_stats(pool, &st);
    is_int(st.ready, 2, "the pool warms up to its size");
    if (st.last_error[0])
        diag("last error: %s", st.last_error);
    ok(st.warmups == 2 && st.warmup_last_ms > 0 && st.warmup_p50_ms >= 0 &&
           st.warmup_max_ms >= st.warmup_p50_ms &&
           st.warmup_max_ms >= st.warmup_last_ms,
       "warm-up times are recorded (last %d, p50 %d, max %d ms)",
       st.warmup_last_ms, st.warmup_p50_ms, st.warmup_max_ms);

    /* Take both, and a third while none is ready. */
    kb_launcher_t *l1 = kb_pool_take(pool, NULL, NULL, &err);
    kb_launcher_t *l2 = kb_pool_take(pool, "PYTHON3", NULL, &err);
    ok(l1 && l2, "two takes get two kernels");
    sb_sandbox_t *b1 = kb_launcher_warm_box(l1), *b2 = kb_launcher_warm_box(l2);
    ok(b1 && b2 && b1 != b2 && sb_sandbox_pid(b1) != sb_sandbox_pid(b2) &&
           strcmp(sb_sandbox_run_dir(b1), sb_sandbox_run_dir(b2)) != 0,
       "a kernel is never handed to a second session (distinct boxes)");
    kb_pool_stats(pool, &st);
    is_int(st.ready, 0, "a taken kernel is no longer in the pool");
    kb_launcher_t *l3 = kb_pool_take(pool, NULL, NULL, &err);
    ok(l3 == NULL && err.code == ERR_KERNEL,
       "a take with nothing ready is a miss, not a wait");
    kb_pool_stats(pool, &st);
    ok(st.hits == 2 && st.misses == 1, "hits and misses are counted");
    kb_pool_poll(pool, 500);
    kb_pool_stats(pool, &st);
    ok(st.starting >= 1, "taking refills the pool in the background");

    sb_policy_t other;
    sb_policy_init_default(&other);
    other.pids = 77;
    ok(kb_pool_take(pool, NULL, &other, &err) == NULL,
       "a different sandbox policy is a miss (never a looser box)");
    ok(kb_pool_take(pool, "no-such-kernel", NULL, &err) == NULL,
       "a different kernel name is a miss");
    sb_policy_release(&other);

    once_t o1 = {0}, o2 = {0};
    int64_t t0 = clock_mono_us();
    kb_kernel_t *k1 = s_start(l1, &err, &o1);
    int64_t t1 = clock_mono_us();
    ok(k1 != NULL, "a pooled kernel starts through kb_kernel_start");
    if (!k1)
        diag("%s", err.text);
    diag("hand-over to kernel_info: %.1f ms", (t1 - t0) / 1000.0);
    kb_kernel_t *k2 = s_start(l2, &err, &o2);
    ok(k2 != NULL, "the second pooled kernel starts too");
    if (!k1 || !k2)
        return done_testing();
    ok(kb_launcher_warm_handed_over(kb_kernel_launcher(k1)),
       "the kernel was handed over, not started again");
    char *r = s_eval(k1, "1+1");
    is_str(r, "2", "a pooled kernel runs code under the session's new key");
    free(r);
    r = s_eval(k1, "import sys; print('pandas' in sys.modules, "
                   "'pandas' in dir())");
    is_str(r, "True False",
           "preloaded modules are imported but not in the user namespace");
    free(r);
    r = s_eval(k1, "import os; print(os.getcwd(), os.getuid())");
    is_str(r, "/mnt/data 1000", "a pooled kernel runs in the sandbox");
    free(r);
    r = s_eval(k1, "secret = 41; secret + 1");
    is_str(r, "42", "state is kept between cells");
    free(r);
    r = s_eval(k2, "'secret' in dir()");
    is_str(r, "False",
           "variables of one pooled session are invisible to "
           "another");
    free(r);
    ok(s_has_png(k1, "import pandas as pd\n"
                     "pd.DataFrame({'a': [1, 3, 2]}).plot();"),
       "a DataFrame plot gives a PNG in a pooled kernel");

    /* Files for the session go into the live /mnt/data. */
    sb_sandbox_t *box = kb_launcher_warm_box(kb_kernel_launcher(k1));
    char host[] = "/tmp/ja-pool-test-XXXXXX";
    int fd = mkstemp(host);
    if (write(fd, "a,b\n1,2\n", 8) != 8)
        diag("write failed");
    close(fd);
    uid_t owner = geteuid() == 0 ? sb_sandbox_host_uid(box) : (uid_t)-1;
    int crc = sb_files_copy_in(sb_sandbox_workspace_fd(box), host, "in.csv",
                               1 << 20, owner, sb_sandbox_host_gid(box), &err);
    unlink(host);
    ok(crc == 0, "a file can be added to a running pooled box");
    r = s_eval(k1, "print(open('/mnt/data/in.csv').read().split()[1], "
                   "os.stat('/mnt/data/in.csv').st_uid)");
    is_str(r, "1,2 1000", "the kernel reads it, owned by the box user");
    free(r);

    ok(kb_kernel_restart(k1, &err) == 0, "a pooled kernel restarts (cold, "
                                         "in the same box)");
    r = s_eval(k1, "import os; print(os.path.exists('/mnt/data/in.csv'), "
                   "'secret' in dir())");
    is_str(r, "True False", "the restart keeps /mnt/data and drops state");
    free(r);
    kb_kernel_destroy(&k1);
    kb_kernel_destroy(&k2);
    kb_pool_destroy(&pool);

    /* A kernel that cannot warm up: counted, backed off, no spin. */
    kb_pool_opts_t bad = {.size = 1, .preload = "import no_such_module_ja"};
    pool = kb_pool_new(&bad, &err);
    int64_t end = clock_mono_ms() + 30000;
    do {
        kb_pool_poll(pool, 200);
        kb_pool_stats(pool, &st);
    } while (st.failed == 0 && clock_mono_ms() < end);
    ok(st.failed >= 1 && strstr(st.last_error, "no_such_module_ja"),
       "a failing warm-up is counted and says why");
    diag("%s", st.last_error);
    kb_pool_poll(pool, 300);
    kb_pool_stats(pool, &st);
    ok(st.started == 1 && st.starting == 0,
       "after a failure the pool backs off instead of restarting at once");
    kb_pool_destroy(&pool);

    /* A warm-up that hangs (its preload sleeps an hour): abandoned after
     * warmup_timeout_ms, retried a bounded number of times, then paused;
     * a take meanwhile is a miss at once, never a wait; a miss re-arms. */
    kb_pool_opts_t hang = {.size = 1,
                           .preload = "import time; time.sleep(3600)  # "
                                      "ja-pool-hang-test",
                           .warmup_timeout_ms = 2000,
                           .max_retries = 2,
                           .max_size = 1}; /* no growth on misses */
    pool = kb_pool_new(&hang, &err);
    kb_pool_poll(pool, 0);
    kb_pool_stats(pool, &st);
    ok(st.starting == 1, "a warm-up starts");
    l3 = kb_pool_take(pool, NULL, NULL, &err);
    kb_pool_stats(pool, &st);
    ok(l3 == NULL && err.code == ERR_KERNEL && st.starting == 1 &&
           st.misses == 1,
       "a take while the only warm-up is still starting is a miss at once "
       "(the session starts cold rather than wait on it)");
    end = clock_mono_ms() + 1500;
    while (s_procs_with("ja-pool-hang-test") == 0 && clock_mono_ms() < end)
        usleep(50000);
    ok(s_procs_with("ja-pool-hang-test") > 0,
       "the hanging warm-up's process is visible from here");
    end = clock_mono_ms() + 120000;
    do {
        kb_pool_poll(pool, 500);
        kb_pool_stats(pool, &st);
    } while (!st.paused && clock_mono_ms() < end);
    ok(st.abandoned == 3 && st.started == 3,
       "a warm-up that takes too long is abandoned and retried, at most "
       "max_retries times in a row (abandoned %lu, started %lu)",
       st.abandoned, st.started);
    ok(st.paused && st.starting == 0 && strstr(st.last_error, "abandoned"),
       "then the pool pauses and says why (%s)", st.last_error);
    ok(s_procs_with("ja-pool-hang-test") == 0,
       "no process of an abandoned warm-up is left running");
    kb_pool_poll(pool, 1500);
    kb_pool_stats(pool, &st);
    ok(st.started == 3, "a paused pool starts no more warm-ups");
    ok(kb_pool_take(pool, NULL, NULL, &err) == NULL,
       "a take from a paused pool is a miss");
    kb_pool_poll(pool, 1500);
    kb_pool_stats(pool, &st);
    ok(!st.paused && st.started == 4 && st.starting == 1,
       "that miss re-arms the pool: it warms up again");
    ok(st.warmups == 0 && st.warmup_last_ms == -1 && st.warmup_p50_ms == -1,
       "abandoned warm-ups are not counted as warm-up times");
    kb_pool_destroy(&pool);

    /* A warm-up that hangs only for a while (until a wall-clock moment
     * 12 s from now, past the first one's 10 s timeout): the retry gives a
     * kernel that works. */
    char *slow = NULL;
    if (asprintf(&slow,
                 "import time\n"
                 "while time.time() < %lld: time.sleep(0.2)\n",
                 (long long)time(NULL) + 12) < 0)
        return 1;
    kb_pool_opts_t once_slow = {.size = 1,
                                .preload = slow,
                                .warmup_timeout_ms = 10000,
                                .max_retries = 3};
    pool = kb_pool_new(&once_slow, &err);
    free(slow);
    end = clock_mono_ms() + 120000;
    do {
        kb_pool_poll(pool, 500);
        kb_pool_stats(pool, &st);
    } while (st.ready < 1 && !st.paused && clock_mono_ms() < end);
    ok(st.abandoned >= 1 && st.ready == 1 && st.warmups == 1 && !st.paused,
       "a warm-up abandoned for taking too long is retried, and the retry "
       "becomes ready (abandoned %lu)",
       st.abandoned);
    once_t o4 = {0};
    kb_kernel_t *k4 = NULL;
    kb_launcher_t *l4 = kb_pool_take(pool, NULL, NULL, &err);
    if (l4)
        k4 = s_start(l4, &err, &o4);
    r = k4 ? s_eval(k4, "1+1") : NULL;
    is_str(r, "2", "the retried kernel runs code");
    free(r);
    kb_kernel_destroy(&k4);
    kb_pool_destroy(&pool);

    /* Demand (issue 29, item 22): back-to-back takes must not drain the
     * pool. Counts, never times. */
    kb_pool_opts_t grow = {.size = 1, .max_size = 3, .max_starting = 3};
    pool = kb_pool_new(&grow, &err);
    s_fill(pool, 1, 120000);
    kb_pool_stats(pool, &st);
    ok(st.ready == 1 && st.target == 1 && st.max_size == 3,
       "a pool of size 1, max_size 3 starts with one kernel (target %u)",
       st.target);
    kb_launcher_t *g1 = kb_pool_take(pool, NULL, NULL, &err);
    kb_pool_stats(pool, &st);
    ok(g1 && st.starting == 1,
       "a take that leaves the pool empty refills at once, without the "
       "refill delay (starting %u)",
       st.starting);
    int wait_ms = -1;
    kb_launcher_t *g2 = kb_pool_take_wait(pool, NULL, NULL, &wait_ms, &err);
    kb_pool_stats(pool, &st);
    ok(!g2 && wait_ms > 0 && st.misses == 1 && st.cold == 0,
       "a take while a warm-up is in progress may wait for it (%d ms) and "
       "is not counted as a cold miss",
       wait_ms);
    ok(st.target == 2 && st.starting == 2,
       "the miss grows the target by one and a second warm-up starts in "
       "parallel (target %u, starting %u)",
       st.target, st.starting);
    kb_launcher_t *g3 = kb_pool_take(pool, NULL, NULL, &err);
    kb_launcher_t *g4 = kb_pool_take(pool, NULL, NULL, &err);
    kb_pool_stats(pool, &st);
    ok(!g3 && !g4 && st.misses == 3 && st.cold == 2 && st.target == 3 &&
           st.starting == 3,
       "misses grow it up to max_size and no further, all refilling at "
       "once; a take that does not wait is a cold miss (target %u, "
       "starting %u, cold %lu)",
       st.target, st.starting, st.cold);
    end = clock_mono_ms() + 120000;
    while (!g2 && clock_mono_ms() < end) {
        kb_pool_poll(pool, 200);
        g2 = kb_pool_take_again(pool, false, &err);
    }
    kb_pool_stats(pool, &st);
    ok(g2 && st.waited == 1 && st.hits == 1,
       "the waiting take gets the first warm-up that becomes ready "
       "(waited %lu)",
       st.waited);
    s_fill(pool, 3, 120000);
    kb_pool_stats(pool, &st);
    ok(st.ready == 3, "the grown pool refills to its target of 3 (ready %u)",
       st.ready);
    kb_launcher_destroy(&g1);
    kb_launcher_destroy(&g2);
    kb_pool_destroy(&pool);
    return done_testing();
}
