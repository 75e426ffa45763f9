/*
 * Code inside the kernel is untrusted: it can read the HMAC key and talk on
 * the kernel's own sockets. Each check runs such code in a real sandboxed
 * ipykernel and shows the bridge holds:
 *   - a message signed with the wrong key is dropped and counted;
 *   - a correctly signed JSON depth bomb is dropped as malformed;
 *   - an output flood stops at the cap, with a marker, and nothing is lost
 *     before it.
 */
#include "../tap.h"

#include "common/xalloc.h"
#include "kernel-bridge/kb_kernel.h"
#include "kernel-bridge/launch/kb_launch_sandbox.h"

#include <stdlib.h>

static kb_launcher_t *
s_sandbox(void *arg, err_t *err)
{
    (void)arg;
    return kb_launcher_sandbox_new(NULL, err);
}

/* Python that publishes display_data CONTENT on the kernel's own iopub as
 * an output of the running cell, signed with KEY (a bytes expression;
 * "s.key" is the real key). */
static char *
s_publish(const char *key, const char *content)
{
    return xasprintf("import hmac, hashlib\n"
                     "k = get_ipython().kernel\n"
                     "s = k.session\n"
                     "saved = s.auth\n"
                     "s.auth = hmac.HMAC(%s, digestmod=hashlib.sha256)\n"
                     "try:\n"
                     "    s.send(k.iopub_socket, 'display_data', %s,\n"
                     "           parent=k.get_parent('shell'))\n"
                     "finally:\n"
                     "    s.auth = saved\n"
                     "print('sent', flush=True)\n",
                     key, content);
}

/* Run code; the outputs' JSON text (caller frees) and the status. */
static char *
s_run(kb_kernel_t *k, const char *code, size_t max_output, int *rc,
      kb_output_t **keep)
{
    err_t err;
    kb_output_t *out = kb_output_new(NULL, max_output);
    *rc = kb_kernel_execute(k, code, NULL, 60000, out, NULL, &err);
    char *text = json_dumps(kb_output_outputs(out), 0);
    if (keep)
        *keep = out;
    else
        kb_output_destroy(&out);
    return text;
}

int
main(void)
{
    err_t err = {0};
    kb_kernel_opts_t kopts = {.launcher = s_sandbox,
                              .max_output_bytes = 1 << 20};
    kb_kernel_t *k = kb_kernel_start(&kopts, &err);
    if (!ok(k != NULL, "a sandboxed ipykernel starts")) {
        diag("%s", err.text);
        return done_testing();
    }
    const kb_wire_stats_t *stats = kb_client_stats(kb_kernel_client(k));
    int rc;

    /* A control: the same path with the real key is accepted. */
    char *code = s_publish(
        "s.key", "{'data': {'text/plain': 'GENUINE'}, 'metadata': {}}");
    char *text = s_run(k, code, 0, &rc, NULL);
    ok(rc == 0 && text && strstr(text, "GENUINE"),
       "a display published with the real key arrives (the test's control)");
    free(text);
    free(code);

    uint64_t bad = stats->bad_signature;
    code = s_publish("b'not-the-key'",
                     "{'data': {'text/plain': 'FORGED'}, 'metadata': {}}");
    text = s_run(k, code, 0, &rc, NULL);
    ok(rc == 0 && text && !strstr(text, "FORGED") && strstr(text, "sent"),
       "a display signed with another key is not shown (the cell still "
       "completes)");
    ok(stats->bad_signature == bad + 1,
       "and it is counted as a bad signature (%llu)",
       (unsigned long long)(stats->bad_signature - bad));
    free(text);
    free(code);

    uint64_t malformed = stats->malformed;
    code = s_publish("s.key", "{'data': {'text/plain': 'DEEP'}, 'metadata': "
                              "{'x': eval('[' * 200 + ']' * 200)}}");
    text = s_run(k, code, 0, &rc, NULL);
    ok(rc == 0 && text && !strstr(text, "DEEP"),
       "a correctly signed message nested 200 deep is not parsed");
    ok(stats->malformed == malformed + 1, "and it is counted as malformed");
    free(text);
    free(code);

    kb_output_t *out = NULL;
    text = s_run(k,
                 "import sys\n"
                 "print('first line', flush=True)\n"
                 "for i in range(200):\n"
                 "    sys.stdout.write('x' * 65536)\n"
                 "sys.stdout.flush()\n",
                 1 << 20, &rc, &out);
    ok(rc == 0 && kb_output_truncated(out),
       "12.5 MiB of output stops at the 1 MiB cap");
    ok(kb_output_bytes(out) <= (1 << 20) + 4096,
       "no more than the cap is stored (%zu bytes)", kb_output_bytes(out));
    ok(text && strstr(text, "first line") &&
           strstr(text, "output truncated after"),
       "what came before is kept and the cut is marked");
    free(text);
    kb_output_destroy(&out);

    text = s_run(k, "print('still here')", 0, &rc, NULL);
    ok(rc == 0 && text && strstr(text, "still here"),
       "after all of that the kernel and the bridge keep working");
    free(text);

    kb_kernel_destroy(&k);
    return done_testing();
}
