/*
 * The agent kernel's interface for the tool loop: this program passes its
 * own ask function as ag_kernel_opts_t.ask (instead of the tool loop) that uses
 * every service a loop has, and checks with kb_client what a frontend
 * receives: streamed text, the code shown as markdown, the inner Python's
 * outputs, the final answer as the cell's execute_result, errors,
 * interrupts and state kept across cells.
 * Runs the inner kernel sandboxed unless JA_TEST_LAUNCHER=plain or
 * JA_TEST_SANDBOX=0.
 */
#include "../tap.h"

#include "agent/kernel/ag_kernel.h"
#include "kernel-bridge/kb_client.h"
#include "kernel-bridge/kb_conn.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WAIT_MS 120000

/* What the fake loop saw, for the checks. */
static kb_output_t *s_tool_out; /* outputs of its ag_kernel_run_python */
static int s_tool_rc = -2;      /* what ag_kernel_run_python returned */
static int s_state_freed;       /* times the ask state was released */

static void
s_free_state(void *p)
{
    s_state_freed++;
    free(p);
}

static int
s_ask(ag_kernel_t *k, const char *request, err_t *err)
{
    if (strcmp(request, "fail") == 0)
        return err_set(err, ERR_PROVIDER, "the model server said no");
    if (strcmp(request, "wait") == 0) {
        const atomic_int *cancel = ag_kernel_cancel_flag(k);
        for (int i = 0; i < 6000 && !atomic_load(cancel); i++)
            usleep(10000);
        return ag_kernel_should_stop(k)
                   ? err_set(err, ERR_INTERRUPTED, "stopped by the user")
                   : 0;
    }
    if (strcmp(request, "count") == 0) {
        int *n = ag_kernel_ask_state(k);
        if (!n) {
            n = calloc(1, sizeof *n);
            ag_kernel_set_ask_state(k, n, s_free_state);
        }
        char text[32];
        snprintf(text, sizeof text, "cell %d", ++*n);
        ag_kernel_answer(k, text);
        return 0;
    }
    ag_kernel_stream(k, "stdout", "Let me compute that.\n");
    ag_kernel_show_code(k, "print(6 * 7)\n6 * 7");
    kb_output_destroy(&s_tool_out);
    s_tool_out = kb_output_new(NULL, 0);
    s_tool_rc = ag_kernel_run_python(k, "print(6 * 7)\n6 * 7", s_tool_out, err);
    if (s_tool_rc)
        return -1;
    ag_kernel_answer(k, "The answer is **42**.");
    return 0;
}

static void *
s_serve(void *arg)
{
    ag_kernel_run(arg);
    return NULL;
}

static json_t *
s_nth(kb_output_t *out, size_t i)
{
    return json_array_get(kb_output_outputs(out), i);
}

static const char *
s_field(json_t *o, const char *a, const char *b)
{
    json_t *v = json_object_get(o, a);
    if (b)
        v = json_object_get(v, b);
    return json_string_value(v);
}

static kb_output_t *
s_exec(kb_client_t *c, const char *code, int *rc)
{
    err_t err = {0};
    kb_output_t *out = kb_output_new(NULL, 0);
    kb_exec_t *x = kb_client_execute_start(c, code, NULL, &err);
    *rc = x ? kb_client_execute_wait(c, x, out, NULL, 0, &err) : -1;
    if (*rc)
        diag("%s: %s", code, err.text);
    kb_exec_destroy(&x);
    return out;
}

int
main(void)
{
    const char *launcher = getenv("JA_TEST_LAUNCHER");
    const char *sandbox = getenv("JA_TEST_SANDBOX");
    char dir[] = "/tmp/agseamXXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char prefix[64], path[64];
    snprintf(prefix, sizeof prefix, "%s/k", dir);
    snprintf(path, sizeof path, "%s/conn.json", dir);
    kb_conn_t conn;
    err_t err = {0};
    kb_conn_init_ipc(&conn, prefix, &err);
    kb_conn_save(&conn, path, &err);

    ag_session_opts_t sopts;
    ag_session_opts_init(&sopts);
    sopts.no_sandbox = (launcher && strcmp(launcher, "plain") == 0) ||
                       (sandbox && strcmp(sandbox, "0") == 0);
    ag_kernel_opts_t kopts = {
        .connection_file = path, .ask = s_ask, .inner = &sopts};
    ag_kernel_t *k = ag_kernel_new(&kopts, &err);
    if (!ok(k != NULL, "the agent kernel binds its connection file")) {
        diag("%s", err.text);
        return done_testing();
    }
    pthread_t thread;
    pthread_create(&thread, NULL, s_serve, k);
    kb_client_t *c = kb_client_new(&conn, NULL, &err);
    kb_msg_t *info = c ? kb_client_wait_ready(c, WAIT_MS, &err) : NULL;
    ok(info != NULL, "a client gets kernel_info from it");
    kb_msg_destroy(&info);

    /* A plain cell through the seam. */
    int rc;
    kb_output_t *out = s_exec(c, "what is six times seven?", &rc);
    ok(rc == 0 && strcmp(kb_output_status(out), "ok") == 0,
       "a request the loop answers replies status ok");
    json_t *o = s_nth(out, 0);
    is_str(s_field(o, "output_type", NULL), "stream",
           "streamed assistant text arrives as a stream output");
    is_str(s_field(o, "text", NULL), "Let me compute that.\n",
           "with the text the loop streamed");
    o = s_nth(out, 1);
    is_str(s_field(o, "data", "text/markdown"),
           "```python\nprint(6 * 7)\n6 * 7\n```\n",
           "the code the agent runs is shown as a markdown python block");
    is_str(s_field(o, "data", "text/plain"), "print(6 * 7)\n6 * 7",
           "with the bare code as text/plain for consoles");
    o = s_nth(out, 2);
    is_str(s_field(o, "text", NULL), "42\n",
           "the inner Python's stream output is forwarded");
    o = s_nth(out, 3);
    is_str(s_field(o, "output_type", NULL), "display_data",
           "the inner execute_result is forwarded as display_data");
    is_str(s_field(o, "data", "text/plain"), "42", "with its data intact");
    o = s_nth(out, 4);
    is_str(s_field(o, "output_type", NULL), "execute_result",
           "the answer is the cell's execute_result");
    is_str(s_field(o, "data", "text/markdown"), "The answer is **42**.",
           "as markdown");
    is_int(json_integer_value(json_object_get(o, "execution_count")),
           kb_output_execution_count(out), "with the cell's execution count");
    is_int(json_array_size(kb_output_outputs(out)), 5,
           "and nothing else is shown");
    ok(s_tool_rc == 0 && s_tool_out &&
           json_array_size(kb_output_outputs(s_tool_out)) == 2,
       "the loop gets the inner outputs back for the model");
    kb_output_destroy(&out);

    /* Failures become error outputs; the kernel keeps serving. */
    out = s_exec(c, "fail", &rc);
    o = s_nth(out, 0);
    ok(rc == 0 && strcmp(kb_output_status(out), "error") == 0,
       "a failed request replies status error");
    is_str(s_field(o, "ename", NULL), "ProviderError",
           "the error output is named after the failure");
    is_str(s_field(o, "evalue", NULL), "the model server said no",
           "and says what went wrong");
    kb_output_destroy(&out);

    /* An interrupt reaches a loop that is waiting on the model. */
    kb_exec_t *x = kb_client_execute_start(c, "wait", NULL, &err);
    usleep(300000);
    kb_msg_t *ir = kb_client_request(c, KB_CONTROL, "interrupt_request", NULL,
                                     10000, &err);
    ok(ir != NULL, "interrupt_request is answered while the loop runs");
    kb_msg_destroy(&ir);
    out = kb_output_new(NULL, 0);
    rc = x ? kb_client_execute_wait(c, x, out, NULL, 0, &err) : -1;
    kb_exec_destroy(&x);
    ok(rc == 0 && strcmp(kb_output_status(out), "error") == 0,
       "the interrupted cell replies status error");
    is_str(s_field(s_nth(out, 0), "ename", NULL), "KeyboardInterrupt",
           "with a KeyboardInterrupt error, as Python cells have");
    kb_output_destroy(&out);

    /* State kept across cells, released by %reset. */
    out = s_exec(c, "count", &rc);
    kb_output_destroy(&out);
    out = s_exec(c, "count", &rc);
    is_str(s_field(s_nth(out, 0), "data", "text/plain"), "cell 2",
           "the loop's state survives between cells");
    kb_output_destroy(&out);
    out = s_exec(c, "%reset", &rc);
    is_int(s_state_freed, 1, "%%reset releases the loop's state");
    kb_output_destroy(&out);
    out = s_exec(c, "count", &rc);
    is_str(s_field(s_nth(out, 0), "data", "text/plain"), "cell 1",
           "and the next cell starts a new conversation");
    kb_output_destroy(&out);

    kb_msg_t *sr =
        kb_client_request(c, KB_CONTROL, "shutdown_request",
                          json_pack("{s:b}", "restart", 0), 10000, &err);
    ok(sr != NULL, "shutdown_request is answered");
    kb_msg_destroy(&sr);
    pthread_join(thread, NULL);
    ag_kernel_destroy(&k);
    ok(k == NULL, "the kernel shuts down and is destroyed");
    kb_client_destroy(&c);
    kb_output_destroy(&s_tool_out);
    kb_conn_release(&conn);
    ag_session_opts_release(&sopts);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        diag("could not remove %s", dir);
    return done_testing();
}
