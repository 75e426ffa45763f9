/*
 * startup: cold start of a kernel through our kernel manager.
 *
 *   startup [-l plain|sandbox|box] [-L LAYERS] [-r RUNS] [-w WARMUP]
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
 *
 * With -l box no kernel starts: "ready" is a new sandbox running /bin/true
 * (sb_sandbox_new + spawn, which returns once the program was exec'ed),
 * "result" is when it has exited and was reaped: the box's own cost.
 *
 * -L picks the protection layers of sandbox and box runs, for the side by
 * side table: all (default: namespaces, the seccomp allow list and deny
 * rows, Landlock), no-landlock, no-seccomp, deny-only (namespaces and the
 * deny rows alone: the sandbox before the allow list and Landlock), or
 * namespaces (neither filter). It uses the test-only knobs of
 * sb_sandbox.h, which only programs like this one define.
 */
#include "bench/bench.h"
#include "common/clock.h"
#include "kernel-bridge/kb_kernel.h"
#include "kernel-bridge/launch/kb_launch_sandbox.h"
#include "sandbox/sb_sandbox.h"

#include <string.h>
#include <unistd.h>

static kb_launcher_t *
s_sandbox_factory(void *arg, err_t *err)
{
    (void)arg;
    return kb_launcher_sandbox_new(NULL, err);
}

sb_unsafe_test_knobs_t sb_unsafe_test_knobs;

static int
s_layers(const char *name)
{
    sb_unsafe_test_knobs_t *k = &sb_unsafe_test_knobs;
    memset(k, 0, sizeof *k);
    if (strcmp(name, "no-landlock") == 0)
        k->no_landlock = true;
    else if (strcmp(name, "no-seccomp") == 0)
        k->no_seccomp = true;
    else if (strcmp(name, "deny-only") == 0)
        k->no_landlock = k->seccomp_deny_only = true;
    else if (strcmp(name, "namespaces") == 0)
        k->no_landlock = k->no_seccomp = true;
    else if (strcmp(name, "all") != 0)
        return -1;
    return 0;
}

/* One box running /bin/true: spawned (exec'ed) and reaped, from new. */
static int
s_box_once(int64_t *spawned_us, int64_t *done_us, err_t *err)
{
    sb_policy_t p;
    sb_policy_init_default(&p);
    char a0[] = "/bin/true", e0[] = "PATH=/usr/bin:/bin";
    char *argv[] = {a0, NULL}, *envp[] = {e0, NULL};
    int64_t t0 = clock_mono_us();
    sb_sandbox_t *sb = sb_sandbox_new(&p, err);
    int rc = -1;
    if (sb && sb_sandbox_spawn(sb, argv, envp, -1, -1, err) == 0) {
        *spawned_us = clock_mono_us() - t0;
        sb_exit_t ex;
        if (sb_sandbox_wait(sb, -1, &ex) == 0 && sb_exit_status(&ex) == 0) {
            *done_us = clock_mono_us() - t0;
            rc = 0;
        } else {
            err_set(err, ERR_SANDBOX, "/bin/true failed in the box");
        }
    }
    sb_sandbox_destroy(&sb);
    sb_policy_release(&p);
    return rc;
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
    const char *launcher = "plain", *layers = "all";
    long runs = 10, warm = 1;
    int opt;
    while ((opt = getopt(argc, argv, "l:L:r:w:")) != -1) {
        if (opt == 'l')
            launcher = optarg;
        else if (opt == 'L')
            layers = optarg;
        else if (opt == 'r')
            runs = bench_int_arg(optarg, runs);
        else if (opt == 'w')
            warm = strcmp(optarg, "0") == 0 ? 0 : bench_int_arg(optarg, warm);
        else
            return ERR_USAGE;
    }
    bool sandbox = strcmp(launcher, "sandbox") == 0;
    bool box = strcmp(launcher, "box") == 0;
    if (!sandbox && !box && strcmp(launcher, "plain") != 0) {
        fprintf(stderr, "startup: -l takes plain, sandbox or box\n");
        return ERR_USAGE;
    }
    if (s_layers(layers) < 0) {
        fprintf(stderr, "startup: -L takes all, no-landlock, no-seccomp, "
                        "deny-only or namespaces\n");
        return ERR_USAGE;
    }
    err_t err = {0};
    if (box) {
        json_t *spawned = json_array(), *done = json_array();
        for (long i = 0; i < warm + runs; i++) {
            int64_t a = 0, b = 0;
            if (s_box_once(&a, &b, &err) < 0) {
                json_decref(spawned);
                json_decref(done);
                bench_emit(json_pack("{s:s, s:s++}", "launcher", "box",
                                     "skipped", "no sandbox here: ", err.text));
                return 0;
            }
            if (i >= warm) {
                json_array_append_new(spawned, json_integer(a));
                json_array_append_new(done, json_integer(b));
            }
        }
        bench_emit(json_pack("{s:s, s:s, s:o, s:o}", "launcher", "box",
                             "layers", layers, "ready_us", spawned, "result_us",
                             done));
        return 0;
    }
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
    bench_emit(json_pack("{s:s, s:s, s:O, s:O}", "launcher", launcher, "layers",
                         layers, "ready_us", ready, "result_us", result));
out:
    json_decref(ready);
    json_decref(result);
    return rc;
}
