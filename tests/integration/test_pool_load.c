/*
 * Warm kernels taken again and again while the machine is busy: every take
 * gets a kernel that becomes ready and runs `1+1`, both for a pool of
 * fresh interpreters and for a pool forked from a factory. A bounded CPU
 * burner (one busy process per core plus one, killed at the end and by
 * alarm() in any case) runs for the whole test, since the stall this
 * guards against (issue 19: "kernel 'python3' did not become ready within
 * 60 s") appeared only under load and under ASan.
 *
 * The stall's cause: the session's client started watching its stdin
 * socket for the ZMTP handshake only after connecting it, and a warm
 * kernel (bound long before) can finish that handshake in between when the
 * session's thread is descheduled; readiness then waited for an event that
 * had already passed. The first take from each pool reproduces that moment
 * deterministically: this program's own zmq_connect() (it interposes the
 * library's) pauses the thread right after the stdin socket connects.
 *
 * No timing is asserted: a take that stalls fails because its start-up
 * times out, which is the failure users saw.
 *
 * JA_POOL_LOAD_TAKES (default 8) sets the takes per pool, JA_POOL_LOAD_SECS
 * (default 240) the time after which no new take starts.
 */
#include "../tap.h"

#include "common/clock.h"
#include "kernel-bridge/kb_kernel.h"
#include "kernel-bridge/pool/kb_factory.h"
#include "kernel-bridge/pool/kb_pool.h"
#include "kernel-bridge/pool/kb_warm.h"

#include <dlfcn.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#define MAX_BURNERS 16

static pid_t s_burners[MAX_BURNERS];
static int s_nburners;

/* Start n busy loops that end by themselves after `secs` (alarm) or when
 * this process dies (PDEATHSIG), whichever comes first. */
static void
s_burn_start(int n, int secs)
{
    for (int i = 0; i < n && s_nburners < MAX_BURNERS; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            alarm((unsigned)secs);
            volatile unsigned long x = 0;
            for (;;)
                x++;
        }
        if (pid > 0)
            s_burners[s_nburners++] = pid;
    }
}

static void
s_burn_stop(void)
{
    for (int i = 0; i < s_nburners; i++) {
        kill(s_burners[i], SIGKILL);
        waitpid(s_burners[i], NULL, 0);
    }
    s_nburners = 0;
}

/* Milliseconds to pause after connecting a kernel's stdin socket
 * ("ipc://.../kernel-3", kb_conn's ipc layout), or 0. */
static int s_stdin_pause_ms;

/* Interposes libzmq's zmq_connect for the whole program (the client code
 * linked into it calls this one): the real connect, then the pause. */
int
zmq_connect(void *s, const char *endpoint)
{
    static int (*real)(void *, const char *);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "zmq_connect");
    int rc = real(s, endpoint);
    size_t n = strlen(endpoint);
    if (s_stdin_pause_ms > 0 && n > 9 &&
        strcmp(endpoint + n - 9, "/kernel-3") == 0)
        usleep((useconds_t)s_stdin_pause_ms * 1000);
    return rc;
}

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

/* Run `code`; the text/plain of its result (new) or NULL. */
static char *
s_eval(kb_kernel_t *k, const char *code, err_t *err)
{
    kb_output_t *out = kb_output_new(NULL, 0);
    kb_exec_opts_t opts;
    kb_exec_opts_init(&opts);
    char *text = NULL;
    if (kb_kernel_execute(k, code, &opts, 60000, out, NULL, err) == 0) {
        size_t i;
        json_t *o;
        json_array_foreach(kb_output_outputs(out), i, o)
        {
            json_t *d = json_object_get(o, "data");
            const char *t =
                d ? json_string_value(json_object_get(d, "text/plain")) : NULL;
            if (t && !text)
                text = strdup(t);
        }
    }
    kb_output_destroy(&out);
    return text;
}

/* Wait for one ready kernel (a warm-up under load may take long). */
static bool
s_wait_ready(kb_pool_t *p, int ms)
{
    int64_t end = clock_mono_ms() + ms;
    kb_pool_stats_t st;
    kb_pool_stats(p, &st);
    unsigned long failed = st.failed;
    do {
        kb_pool_poll(p, 200);
        kb_pool_stats(p, &st);
    } while (st.ready < 1 && st.failed == failed && clock_mono_ms() < end);
    if (st.ready < 1 && st.last_error[0])
        diag("pool: %s", st.last_error);
    return st.ready >= 1;
}

/* Take one kernel, start it (start-up timeout `timeout_ms`, 0 = the
 * default 60 s) and run 1+1; true if it answered 2. */
static bool
s_take_one(kb_pool_t *p, int n, int timeout_ms)
{
    err_t err = {0};
    if (!s_wait_ready(p, 180000)) {
        diag("take %d: no kernel became ready", n);
        return false;
    }
    kb_launcher_t *l = kb_pool_take(p, NULL, NULL, &err);
    if (!l) {
        diag("take %d: %s", n, err.text);
        return false;
    }
    once_t o = {l};
    kb_kernel_opts_t ko = {.launcher = s_once,
                           .launcher_arg = &o,
                           .startup_timeout_ms = timeout_ms};
    kb_kernel_t *k = kb_kernel_start(&ko, &err);
    if (!k) {
        diag("take %d: %s", n, err.text);
        return false;
    }
    char *r = s_eval(k, "1+1", &err);
    bool good = r && strcmp(r, "2") == 0;
    if (!good)
        diag("take %d: 1+1 gave %s (%s)", n, r ? r : "nothing", err.text);
    free(r);
    kb_kernel_destroy(&k);
    kb_pool_poll(p, 0);
    return good;
}

/* Take and use kernels until `takes` were taken or `until_ms` passed.
 * Returns how many takes were tried; *good counts those that became ready
 * and answered 1+1. */
static int
s_take_loop(kb_pool_t *p, int takes, int64_t until_ms, int *good)
{
    int tried = 0;
    *good = 0;
    for (; tried < takes && clock_mono_ms() < until_ms; tried++)
        *good += s_take_one(p, tried + 1, 0);
    return tried;
}

/* The session's thread pauses right after connecting stdin: the warm
 * kernel's handshake completes meanwhile. */
static bool
s_take_paused(kb_pool_t *p)
{
    s_stdin_pause_ms = 500;
    bool good = s_take_one(p, 0, 20000);
    s_stdin_pause_ms = 0;
    return good;
}

static int
s_env_int(const char *name, int def)
{
    const char *v = getenv(name);
    return v && atoi(v) > 0 ? atoi(v) : def;
}

int
main(void)
{
    int takes = s_env_int("JA_POOL_LOAD_TAKES", 8);
    int secs = s_env_int("JA_POOL_LOAD_SECS", 240);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int burners = cores > 0 ? (int)cores + 1 : 3;
    if (burners > MAX_BURNERS)
        burners = MAX_BURNERS;
    /* The burners outlive the last take's start by at most the time one
     * take may need, and are killed at the end anyway. */
    s_burn_start(burners, secs + 600);
    ok(s_nburners == burners, "%d CPU burners run during the test", burners);
    int64_t until = clock_mono_ms() + (int64_t)secs * 1000;

    err_t err = {0};
    kb_pool_opts_t po = {.size = 2};
    kb_pool_t *pool = kb_pool_new(&po, &err);
    ok(s_take_paused(pool),
       "a warm kernel becomes ready even if the session's thread stalls "
       "right after connecting (its handshake is not missed)");
    int good = 0, tried = s_take_loop(pool, takes, until, &good);
    diag("fresh interpreters: %d takes, %d ready and answered", tried, good);
    ok(tried > 0 && good == tried,
       "under load every kernel taken from a pool becomes ready and runs "
       "1+1 (%d of %d)",
       good, tried);
    kb_pool_destroy(&pool);

    kb_factory_opts_t fo = {.preload = "import pandas"};
    kb_factory_t *f = kb_factory_new(&fo, &err);
    ok(f != NULL, "a factory starts under load");
    if (!f)
        diag("%s", err.text);
    if (f) {
        kb_pool_opts_t fpo = {.size = 2, .factory = f};
        pool = kb_pool_new(&fpo, &err);
        ok(s_take_paused(pool),
           "a forked kernel becomes ready even if the session's thread "
           "stalls right after connecting");
        until = clock_mono_ms() + (int64_t)secs * 1000;
        tried = s_take_loop(pool, takes, until, &good);
        diag("forked from a factory: %d takes, %d ready and answered", tried,
             good);
        ok(tried > 0 && good == tried,
           "under load every kernel forked from a factory becomes ready and "
           "runs 1+1 (%d of %d)",
           good, tried);
        kb_pool_destroy(&pool);
        kb_factory_destroy(&f);
    }
    s_burn_stop();
    return done_testing();
}
