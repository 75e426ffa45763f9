/* The tool loop against the scripted fake LLM server (loopback only) and
 * real sandboxed ipykernels: images reach the model in each provider's
 * format, the notebook records the session, bad tool calls are answered,
 * step limits, timeouts, kernel death, provider failure and Ctrl-C. */
#include "agent/loop/ag_loop.h"
#include "agent/loop/ag_tools.h"
#include "agent/session/ag_session.h"
#include "common/buf.h"
#include "common/xalloc.h"
#include "notebook-io/nb_notebook.h"
#include "tests/tap.h"
#include "tests/tools/fake_llm.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define OKEY "sk-test-OPENAI-SECRET-5d1e77"
#define AKEY "sk-ant-test-SECRET-0c42aa"

static ag_session_t *g_session; /* one sandboxed kernel for most tests */
static char g_dir[64];          /* temporary directory for notebooks */

/* ---- scripts ------------------------------------------------------------- */

/* A reply running `code` (new reference). */
static json_t *
s_code(const char *text, const char *code)
{
    return json_pack("{s:{s:s, s:[{s:s, s:{s:s}}], s:{s:i, s:i}}}", "reply",
                     "text", text, "tool_calls", "name", "python", "arguments",
                     "code", code, "usage", "input_tokens", 100,
                     "output_tokens", 20);
}

/* A reply calling `name` with raw argument text (new reference). */
static json_t *
s_call(const char *name, const char *args)
{
    return json_pack("{s:{s:s, s:[{s:s, s:s}]}}", "reply", "text", "",
                     "tool_calls", "name", name, "arguments", args);
}

static json_t *
s_answer(const char *text)
{
    return json_pack("{s:{s:s, s:{s:i, s:i}}}", "reply", "text", text, "usage",
                     "input_tokens", 300, "output_tokens", 40);
}

/* ---- one scenario -------------------------------------------------------- */

typedef struct run {
    int rc;             /* ag_loop_ask's result */
    err_t err;          /* its error */
    ag_loop_stats_t st; /* its stats */
    json_t *reqs;       /* what the server received */
    json_t *nb;         /* the saved notebook as JSON */
    char nb_path[128];  /* where it was saved */
    char *answer;       /* ag_loop_answer */
    buf_t notices;      /* on_notice lines */
    buf_t streamed;     /* on_text deltas */
    int tool_starts;    /* on_tool_start calls */
    int outputs;        /* on_output calls */
    char *log_text;     /* the server's request log, raw */
} run_t;

static void
s_on_notice(const char *text, void *arg)
{
    run_t *r = arg;
    buf_printf(&r->notices, "%s\n", text);
}

static void
s_on_text(const char *text, size_t len, void *arg)
{
    run_t *r = arg;
    buf_append(&r->streamed, text, len);
}

static void
s_on_tool_start(const char *name, const char *code, void *arg)
{
    (void)name;
    (void)code;
    ((run_t *)arg)->tool_starts++;
}

static void
s_on_output(json_t *output, void *arg)
{
    (void)output;
    ((run_t *)arg)->outputs++;
}

typedef struct scenario {
    const char *provider; /* "openai" or "anthropic" */
    int stream;           /* SSE or whole responses */
    int max_steps;        /* 0 = default */
    int timeout_ms;       /* 0 = none */
    const char *question; /* NULL = a default */
    atomic_int *cancel;   /* borrowed, or NULL */
} scenario_t;

static void
s_env(const fake_llm_t *srv)
{
    setenv("OPENAI_BASE_URL", srv->openai_base, 1);
    setenv("ANTHROPIC_BASE_URL", srv->anthropic_base, 1);
    setenv("OPENAI_API_KEY", OKEY, 1);
    setenv("ANTHROPIC_API_KEY", AKEY, 1);
    setenv("JUPYTER_AGENT_MAX_TRIES", "1", 1);
    unsetenv("JUPYTER_AGENT_MODEL");
}

static int
s_run(run_t *r, const scenario_t *sc, json_t *script)
{
    static int n;
    memset(r, 0, sizeof *r);
    buf_init(&r->notices, 0);
    buf_init(&r->streamed, 0);
    char *text = json_dumps(script, JSON_COMPACT);
    json_decref(script);
    fake_llm_t srv;
    if (fake_llm_start(&srv, text) < 0) {
        free(text);
        return -1;
    }
    free(text);
    s_env(&srv);
    char spec[64];
    snprintf(spec, sizeof spec, "%s:model-x", sc->provider);
    err_t err = {0};
    ag_provider_t *p = ag_provider_new(spec, &err);
    if (!p) {
        diag("provider: %s", err.text);
        fake_llm_stop(&srv);
        return -1;
    }
    ag_provider_set_stream(p, sc->stream);
    ag_provider_set_retry(p, 1, 1);
    snprintf(r->nb_path, sizeof r->nb_path, "%s/session-%d.ipynb", g_dir, ++n);
    ag_loop_opts_t o = {.provider = &p,
                        .session = g_session,
                        .max_steps = sc->max_steps,
                        .timeout_ms = sc->timeout_ms,
                        .autosave = r->nb_path,
                        .cancel = sc->cancel};
    ag_loop_t *loop = ag_loop_new(&o, &err);
    if (!loop) {
        diag("loop: %s", err.text);
        fake_llm_stop(&srv);
        return -1;
    }
    ag_loop_ui_t ui = {.on_text = s_on_text,
                       .on_tool_start = s_on_tool_start,
                       .on_output = s_on_output,
                       .on_notice = s_on_notice,
                       .arg = r};
    r->rc =
        ag_loop_ask(loop, sc->question ? sc->question : "Please do the thing.",
                    &ui, &r->st, &r->err);
    r->answer = xstrdup(ag_loop_answer(loop));
    err_t serr = {0};
    if (ag_loop_save(loop, r->nb_path, &serr) < 0)
        diag("save: %s", serr.text);
    ag_loop_destroy(&loop);
    r->reqs = fake_llm_requests(&srv);
    r->log_text = fake_llm_log_text(&srv);
    fake_llm_stop(&srv);
    /* Read back the way nbformat reads it (multi-line strings joined). */
    nb_notebook_t *nb = nb_notebook_read_file(r->nb_path, &err);
    if (nb) {
        r->nb = json_deep_copy(nb_notebook_json(nb));
        nb_notebook_destroy(&nb);
    } else {
        diag("notebook %s: %s", r->nb_path, err.text);
    }
    return 0;
}

static void
s_release(run_t *r)
{
    json_decref(r->reqs);
    json_decref(r->nb);
    free(r->answer);
    free(r->log_text);
    buf_release(&r->notices);
    buf_release(&r->streamed);
    unlink(r->nb_path);
}

/* ---- looking at what happened -------------------------------------------- */

static json_t *
s_body(const run_t *r, size_t i)
{
    return json_object_get(json_array_get(r->reqs, i), "body");
}

static char *
s_dump(const json_t *j)
{
    char *s = json_dumps(j, JSON_ENCODE_ANY | JSON_COMPACT);
    return s ? s : xstrdup("");
}

/* The text of the last tool result in request i (either wire format). */
static char *
s_last_tool_text(const run_t *r, size_t i)
{
    json_t *msgs = json_object_get(s_body(r, i), "messages"), *m;
    size_t k;
    char *found = NULL;
    json_array_foreach(msgs, k, m)
    {
        const char *role = json_string_value(json_object_get(m, "role"));
        json_t *content = json_object_get(m, "content");
        if (role && strcmp(role, "tool") == 0) { /* openai */
            free(found);
            found = xstrdup(json_is_string(content) ? json_string_value(content)
                                                    : "");
        } else if (json_is_array(content)) { /* anthropic tool_result */
            size_t j;
            json_t *blk;
            json_array_foreach(content, j, blk)
            {
                const char *type =
                    json_string_value(json_object_get(blk, "type"));
                if (!type || strcmp(type, "tool_result"))
                    continue;
                json_t *c = json_object_get(blk, "content");
                buf_t b;
                buf_init(&b, 0);
                if (json_is_string(c))
                    buf_puts(&b, json_string_value(c));
                size_t q;
                json_t *part;
                json_array_foreach(c, q, part)
                {
                    const char *t =
                        json_string_value(json_object_get(part, "text"));
                    if (t)
                        buf_puts(&b, t);
                }
                free(found);
                found = buf_detach(&b, NULL);
            }
        }
    }
    return found ? found : xstrdup("");
}

static size_t
s_ncells(const run_t *r, const char *type)
{
    json_t *cells = json_object_get(r->nb, "cells"), *c;
    size_t i, n = 0;
    json_array_foreach(cells, i, c)
    {
        if (!type || strcmp(json_string_value(json_object_get(c, "cell_type")),
                            type) == 0)
            n++;
    }
    return n;
}

/* The notebook's code cell k (0-based among code cells), or NULL. */
static json_t *
s_code_cell(const run_t *r, size_t k)
{
    json_t *cells = json_object_get(r->nb, "cells"), *c;
    size_t i, n = 0;
    json_array_foreach(cells, i, c)
    {
        if (strcmp(json_string_value(json_object_get(c, "cell_type")),
                   "code") == 0 &&
            n++ == k)
            return c;
    }
    return NULL;
}

static int
s_nbformat_valid(const char *path)
{
    const char *py = getenv("JUPYTER_AGENT_PYTHON");
    char *cmd = xasprintf(
        "%s -c 'import sys, nbformat; "
        "nbformat.validate(nbformat.read(sys.argv[1], as_version=4))' %s",
        py && *py ? py : "/usr/bin/python3", path);
    int rc = system(cmd);
    free(cmd);
    return rc == 0;
}

static int
s_no_key(const run_t *r)
{
    char *nb = s_dump(r->nb);
    char *bodies = s_dump(r->reqs);
    /* Headers carry the key by design; bodies and the notebook never. */
    json_t *b = json_array(), *q;
    size_t i;
    json_array_foreach(r->reqs, i, q)
        json_array_append(b, json_object_get(q, "body"));
    char *only_bodies = s_dump(b);
    json_decref(b);
    int clean = !strstr(nb, OKEY) && !strstr(nb, AKEY) &&
                !strstr(only_bodies, OKEY) && !strstr(only_bodies, AKEY) &&
                !strstr(r->err.text, OKEY) && !strstr(r->err.text, AKEY);
    free(nb);
    free(bodies);
    free(only_bodies);
    return clean;
}

/* ---- the tests ----------------------------------------------------------- */

static const char PLOT[] =
    "import matplotlib.pyplot as plt\n"
    "print('drawing')\n"
    "plt.plot([1, 3, 2]); plt.title('demo'); plt.show()\n"
    "21 * 2";

static void
t_plot_openai(void)
{
    json_t *script = json_pack("[o, o]", s_code("Let me plot it.", PLOT),
                               s_answer("The plot shows **three** points."));
    scenario_t sc = {.provider = "openai", .stream = 1};
    run_t r;
    if (s_run(&r, &sc, script) < 0) {
        ok(0, "openai plot scenario ran");
        return;
    }
    is_int(r.rc, 0, "openai: a run-code-then-answer session succeeds");
    ok(r.st.answered && r.st.steps == 2 && r.st.cells == 1,
       "openai: two steps, one cell, answered (steps %d, cells %d)", r.st.steps,
       r.st.cells);
    is_str(r.answer, "The plot shows **three** points.",
           "openai: the final answer is the model's last text");
    ok(strstr(buf_cstr(&r.streamed), "three") != NULL,
       "openai: assistant text streams to the UI");
    ok(r.tool_starts == 1 && r.outputs >= 3,
       "openai: the UI sees the cell start and its outputs live");
    /* The second request: tool message, then a user message with the
     * image as a data URL. */
    json_t *msgs = json_object_get(s_body(&r, 1), "messages");
    size_t n = json_array_size(msgs);
    json_t *tool = NULL, *img_msg = NULL, *m;
    size_t i;
    json_array_foreach(msgs, i, m)
    {
        const char *role = json_string_value(json_object_get(m, "role"));
        if (role && strcmp(role, "tool") == 0) {
            tool = m;
            img_msg = json_array_get(msgs, i + 1);
        }
    }
    char *img = s_dump(img_msg);
    ok(tool &&
           strstr(json_string_value(json_object_get(tool, "content")),
                  "drawing") &&
           strstr(json_string_value(json_object_get(tool, "content")), "42"),
       "openai: the tool message carries the printed text and the result");
    ok(img_msg &&
           strcmp(json_string_value(json_object_get(img_msg, "role")),
                  "user") == 0 &&
           strstr(img, "\"image_url\"") &&
           strstr(img, "data:image/png;base64,iVBORw0KGgo"),
       "openai: the plot follows as a user message with an image_url PNG "
       "data URL (%zu messages)",
       n);
    free(img);
    char *sys = s_dump(json_array_get(msgs, 0));
    ok(strstr(sys, "Python 3.") && strstr(sys, "pandas") &&
           strstr(sys, "/mnt/data/out/") && strstr(sys, "no network"),
       "openai: the system prompt states Python and library versions, the "
       "output folder and no network");
    ok(strstr(sys, "openpyxl 3") && strstr(sys, "XlsxWriter 3") &&
           strstr(sys, "seaborn 0") && strstr(sys, "scikit-learn 1") &&
           strstr(sys, "statsmodels 0") && strstr(sys, "requests 2") &&
           strstr(sys, "networkx 2") && strstr(sys, "plotly 5") &&
           strstr(sys, "read_excel") && strstr(sys, "pip or conda install"),
       "openai: the system prompt names the box's analyst stack (Excel "
       "readers, seaborn, scikit-learn, ...) and says to use it where a "
       "library points at pip");
    free(sys);
    ok(s_nbformat_valid(r.nb_path), "openai: the notebook validates with "
                                    "nbformat");
    json_t *cell = s_code_cell(&r, 0);
    char *outs = s_dump(json_object_get(cell, "outputs"));
    ok(cell &&
           strcmp(json_string_value(json_object_get(cell, "source")), PLOT) ==
               0 &&
           json_integer_value(json_object_get(cell, "execution_count")) >= 1 &&
           strstr(outs, "\"image/png\"") && strstr(outs, "\"drawing\\n\"") &&
           strstr(outs, "\"execute_result\""),
       "openai: the code cell has the code, its count, the stream, the PNG "
       "and the result");
    free(outs);
    ok(s_ncells(&r, "markdown") == 3,
       "openai: markdown cells for the request, the assistant's note and "
       "the answer (%zu)",
       s_ncells(&r, "markdown"));
    json_t *meta =
        json_object_get(json_object_get(r.nb, "metadata"), "jupyter_agent");
    ok(strcmp(json_string_value(json_object_get(meta, "provider")), "openai") ==
               0 &&
           strcmp(json_string_value(json_object_get(meta, "model")),
                  "openai:model-x") == 0 &&
           json_integer_value(json_object_get(meta, "steps")) == 2 &&
           json_integer_value(json_object_get(json_object_get(meta, "usage"),
                                              "output_tokens")) == 60 &&
           json_object_get(meta, "timings") &&
           json_is_true(
               json_object_get(json_object_get(meta, "sandbox"), "sandboxed")),
       "openai: metadata.jupyter_agent has provider, model, steps, usage, "
       "timings and the sandbox policy");
    ok(json_object_get(json_object_get(r.nb, "metadata"), "kernelspec") != NULL,
       "openai: the notebook names its kernel");
    ok(s_no_key(&r), "openai: no API key in any request body, error or the "
                     "notebook");
    s_release(&r);
}

static void
t_plot_anthropic(void)
{
    json_t *script = json_pack("[o, o]", s_code("Plotting.", PLOT),
                               s_answer("Done: a line plot."));
    scenario_t sc = {.provider = "anthropic", .stream = 1};
    run_t r;
    if (s_run(&r, &sc, script) < 0) {
        ok(0, "anthropic plot scenario ran");
        return;
    }
    is_int(r.rc, 0, "anthropic: a run-code-then-answer session succeeds");
    /* The second request: a user message whose tool_result holds the text
     * and an image block. */
    json_t *msgs = json_object_get(s_body(&r, 1), "messages"), *m;
    size_t i;
    json_t *result = NULL;
    json_array_foreach(msgs, i, m)
    {
        json_t *content = json_object_get(m, "content"), *blk;
        size_t j;
        json_array_foreach(content, j, blk)
        {
            const char *type = json_string_value(json_object_get(blk, "type"));
            if (type && strcmp(type, "tool_result") == 0)
                result = blk;
        }
    }
    char *res = s_dump(result);
    ok(result && strstr(res, "\"type\":\"image\"") &&
           strstr(res, "\"media_type\":\"image/png\"") &&
           strstr(res, "\"data\":\"iVBORw0KGgo") && strstr(res, "drawing"),
       "anthropic: the tool_result carries the text and a base64 PNG image "
       "block");
    free(res);
    const char *sys =
        json_string_value(json_object_get(s_body(&r, 1), "system"));
    ok(sys && strstr(sys, "/mnt/data"), "anthropic: the system prompt "
                                        "describes the workspace");
    ok(s_nbformat_valid(r.nb_path), "anthropic: the notebook validates with "
                                    "nbformat");
    ok(s_no_key(&r), "anthropic: no API key in any request body or the "
                     "notebook");
    s_release(&r);
}

static void
t_truncation(void)
{
    json_t *script =
        json_pack("[o, o]",
                  s_code("", "print('HEAD-MARK'); print('x' * 200000); "
                             "print('TAIL-MARK')"),
                  s_answer("ok"));
    scenario_t sc = {.provider = "openai", .stream = 0};
    run_t r;
    if (s_run(&r, &sc, script) < 0) {
        ok(0, "truncation scenario ran");
        return;
    }
    char *t = s_last_tool_text(&r, 1);
    ok(strlen(t) <= 16 * 1024 + 64 && strlen(t) > 8 * 1024,
       "a 200 KB output reaches the model cut to the 16 KiB budget (%zu "
       "bytes)",
       strlen(t));
    ok(strstr(t, "HEAD-MARK") && strstr(t, "TAIL-MARK"),
       "the cut keeps the head and the tail of the output");
    ok(strstr(t, "[… ") && strstr(t, " bytes omitted …]"),
       "the cut is marked with how many bytes were omitted");
    json_t *cell = s_code_cell(&r, 0);
    char *outs = s_dump(json_object_get(cell, "outputs"));
    ok(strlen(outs) > 200000, "the notebook keeps the full output");
    free(outs);
    free(t);
    s_release(&r);
}

static void
t_invalid_calls(void)
{
    json_t *script = json_pack(
        "[o, o, o, o, o]", s_call("python", "{\"code\": 1+}"),
        s_call("python", "{\"source\": \"print(1)\"}"),
        s_call("shell", "{\"cmd\": \"ls\"}"),
        s_code("Fixed it.", "print('recovered')"), s_answer("All good."));
    scenario_t sc = {.provider = "anthropic", .stream = 1};
    run_t r;
    if (s_run(&r, &sc, script) < 0) {
        ok(0, "invalid-calls scenario ran");
        return;
    }
    is_int(r.rc, 0, "bad tool calls do not end the session");
    char *t1 = s_last_tool_text(&r, 1);
    char *t2 = s_last_tool_text(&r, 2);
    char *t3 = s_last_tool_text(&r, 3);
    char *t4 = s_last_tool_text(&r, 4);
    ok(strstr(t1, "not valid JSON") != NULL,
       "arguments that are not JSON are answered with a tool error (%s)", t1);
    ok(strstr(t2, "\"code\"") != NULL,
       "a python call without code is told what it needs (%s)", t2);
    ok(strstr(t3, "no tool named \"shell\"") && strstr(t3, "python"),
       "an unknown tool is answered with the list of tools (%s)", t3);
    ok(strstr(t4, "recovered") != NULL,
       "the model recovers and its corrected call runs");
    json_t *msgs = json_object_get(s_body(&r, 1), "messages");
    char *all = s_dump(msgs);
    ok(strstr(all, "\"is_error\":true") != NULL,
       "anthropic: a refused call is flagged is_error");
    free(all);
    ok(r.st.answered && r.st.cells == 1 && r.st.tool_calls == 4,
       "only the valid call became a code cell (cells %d, calls %d)",
       r.st.cells, r.st.tool_calls);
    ok(s_nbformat_valid(r.nb_path), "the notebook with refused calls "
                                    "validates");
    free(t1);
    free(t2);
    free(t3);
    free(t4);
    s_release(&r);
}

static void
t_max_steps(void)
{
    json_t *script = json_pack("[o, o, o, o]", s_code("", "step = 1"),
                               s_code("", "step = 2"), s_code("", "step = 3"),
                               s_answer("never reached"));
    scenario_t sc = {.provider = "openai", .stream = 1, .max_steps = 2};
    run_t r;
    if (s_run(&r, &sc, script) < 0) {
        ok(0, "max-steps scenario ran");
        return;
    }
    is_int(r.rc, 0, "reaching --max-steps is not an error of the loop");
    ok(r.st.hit_max_steps && !r.st.answered && r.st.steps == 2,
       "the loop stops after max_steps model turns without an answer");
    is_int(json_array_size(r.reqs), 2, "no model turn past the limit");
    ok(strstr(buf_cstr(&r.notices), "--max-steps") != NULL,
       "the user is told the limit stopped it and how to raise it");
    json_t *meta =
        json_object_get(json_object_get(r.nb, "metadata"), "jupyter_agent");
    is_str(json_string_value(json_object_get(meta, "status")), "max_steps",
           "the notebook's metadata says why it stopped");
    s_release(&r);
}

static void
t_kernel_death(void)
{
    json_t *script = json_pack(
        "[o, o, o, o]",
        s_code("", "before_death = 41\n"
                   "open('/mnt/data/keep.txt', 'w').write('x')"),
        s_code("", "import os\nos._exit(1)"),
        s_code("", "import os\nprint(os.path.isdir('/mnt/data/out'))\n"
                   "print(os.listdir('/mnt/data'))\nbefore_death"),
        s_answer("The kernel restarted."));
    scenario_t sc = {.provider = "openai", .stream = 1};
    run_t r;
    if (s_run(&r, &sc, script) < 0) {
        ok(0, "kernel-death scenario ran");
        return;
    }
    is_int(r.rc, 0, "a kernel death during a cell does not end the session");
    char *t2 = s_last_tool_text(&r, 2);
    ok(strstr(t2, "died") && strstr(t2, "fresh kernel") &&
           strstr(t2, "variables"),
       "the model is told the kernel died and a fresh one lost the "
       "variables (%s)",
       t2);
    char *t3 = s_last_tool_text(&r, 3);
    ok(strstr(t3, "NameError") && strstr(t3, "True"),
       "the next cell runs in a fresh kernel: old variables gone, "
       "/mnt/data/out there: %s",
       t3);
    ok((strstr(t2, "were kept") && strstr(t3, "keep.txt")) ||
           (strstr(t2, "was reset") && !strstr(t3, "keep.txt")),
       "what the model is told about /mnt/data after the restart is true");
    ok(r.st.restarted && strstr(buf_cstr(&r.notices), "died"),
       "the UI is told the kernel was restarted");
    json_t *cell = s_code_cell(&r, 1);
    char *outs = s_dump(json_object_get(cell, "outputs"));
    ok(strstr(outs, "DeadKernelError") != NULL,
       "the notebook records the death in that cell's outputs");
    ok(s_nbformat_valid(r.nb_path), "the notebook with a dead-kernel cell "
                                    "validates");
    free(outs);
    free(t2);
    free(t3);
    s_release(&r);
}

static void
t_timeout(void)
{
    json_t *script = json_pack(
        "[o, o, o]",
        s_code("", "kept = 'yes'\nimport time\nwhile True: time.sleep(0.1)"),
        s_code("", "kept"), s_answer("done"));
    scenario_t sc = {.provider = "openai", .stream = 0, .timeout_ms = 1500};
    run_t r;
    if (s_run(&r, &sc, script) < 0) {
        ok(0, "timeout scenario ran");
        return;
    }
    is_int(r.rc, 0, "a cell that times out does not end the session");
    char *t1 = s_last_tool_text(&r, 1);
    ok(strstr(t1, "timed out after 1.5 s") && strstr(t1, "state kept"),
       "the model is told the cell timed out and the state was kept (%s)", t1);
    char *t2 = s_last_tool_text(&r, 2);
    ok(strstr(t2, "'yes'") != NULL,
       "the kernel's state survives an interrupted cell");
    free(t1);
    free(t2);
    s_release(&r);
}

static void
t_provider_failure(void)
{
    json_t *script = json_pack(
        "[o, {s:i, s:{s:{s:s}}}]", s_code("First step.", "partial = 7"),
        "status", 500, "body", "error", "message", "upstream exploded");
    scenario_t sc = {.provider = "openai", .stream = 1};
    run_t r;
    if (s_run(&r, &sc, script) < 0) {
        ok(0, "provider-failure scenario ran");
        return;
    }
    ok(r.rc < 0 && r.err.code == ERR_PROVIDER,
       "a provider failure mid-session ends the ask with ERR_PROVIDER (%s)",
       r.err.text);
    ok(r.nb && s_ncells(&r, "code") == 1,
       "the notebook so far is written, with the cell that ran");
    json_t *meta =
        json_object_get(json_object_get(r.nb, "metadata"), "jupyter_agent");
    is_str(json_string_value(json_object_get(meta, "status")), "provider_error",
           "its metadata says the provider failed");
    ok(s_nbformat_valid(r.nb_path), "the partial notebook validates");
    ok(s_no_key(&r), "no API key in the error or the partial notebook");
    s_release(&r);
}

static atomic_int g_cancel;

static void *
s_cancel_later(void *arg)
{
    (void)arg;
    usleep(2500 * 1000);
    atomic_store(&g_cancel, 1);
    return NULL;
}

static void
t_cancel(void)
{
    json_t *script = json_pack(
        "[o, o]", s_code("", "import time\nwhile True: time.sleep(0.1)"),
        s_answer("unreachable"));
    atomic_store(&g_cancel, 0);
    scenario_t sc = {.provider = "openai", .stream = 1, .cancel = &g_cancel};
    pthread_t th;
    pthread_create(&th, NULL, s_cancel_later, NULL);
    run_t r;
    int started = s_run(&r, &sc, script);
    pthread_join(th, NULL);
    if (started < 0) {
        ok(0, "cancel scenario ran");
        return;
    }
    ok(r.rc < 0 && r.err.code == ERR_INTERRUPTED,
       "setting the cancel flag interrupts the running cell and ends the "
       "ask with ERR_INTERRUPTED");
    ok(s_ncells(&r, "code") == 1 && s_nbformat_valid(r.nb_path),
       "the interrupted cell is in the notebook, which validates");
    json_t *meta =
        json_object_get(json_object_get(r.nb, "metadata"), "jupyter_agent");
    is_str(json_string_value(json_object_get(meta, "status")), "interrupted",
           "the metadata says the session was interrupted");
    s_release(&r);
}

/* Two asks on one loop: the second request carries the first exchange. */
static void
t_conversation_continues(void)
{
    json_t *script = json_pack("[o, o, o]", s_code("", "memo = 'apples'"),
                               s_answer("Stored."), s_answer("It was apples."));
    char *text = json_dumps(script, JSON_COMPACT);
    json_decref(script);
    fake_llm_t srv;
    if (fake_llm_start(&srv, text) < 0) {
        free(text);
        ok(0, "conversation scenario ran");
        return;
    }
    free(text);
    s_env(&srv);
    err_t err = {0};
    ag_provider_t *p = ag_provider_new("anthropic:model-x", &err);
    ag_loop_opts_t o = {.provider = &p, .session = g_session};
    ag_loop_t *loop = ag_loop_new(&o, &err);
    ag_loop_stats_t st;
    int rc1 = ag_loop_ask(loop, "Remember a fruit.", NULL, &st, &err);
    int rc2 = ag_loop_ask(loop, "Which fruit?", NULL, &st, &err);
    json_t *reqs = fake_llm_requests(&srv);
    char *third = s_dump(json_object_get(json_array_get(reqs, 2), "body"));
    ok(rc1 == 0 && rc2 == 0 && strstr(third, "Remember a fruit.") &&
           strstr(third, "memo = 'apples'") && strstr(third, "Which fruit?"),
       "a second ask continues the same conversation");
    is_str(ag_loop_answer(loop), "It was apples.",
           "the answer of the second ask is the loop's answer");
    ag_loop_stats_t tot = ag_loop_totals(loop);
    ok(tot.steps == 3 && tot.cells == 1, "totals add up over asks");
    free(third);
    json_decref(reqs);
    ag_loop_destroy(&loop);
    fake_llm_stop(&srv);
}

/* ---- ag_tools on its own ---------------------------------------------- */

static void
t_tools_unit(void)
{
    char *big = xmalloc(40001);
    for (int i = 0; i < 40000; i++)
        big[i] = (i % 80 == 79) ? '\n' : 'y';
    big[40000] = '\0';
    char *t = ag_tools_truncate(big, 1000);
    ok(strlen(t) < 1100 && strstr(t, "bytes omitted"),
       "ag_tools_truncate cuts to the budget");
    free(t);
    t = ag_tools_truncate("short", 1000);
    is_str(t, "short", "a text within the budget comes back unchanged");
    free(t);
    /* UTF-8: never cut inside a character. */
    buf_t b;
    buf_init(&b, 0);
    for (int i = 0; i < 3000; i++)
        buf_puts(&b, "é");
    t = ag_tools_truncate(buf_cstr(&b), 1001);
    json_t *j = json_string(t);
    ok(j != NULL, "a cut through multi-byte characters stays valid UTF-8");
    json_decref(j);
    free(t);
    buf_release(&b);
    free(big);

    ag_tools_t *tools = ag_tools_new();
    const json_t *schemas = ag_tools_schemas(tools);
    char *s = s_dump(schemas);
    ok(json_array_size(schemas) == 2 && strstr(s, "\"name\":\"python\"") &&
           strstr(s, "\"required\":[\"code\"]") &&
           strstr(s, "\"name\":\"list_files\""),
       "the tool table offers python {code} and list_files {}");
    free(s);
    ag_tool_def_t bad = {"broken", "x", "not json", NULL, NULL};
    ok(ag_tools_add(tools, &bad, NULL) < 0,
       "a tool whose schema is not JSON is refused");
    ag_tools_destroy(&tools);
    ok(tools == NULL, "ag_tools_destroy nulls the pointer");
}

int
main(void)
{
    t_tools_unit();
    snprintf(g_dir, sizeof g_dir, "/tmp/test_loop.XXXXXX");
    if (!mkdtemp(g_dir)) {
        ok(0, "temporary directory");
        return done_testing();
    }
    ag_session_opts_t so;
    ag_session_opts_init(&so);
    so.timeout_ms = 60000;
    err_t err = {0};
    g_session = ag_session_start(&so, &err);
    if (!g_session) {
        skip("no sandboxed kernel here: %s", err.text);
        ag_session_opts_release(&so);
        return done_testing();
    }
    t_plot_openai();
    t_plot_anthropic();
    t_truncation();
    t_invalid_calls();
    t_max_steps();
    t_timeout();
    t_provider_failure();
    t_cancel();
    t_conversation_continues();
    t_kernel_death();
    ag_session_destroy(&g_session);
    ag_session_opts_release(&so);
    rmdir(g_dir);
    return done_testing();
}
