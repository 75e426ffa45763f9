#include "agent/kernel/ag_loop_kernel.h"

#include "agent/llm/ag_provider.h"
#include "agent/loop/ag_loop.h"
#include "common/xalloc.h"

#include <stdlib.h>
#include <string.h>

static bool
s_configured(const ag_kernel_t *k)
{
    static const char *const vars[] = {"JUPYTER_AGENT_MODEL", "OPENAI_API_KEY",
                                       "ANTHROPIC_API_KEY", "OPENAI_BASE_URL",
                                       "ANTHROPIC_BASE_URL"};
    if (ag_kernel_model(k))
        return true;
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            return true;
    }
    return false;
}

/* ---- the tool environment: the kernel's inner session ---------------- */

static int
s_run(void *arg, const char *code, kb_output_t *out, err_t *err)
{
    return ag_kernel_run_python(arg, code, out, err);
}

static ag_session_t *
s_session(void *arg)
{
    return ag_kernel_session(arg, NULL);
}

/* ---- the UI: iopub of the current cell ------------------------------- */

static void
s_on_turn(const char *text, size_t ncalls, void *arg)
{
    /* Notes between steps; the last turn's text becomes the answer. */
    if (ncalls && text && *text)
        ag_kernel_display_markdown(arg, text);
}

static void
s_on_tool_start(const char *name, const char *code, void *arg)
{
    if (strcmp(name, "python") == 0) {
        ag_kernel_show_code(arg, code);
    } else {
        char *md = xasprintf("*%s* `%s`", name, code);
        ag_kernel_display_markdown(arg, md);
        free(md);
    }
}

static void
s_on_tool_end(const char *name, const ag_tool_result_t *res, void *arg)
{
    /* python outputs were forwarded live; show what other tools said. */
    if (strcmp(name, "python") != 0 && res->text)
        ag_kernel_stream(arg, res->is_error ? "stderr" : "stdout", res->text);
}

static void
s_on_notice(const char *text, void *arg)
{
    char *line = xasprintf("jupyter-agent: %s\n", text);
    ag_kernel_stream(arg, "stderr", line);
    free(line);
}

static void
s_free_loop(void *state)
{
    ag_loop_t *loop = state;
    ag_loop_destroy(&loop);
}

int
ag_loop_kernel_ask(ag_kernel_t *k, const char *request, err_t *err)
{
    if (!s_configured(k))
        return err_set(err, ERR_PROVIDER,
                       "no LLM provider configured: set OPENAI_API_KEY, "
                       "ANTHROPIC_API_KEY or OPENAI_BASE_URL, or "
                       "JUPYTER_AGENT_MODEL=replay:FILE");
    ag_loop_t *loop = ag_kernel_ask_state(k);
    if (!loop) {
        if (!ag_kernel_session(k, err))
            return -1;
        ag_provider_t *p = ag_provider_new(ag_kernel_model(k), err);
        if (!p)
            return -1;
        ag_loop_opts_t o = {
            .provider = &p,
            .cancel = ag_kernel_cancel_flag(k),
            .record = ag_kernel_record(k),
            .env = {.run_python = s_run, .session = s_session, .arg = k}};
        loop = ag_loop_new(&o, err);
        if (!loop)
            return -1;
        ag_kernel_set_ask_state(k, loop, s_free_loop);
    }
    /* %model switched models since the last cell: talk to the new one,
     * keeping the conversation. */
    const char *want = ag_kernel_model(k);
    const char *have = ag_provider_model(ag_loop_provider(loop));
    const char *have_name = ag_provider_name(ag_loop_provider(loop));
    char *current = xasprintf("%s:%s", have_name, have);
    if (want && strcmp(want, current) != 0 && strcmp(want, have) != 0) {
        ag_provider_t *p = ag_provider_new(want, err);
        if (!p) {
            free(current);
            return -1;
        }
        ag_loop_set_provider(loop, &p);
    }
    free(current);
    ag_loop_ui_t ui = {.on_turn = s_on_turn,
                       .on_tool_start = s_on_tool_start,
                       .on_tool_end = s_on_tool_end,
                       .on_notice = s_on_notice,
                       .arg = k};
    ag_loop_stats_t st = {0};
    if (ag_loop_ask(loop, request, &ui, &st, err) < 0)
        return -1;
    if (st.answered)
        ag_kernel_answer(k, ag_loop_answer(loop));
    return 0;
}
