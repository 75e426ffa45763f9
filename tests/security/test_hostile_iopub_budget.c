/*
 * A hostile kernel's one big message costs the agent what its budgets
 * allow, not what the kernel sends. Code in a real sandboxed ipykernel
 * signs messages with its own key and publishes them from its iopub
 * thread, with the running cell as parent:
 *   1. (issue 29, item 20) under a 1 MiB output budget, one display of
 *      8 frames of 32 MiB: our iopub reader drops it as its frame headers
 *      show it cannot fit the budget, so the agent's peak grows by less
 *      than the budget plus a small constant, and the cell's output says
 *      it was truncated (the output did not silently vanish);
 *   2. (issue 24, item 3) under the default 64 MiB budget, one stream
 *      message whose content is 48 MiB of [0,0,...]: refused before
 *      jansson builds ~1 GiB of it, so the peak grows by less than twice
 *      the bytes received, and the kernel keeps working.
 * Peak RSS is this process's (the agent side; the kernel is another).
 */
#include "../tap.h"
#include "../tools/kernel_run.h"

#include "common/xalloc.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CAP (1 << 20)
#define HANG_SECONDS 240
/* What the agent may hold beyond the budget: the reader's buffer, the
 * drain, allocator slack on a loaded machine. */
#define SMALL_MIB 24

static void
s_hung(int sig)
{
    (void)sig;
    static const char msg[] = "not ok - the agent hung on one message\n";
    if (write(1, msg, sizeof msg - 1) < 0)
        _exit(2);
    _exit(1);
}

static bool
s_has(kb_output_t *out, const char *text)
{
    char *j = json_dumps(kb_output_outputs(out), 0);
    bool yes = j && strstr(j, text);
    free(j);
    return yes;
}

/* Python: send frames built by BUILD (a list `frames` after the signed
 * parts of message `m`) once from the iopub thread, then wait for it. */
static const char s_send_py[] =
    "import threading, time\n"
    "k = get_ipython().kernel\n"
    "s = k.session\n"
    "t = k.iopub_thread\n"
    "done = threading.Event()\n"
    "%s\n"
    "def send():\n"
    "    t.socket.send_multipart([b'x'] + frames, copy=False)\n"
    "    done.set()\n"
    "t.schedule(send)\n"
    "done.wait(120)\n"
    "del frames\n"
    "time.sleep(1)\n"
    "print('sent', flush=True)\n";

static kb_kernel_t *
s_start(size_t max_output)
{
    err_t err = {0};
    kb_kernel_opts_t kopts = {.launcher = kernel_run_sandbox,
                              .max_output_bytes = max_output,
                              .interrupt_grace_ms = 2000};
    kb_kernel_t *k = kb_kernel_start(&kopts, &err);
    if (!ok(k != NULL, "a sandboxed ipykernel starts (output budget %zu)",
            max_output))
        diag("%s", err.text);
    return k;
}

static int
s_run(kb_kernel_t *k, const char *build, size_t cap, kb_output_t **out,
      err_t *err)
{
    char *code = xasprintf(s_send_py, build);
    *out = kb_output_new(NULL, cap);
    alarm(HANG_SECONDS);
    int rc = kb_kernel_execute(k, code, NULL, 180000, *out, NULL, err);
    alarm(0);
    free(code);
    return rc;
}

int
main(void)
{
    signal(SIGALRM, s_hung);
#if defined(__SANITIZE_ADDRESS__)
    skip("peak RSS is not meaningful under ASan");
    return done_testing();
#endif
    err_t err = {0};
    kb_output_t *out = NULL;

    /* 1. 8 x 32 MiB under a 1 MiB budget. */
    kb_kernel_t *k = s_start(CAP);
    if (!k)
        return done_testing();
    long before = kernel_run_peak_mib();
    int rc = s_run(k,
                   "m = s.msg('display_data', content={'data': {'text/plain': "
                   "'B' * (32 << 20)}, 'metadata': {}}, "
                   "parent=k.get_parent('shell'))\n"
                   "frames = s.serialize(m) + [memoryview(bytearray(32 << "
                   "20))] * 7\n",
                   CAP, &out, &err);
    long grew = kernel_run_peak_mib() - before;
    ok(rc == 0,
       "the cell that sent 8 x 32 MiB in one message completes (rc %d: %s)", rc,
       err.text);
    ok(grew < CAP / (1 << 20) + SMALL_MIB,
       "the agent's peak grew by %ld MiB (< the 1 MiB budget + %d MiB)", grew,
       SMALL_MIB);
    ok(kb_output_truncated(out) && s_has(out, "output truncated after"),
       "and the cell's output says it was truncated");
    ok(!s_has(out, "BBBB"), "none of the dropped message was stored");
    diag("8 x 32 MiB under --max-output 1M: peak RSS +%ld MiB (%ld MiB, "
         "%ld before)",
         grew, kernel_run_peak_mib(), before);
    kb_output_destroy(&out);
    kb_kernel_destroy(&k);

    /* 2. 48 MiB of [0,0,...] under the default budget. */
    k = s_start(0);
    if (!k)
        return done_testing();
    before = kernel_run_peak_mib();
    rc = s_run(k,
               "m = s.msg('stream', content={'name': 'stdout', 'text': "
               "'DENSE'}, parent=k.get_parent('shell'))\n"
               "frames = s.serialize(m)\n"
               "frames[5] = b'{\"name\":\"stdout\",\"text\":\"DENSE\",\"p\":[' "
               "+ b'0,' * (24 << 20) + b'0]}'\n"
               "frames[1] = s.sign(frames[2:6])\n",
               0, &out, &err);
    grew = kernel_run_peak_mib() - before;
    ok(rc == 0 && s_has(out, "sent") && !s_has(out, "DENSE"),
       "a signed 48 MiB stream message of [0,0,...] is refused (rc %d: %s)", rc,
       err.text);
    ok(grew < 2 * 48 + SMALL_MIB,
       "the agent's peak grew by %ld MiB (< 2 x 48 MiB received + %d)", grew,
       SMALL_MIB);
    diag("48 MiB of dense JSON under the default budget: peak RSS +%ld MiB "
         "(%ld MiB, %ld before)",
         grew, kernel_run_peak_mib(), before);
    kb_output_destroy(&out);
    rc = s_run(k, "frames = []", 0, &out, &err);
    ok(rc == 0 && s_has(out, "sent"), "the kernel keeps working after it");
    kb_output_destroy(&out);
    kb_kernel_destroy(&k);
    return done_testing();
}
