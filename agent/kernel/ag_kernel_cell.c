/*
 * ag_kernel_cell: what the agent kernel's cell shows and asks while it
 * runs (streams, markdown, the answer, errors, input), the services
 * ag_kernel.h gives opts->ask and the magics. The lowest file of the
 * agent kernel: it calls none of the others (ag_kernel.c, which runs
 * the cells, is on top).
 */
#include "agent/kernel/ag_kernel.h"
#include "agent/kernel/ag_kernel_impl.h"
#include "agent/loop/ag_markdown.h"
#include "common/jget.h"
#include "common/xalloc.h"
#include "kernel-bridge/kb_server.h"

#include <stdlib.h>
#include <string.h>

void
ag_kernel_set_cell_error(ag_kernel_t *k, json_t *content)
{
    json_decref(k->cell_error);
    k->cell_error = json_pack(
        "{s:s, s:s, s:O}", "ename", jget_str(content, "ename", "Error"),
        "evalue", jget_str(content, "evalue", ""), "traceback",
        json_is_array(json_object_get(content, "traceback"))
            ? json_object_get(content, "traceback")
            : json_array());
}

const char *
ag_kernel_ename(int code)
{
    switch (code) {
    case ERR_INTERRUPTED:
        return "KeyboardInterrupt";
    case ERR_TIMEOUT:
        return "TimeoutError";
    case ERR_KERNEL:
        return "DeadKernelError";
    case ERR_SANDBOX:
        return "SandboxError";
    case ERR_PROVIDER:
        return "ProviderError";
    case ERR_USAGE:
        return "UsageError";
    default:
        return "AgentError";
    }
}

const char *
ag_kernel_model(const ag_kernel_t *k)
{
    return k->model;
}

void
ag_kernel_stream(ag_kernel_t *k, const char *name, const char *text)
{
    kb_server_stream(k->server, k->cell, name, text);
}

static void
s_display(ag_kernel_t *k, const char *type, const char *markdown,
          const char *plain)
{
    char *md = ag_markdown_escape_currency(markdown);
    json_t *content = json_pack("{s:{s:s, s:s}, s:{}}", "data", "text/markdown",
                                md, "text/plain", plain, "metadata");
    free(md);
    if (strcmp(type, "execute_result") == 0)
        json_object_set_new(content, "execution_count",
                            json_integer(k->cell_count));
    kb_server_publish(k->server, k->cell, type, content, NULL);
}

void
ag_kernel_show_code(ag_kernel_t *k, const char *code)
{
    /* A fence longer than any backtick run in the code keeps it intact. */
    int longest = 0, run = 0;
    for (const char *p = code; *p; p++) {
        run = *p == '`' ? run + 1 : 0;
        if (run > longest)
            longest = run;
    }
    int fence = longest >= 3 ? longest + 1 : 3;
    size_t len = strlen(code);
    bool nl = len && code[len - 1] == '\n';
    char *md = xasprintf(
        "%.*spython\n%s%s%.*s\n", fence, "````````````````````````````````",
        code, nl ? "" : "\n", fence, "````````````````````````````````");
    s_display(k, "display_data", md, code);
    free(md);
}

void
ag_kernel_display_markdown(ag_kernel_t *k, const char *markdown)
{
    s_display(k, "display_data", markdown, markdown);
}

void
ag_kernel_answer(ag_kernel_t *k, const char *markdown)
{
    if (k->cell_answered || k->cell_silent)
        return;
    k->cell_answered = true;
    s_display(k, "execute_result", markdown, markdown);
    json_decref(k->cell_result);
    k->cell_result = json_string(markdown);
}

void
ag_kernel_error(ag_kernel_t *k, const char *ename, const char *evalue)
{
    json_t *content = json_pack("{s:s, s:s, s:[s]}", "ename", ename, "evalue",
                                evalue, "traceback", evalue);
    ag_kernel_set_cell_error(k, content);
    kb_server_publish(k->server, k->cell, "error", content, NULL);
}

bool
ag_kernel_should_stop(ag_kernel_t *k)
{
    return (kb_server_events(k->server) &
            (KB_SERVER_INTERRUPT | KB_SERVER_SHUTDOWN)) != 0;
}

const atomic_int *
ag_kernel_cancel_flag(ag_kernel_t *k)
{
    return kb_server_cancel_flag(k->server);
}

char *
ag_kernel_input(ag_kernel_t *k, const char *prompt, bool password, err_t *err)
{
    if (!k->cell || !k->cell_allow_stdin) {
        err_set(err, ERR_USAGE, "this frontend does not accept input");
        return NULL;
    }
    return kb_server_input(k->server, k->cell, prompt, password, 0, err);
}

void *
ag_kernel_ask_state(ag_kernel_t *k)
{
    return k->ask_state;
}

void
ag_kernel_set_ask_state(ag_kernel_t *k, void *state, void (*free_fn)(void *))
{
    if (k->ask_free && k->ask_state && k->ask_state != state)
        k->ask_free(k->ask_state);
    k->ask_state = state;
    k->ask_free = free_fn;
}

void
ag_kernel_interrupt(ag_kernel_t *k)
{
    kb_server_raise(k->server, KB_SERVER_INTERRUPT);
}

void
ag_kernel_stop(ag_kernel_t *k)
{
    kb_server_stop(k->server);
}
