/* Providers against the scripted fake LLM server (loopback only): wire
 * formats, streaming, retries, errors, recording and replay. */
#include "agent/llm/ag_provider.h"
#include "common/buf.h"
#include "common/clock.h"
#include "tests/tap.h"
#include "tests/tools/fake_llm.h"

#include <pthread.h>
#include <stdlib.h>
#include <strings.h>
#include <time.h>

#define OKEY "sk-test-OPENAI-SECRET-7f3a9c"
#define AKEY "sk-ant-test-SECRET-91bc4e"

static const char *const TOOLS =
    "[{\"name\":\"python\",\"description\":\"Run Python\",\"parameters\":"
    "{\"type\":\"object\",\"properties\":{\"code\":{\"type\":\"string\"}},"
    "\"required\":[\"code\"]}}]";

static int g_bodies; /* request bodies checked for keys */
static int g_errors; /* error texts checked for keys */
static int g_leaks;  /* times a key was found where it must not be */

/* ---- callbacks ----------------------------------------------------- */

typedef struct rec {
    buf_t text;   /* concatenated deltas */
    int ndeltas;  /* on_text_delta calls */
    buf_t starts; /* tool names, comma-separated */
} rec_t;

static void
s_on_delta(const char *t, size_t n, void *arg)
{
    rec_t *r = arg;
    buf_append(&r->text, t, n);
    r->ndeltas++;
}

static void
s_on_start(const char *name, void *arg)
{
    rec_t *r = arg;
    if (r->starts.len)
        buf_puts(&r->starts, ",");
    buf_puts(&r->starts, name);
}

static void
s_rec_init(rec_t *r, ag_stream_cb_t *cb)
{
    memset(r, 0, sizeof *r);
    buf_init(&r->text, 0);
    buf_init(&r->starts, 0);
    cb->on_text_delta = s_on_delta;
    cb->on_tool_call_start = s_on_start;
    cb->arg = r;
}

static void
s_rec_release(rec_t *r)
{
    buf_release(&r->text);
    buf_release(&r->starts);
}

/* ---- environment and server ---------------------------------------- */

static void
s_env_clear(void)
{
    unsetenv("OPENAI_API_KEY");
    unsetenv("OPENAI_BASE_URL");
    unsetenv("ANTHROPIC_API_KEY");
    unsetenv("ANTHROPIC_BASE_URL");
    unsetenv("JUPYTER_AGENT_MODEL");
    unsetenv("JUPYTER_AGENT_STREAM");
    unsetenv("JUPYTER_AGENT_MAX_TRIES");
    setenv("JUPYTER_AGENT_RETRY_BASE_MS", "1", 1);
}

static void
s_key_check_text(const char *text)
{
    g_errors++;
    if (strstr(text, OKEY) || strstr(text, AKEY)) {
        g_leaks++;
        diag("key leaked into: %s", text);
    }
}

/* Check the bodies the server logged for keys, then stop it. */
static void
s_stop(fake_llm_t *srv)
{
    json_t *reqs = fake_llm_requests(srv);
    size_t i;
    json_t *r;
    json_array_foreach(reqs, i, r)
    {
        char *b = json_dumps(json_object_get(r, "body"), JSON_ENCODE_ANY);
        g_bodies++;
        if (b && (strstr(b, OKEY) || strstr(b, AKEY))) {
            g_leaks++;
            diag("key leaked into a request body");
        }
        free(b);
    }
    json_decref(reqs);
    fake_llm_stop(srv);
}

static int
s_start(fake_llm_t *srv, const char *script)
{
    s_env_clear();
    if (fake_llm_start(srv, script) < 0)
        return -1;
    setenv("OPENAI_BASE_URL", srv->openai_base, 1);
    setenv("ANTHROPIC_BASE_URL", srv->anthropic_base, 1);
    setenv("OPENAI_API_KEY", OKEY, 1);
    setenv("ANTHROPIC_API_KEY", AKEY, 1);
    return 0;
}

static ag_provider_t *
s_provider(const char *kind, int stream)
{
    char spec[64];
    err_t err = {0};
    snprintf(spec, sizeof spec, "%s:model-x", kind);
    ag_provider_t *p = ag_provider_new(spec, &err);
    if (!p) {
        diag("ag_provider_new(%s): %s", spec, err.text);
        return NULL;
    }
    ag_provider_set_stream(p, stream);
    return p;
}

static ag_conv_t *
s_conv_hi(void)
{
    ag_conv_t *c = ag_conv_new("You are terse.");
    ag_conv_add_user(c, "Say hi");
    return c;
}

/* Header `name` (case-insensitive) of logged request i, or NULL. */
static const char *
s_header(json_t *reqs, size_t i, const char *name)
{
    const json_t *h = json_object_get(json_array_get(reqs, i), "headers");
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)h, k, v)
    {
        if (strcasecmp(k, name) == 0)
            return json_string_value(v);
    }
    return NULL;
}

static json_t *
s_body(json_t *reqs, size_t i)
{
    return json_object_get(json_array_get(reqs, i), "body");
}

static int
s_json_eq(const json_t *got, const char *want_text)
{
    json_error_t je;
    json_t *want = json_loads(want_text, 0, &je);
    if (!want) {
        diag("bad expected JSON: %s", je.text);
        return 0;
    }
    int eq = json_equal((json_t *)got, want);
    if (!eq) {
        char *g = json_dumps(got, JSON_SORT_KEYS | JSON_ENCODE_ANY);
        char *w = json_dumps(want, JSON_SORT_KEYS | JSON_ENCODE_ANY);
        diag("  got:      %s", g ? g : "(null)");
        diag("  expected: %s", w ? w : "(null)");
        free(g);
        free(w);
    }
    json_decref(want);
    return eq;
}

/* One turn against a fresh server playing `script`. */
typedef struct run {
    int rc;           /* ag_provider_turn's result */
    err_t err;        /* its error */
    ag_turn_t turn;   /* its turn */
    rec_t rec;        /* what the callbacks saw */
    json_t *reqs;     /* requests the server logged */
    ag_usage_t usage; /* ag_provider_usage afterwards */
    int64_t ms;       /* duration of the turn */
} run_t;

static void
s_run(run_t *r, const char *kind, int stream, const char *script,
      const ag_conv_t *conv, const char *tools)
{
    fake_llm_t srv;
    ag_stream_cb_t cb;
    memset(r, 0, sizeof *r);
    s_rec_init(&r->rec, &cb);
    r->rc = -1;
    if (s_start(&srv, script) < 0) {
        snprintf(r->err.text, sizeof r->err.text, "server did not start");
        r->reqs = json_array();
        return;
    }
    ag_provider_t *p = s_provider(kind, stream);
    json_t *t = tools ? json_loads(tools, 0, NULL) : NULL;
    ag_conv_t *own = conv ? NULL : s_conv_hi();
    if (p) {
        int64_t t0 = clock_mono_ms();
        r->rc =
            ag_provider_turn(p, conv ? conv : own, t, &cb, &r->turn, &r->err);
        r->ms = clock_mono_ms() - t0;
        r->usage = ag_provider_usage(p);
    }
    if (r->rc < 0)
        s_key_check_text(r->err.text);
    r->reqs = fake_llm_requests(&srv);
    s_stop(&srv);
    ag_provider_destroy(&p);
    ag_conv_destroy(&own);
    json_decref(t);
}

static void
s_run_release(run_t *r)
{
    ag_turn_release(&r->turn);
    s_rec_release(&r->rec);
    json_decref(r->reqs);
}

static size_t
s_nreq(const run_t *r)
{
    return json_array_size(r->reqs);
}

/* ---- tests ---------------------------------------------------------- */

static void
t_text_answer(const char *kind, int stream)
{
    run_t r;
    const char *mode = stream ? "streamed" : "whole";
    s_run(&r, kind, stream,
          "[{\"reply\":{\"text\":\"Hello, world! caf\xC3\xA9\",\"usage\":"
          "{\"input_tokens\":11,\"output_tokens\":5},\"split\":3}}]",
          NULL, TOOLS);
    is_int(r.rc, 0, "%s %s: a text answer arrives (%s)", kind, mode,
           r.err.text);
    is_str(r.turn.text, "Hello, world! caf\xC3\xA9",
           "%s %s: the answer text is exact", kind, mode);
    is_str(buf_cstr(&r.rec.text), "Hello, world! caf\xC3\xA9",
           "%s %s: the text deltas add up to the answer", kind, mode);
    if (stream)
        ok(r.rec.ndeltas > 3, "%s streamed: the text arrives in pieces (%d)",
           kind, r.rec.ndeltas);
    else
        is_int(r.rec.ndeltas, 1, "%s whole: the text is delivered once", kind);
    ok(r.turn.stop == AG_STOP_END && r.turn.ncalls == 0,
       "%s %s: the turn ends without tool calls", kind, mode);
    ok(r.turn.usage.input_tokens == 11 && r.turn.usage.output_tokens == 5,
       "%s %s: usage is read from the response", kind, mode);
    is_int(s_nreq(&r), 1, "%s %s: one request was made", kind, mode);
    json_t *b = s_body(r.reqs, 0);
    const char *path =
        json_string_value(json_object_get(json_array_get(r.reqs, 0), "path"));
    if (strcmp(kind, "openai") == 0) {
        is_str(path, "/v1/chat/completions",
               "openai: POST {base}/chat/"
               "completions");
        is_str(s_header(r.reqs, 0, "Authorization"), "Bearer " OKEY,
               "openai %s: the key goes in the Authorization header", mode);
        char want[2048];
        snprintf(want, sizeof want,
                 "{\"model\":\"model-x\",\"messages\":["
                 "{\"role\":\"system\",\"content\":\"You are terse.\"},"
                 "{\"role\":\"user\",\"content\":\"Say hi\"}],"
                 "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":"
                 "\"python\",\"description\":\"Run Python\",\"parameters\":"
                 "{\"type\":\"object\",\"properties\":{\"code\":{\"type\":"
                 "\"string\"}},\"required\":[\"code\"]}}}],"
                 "\"stream\":%s%s}",
                 stream ? "true" : "false",
                 stream ? ",\"stream_options\":{\"include_usage\":true}" : "");
        ok(s_json_eq(b, want),
           "openai %s: the request body is exactly the "
           "Chat Completions shape",
           mode);
    } else {
        is_str(path, "/v1/messages", "anthropic: POST {base}/v1/messages");
        is_str(s_header(r.reqs, 0, "x-api-key"), AKEY,
               "anthropic %s: the key goes in the x-api-key header", mode);
        is_str(s_header(r.reqs, 0, "anthropic-version"), "2023-06-01",
               "anthropic %s: anthropic-version is sent", mode);
        char want[2048];
        snprintf(want, sizeof want,
                 "{\"model\":\"model-x\",\"max_tokens\":8192,"
                 "\"system\":\"You are terse.\",\"messages\":["
                 "{\"role\":\"user\",\"content\":[{\"type\":\"text\","
                 "\"text\":\"Say hi\"}]}],"
                 "\"tools\":[{\"name\":\"python\",\"description\":\"Run "
                 "Python\",\"input_schema\":{\"type\":\"object\","
                 "\"properties\":{\"code\":{\"type\":\"string\"}},"
                 "\"required\":[\"code\"]}}],\"stream\":%s}",
                 stream ? "true" : "false");
        ok(s_json_eq(b, want),
           "anthropic %s: the request body is exactly "
           "the Messages shape",
           mode);
    }
    s_run_release(&r);
}

/* Arguments with escapes and UTF-8, to be split awkwardly. */
static const char ARGS0[] =
    "{\"code\": \"import math\\nprint(math.pi, \\\"\xC3\xA9\\u00e9\\\")\"}";
static const char ARGS1[] = "{\"path\": \".\", \"depth\": 2}";

/* Bytes to take at `s` + i: `step`, widened so that a UTF-8 character is
 * never split (a JSON string fragment must be valid UTF-8), capped at the
 * end of the string. */
static size_t
s_piece(const char *s, size_t i, size_t step)
{
    size_t len = strlen(s);
    size_t n = len - i < step ? len - i : step;
    while (i + n < len && ((unsigned char)s[i + n] & 0xC0) == 0x80)
        n++;
    return n;
}

static json_t *
s_openai_chunk(json_t *delta, const char *finish)
{
    return json_pack("{s:{s:[{s:i, s:o, s:s?}]}}", "data", "choices", "index",
                     0, "delta", delta, "finish_reason", finish);
}

static json_t *
s_openai_frag(int index, const char *id, const char *name, const char *args,
              size_t n)
{
    json_t *fn = json_object();
    if (name)
        json_object_set_new(fn, "name", json_string(name));
    json_object_set_new(fn, "arguments", json_stringn(args, n));
    json_t *tc = json_pack("{s:i, s:o}", "index", index, "function", fn);
    if (id) {
        json_object_set_new(tc, "id", json_string(id));
        json_object_set_new(tc, "type", json_string("function"));
    }
    return s_openai_chunk(json_pack("{s:[o]}", "tool_calls", tc), NULL);
}

static void
t_openai_fragments(void)
{
    /* Two parallel calls whose argument fragments interleave by index, in
     * pieces of 1, 2, 3, ... bytes (cutting through escapes and UTF-8). */
    json_t *ev = json_array();
    json_array_append_new(
        ev,
        s_openai_chunk(
            json_pack("{s:s, s:s}", "role", "assistant", "content", ""), NULL));
    json_array_append_new(ev, s_openai_frag(0, "call_A", "python", "", 0));
    json_array_append_new(ev, s_openai_frag(1, "call_B", "list_files", "", 0));
    size_t i0 = 0, i1 = 0, step = 1;
    while (i0 < strlen(ARGS0) || i1 < strlen(ARGS1)) {
        size_t n0 = s_piece(ARGS0, i0, step);
        size_t n1 = s_piece(ARGS1, i1, step);
        if (n0)
            json_array_append_new(ev,
                                  s_openai_frag(0, NULL, NULL, ARGS0 + i0, n0));
        if (n1)
            json_array_append_new(ev,
                                  s_openai_frag(1, NULL, NULL, ARGS1 + i1, n1));
        i0 += n0;
        i1 += n1;
        step = step % 5 + 1;
    }
    json_array_append_new(ev, s_openai_chunk(json_object(), "tool_calls"));
    json_array_append_new(ev, json_pack("{s:{s:[], s:{s:i, s:i}}}", "data",
                                        "choices", "usage", "prompt_tokens", 40,
                                        "completion_tokens", 22));
    json_array_append_new(ev, json_pack("{s:s}", "data", "[DONE]"));
    json_t *script = json_pack("[{s:o}]", "sse_events", ev);
    char *s = json_dumps(script, JSON_COMPACT);
    run_t r;
    s_run(&r, "openai", 1, s, NULL, TOOLS);
    is_int(r.rc, 0, "openai: a streamed pair of tool calls arrives (%s)",
           r.err.text);
    is_int((long)r.turn.ncalls, 2, "openai: both tool calls are returned");
    if (r.turn.ncalls == 2) {
        is_str(r.turn.calls[0].arguments, ARGS0,
               "openai: arguments split over many fragments are reassembled "
               "exactly (call 0)");
        is_str(r.turn.calls[1].arguments, ARGS1,
               "openai: interleaved fragments go to their own call by index");
        ok(strcmp(r.turn.calls[0].id, "call_A") == 0 &&
               strcmp(r.turn.calls[0].name, "python") == 0 &&
               strcmp(r.turn.calls[1].id, "call_B") == 0 &&
               strcmp(r.turn.calls[1].name, "list_files") == 0,
           "openai: ids and names come from the first fragment");
    }
    is_str(buf_cstr(&r.rec.starts), "python,list_files",
           "openai: on_tool_call_start fires once per call, in order");
    ok(r.turn.stop == AG_STOP_TOOL_USE, "openai: the stop reason is tool use");
    ok(r.turn.usage.input_tokens == 40 && r.turn.usage.output_tokens == 22,
       "openai: the final usage chunk (empty choices) is read");
    s_run_release(&r);
    free(s);
    json_decref(script);
}

static json_t *
s_anth(const char *type, json_t *data)
{
    json_object_set_new(data, "type", json_string(type));
    return json_pack("{s:s, s:o}", "event", type, "data", data);
}

static void
t_anthropic_fragments(void)
{
    json_t *ev = json_array();
    json_array_append_new(
        ev, s_anth("message_start",
                   json_pack("{s:{s:s, s:{s:i, s:i}}}", "message", "id", "m1",
                             "usage", "input_tokens", 33, "output_tokens", 1)));
    json_array_append_new(
        ev, s_anth("content_block_start",
                   json_pack("{s:i, s:{s:s, s:s}}", "index", 0, "content_block",
                             "type", "text", "text", "")));
    json_array_append_new(
        ev, s_anth("content_block_delta",
                   json_pack("{s:i, s:{s:s, s:s}}", "index", 0, "delta", "type",
                             "text_delta", "text", "Let me ")));
    json_array_append_new(ev, s_anth("ping", json_object()));
    json_array_append_new(
        ev, s_anth("content_block_delta",
                   json_pack("{s:i, s:{s:s, s:s}}", "index", 0, "delta", "type",
                             "text_delta", "text", "check.")));
    json_array_append_new(
        ev, s_anth("content_block_stop", json_pack("{s:i}", "index", 0)));
    const char *args[2] = {ARGS0, ARGS1};
    const char *names[2] = {"python", "list_files"};
    const char *ids[2] = {"toolu_A", "toolu_B"};
    for (int k = 0; k < 2; k++) {
        json_array_append_new(
            ev, s_anth("content_block_start",
                       json_pack("{s:i, s:{s:s, s:s, s:s, s:{}}}", "index",
                                 k + 1, "content_block", "type", "tool_use",
                                 "id", ids[k], "name", names[k], "input")));
        size_t len = strlen(args[k]);
        for (size_t i = 0, step = 1, n; i < len; i += n, step = step % 4 + 1) {
            n = s_piece(args[k], i, step);
            json_array_append_new(
                ev, s_anth("content_block_delta",
                           json_pack("{s:i, s:{s:s, s:s%}}", "index", k + 1,
                                     "delta", "type", "input_json_delta",
                                     "partial_json", args[k] + i, n)));
        }
        json_array_append_new(ev, s_anth("content_block_stop",
                                         json_pack("{s:i}", "index", k + 1)));
    }
    json_array_append_new(
        ev, s_anth("message_delta",
                   json_pack("{s:{s:s}, s:{s:i}}", "delta", "stop_reason",
                             "tool_use", "usage", "output_tokens", 27)));
    json_array_append_new(ev, s_anth("message_stop", json_object()));
    json_t *script = json_pack("[{s:o}]", "sse_events", ev);
    char *s = json_dumps(script, JSON_COMPACT);
    run_t r;
    s_run(&r, "anthropic", 1, s, NULL, TOOLS);
    is_int(r.rc, 0,
           "anthropic: a streamed text + two tool_use blocks arrive "
           "(%s)",
           r.err.text);
    is_str(r.turn.text, "Let me check.", "anthropic: the text block is kept");
    is_int((long)r.turn.ncalls, 2, "anthropic: both tool calls are returned");
    if (r.turn.ncalls == 2) {
        is_str(r.turn.calls[0].arguments, ARGS0,
               "anthropic: input_json_delta pieces are reassembled exactly");
        is_str(r.turn.calls[1].arguments, ARGS1,
               "anthropic: each block index keeps its own input");
        ok(strcmp(r.turn.calls[0].id, "toolu_A") == 0 &&
               strcmp(r.turn.calls[1].name, "list_files") == 0,
           "anthropic: ids and names come from content_block_start");
    }
    is_str(buf_cstr(&r.rec.starts), "python,list_files",
           "anthropic: on_tool_call_start fires once per call, in order");
    ok(r.turn.stop == AG_STOP_TOOL_USE,
       "anthropic: the stop reason is tool use");
    ok(r.turn.usage.input_tokens == 33 && r.turn.usage.output_tokens == 27,
       "anthropic: usage comes from message_start and message_delta");
    s_run_release(&r);
    free(s);
    json_decref(script);
}

static void
t_whole_tool_calls(const char *kind)
{
    run_t r;
    s_run(&r, kind, 0,
          "[{\"reply\":{\"text\":\"\",\"tool_calls\":[{\"id\":\"c1\","
          "\"name\":\"python\",\"arguments\":\"{\\\"code\\\":\\\"1+1\\\"}\"}]"
          "}}]",
          NULL, TOOLS);
    is_int(r.rc, 0, "%s whole: a tool call arrives (%s)", kind, r.err.text);
    ok(r.turn.ncalls == 1 && strcmp(r.turn.calls[0].id, "c1") == 0 &&
           strcmp(r.turn.calls[0].arguments, "{\"code\":\"1+1\"}") == 0,
       "%s whole: the call's id and arguments are exact", kind);
    is_str(buf_cstr(&r.rec.starts), "python",
           "%s whole: on_tool_call_start fires", kind);
    s_run_release(&r);
}

static ag_conv_t *
s_conv_images(void)
{
    ag_conv_t *c = ag_conv_new("S");
    ag_conv_add_user(c, "Plot it");
    ag_tool_call_t calls[2] = {{"call_1", "python", "{\"code\":\"plot()\"}"},
                               {"call_2", "python", "{\"code\":\"oops\"}"}};
    ag_conv_add_assistant(c, "Plotting.", calls, 2);
    ag_image_t img = {"image/png", "iVBORw0KGgoAAAANSUhEUg=="};
    ag_conv_add_tool_result(c, "call_1", "python", "done", 0, &img, 1);
    ag_conv_add_tool_result(c, "call_2", "python", "NameError: oops", 1, NULL,
                            0);
    ag_conv_add_user(c, "Thanks");
    return c;
}

static void
t_image_shapes(void)
{
    ag_conv_t *c = s_conv_images();
    run_t r;
    s_run(&r, "openai", 1, "[{\"reply\":{\"text\":\"ok\"}}]", c, NULL);
    is_int(r.rc, 0, "openai: a conversation with an image result is sent");
    ok(s_json_eq(
           json_object_get(s_body(r.reqs, 0), "messages"),
           "[{\"role\":\"system\",\"content\":\"S\"},"
           "{\"role\":\"user\",\"content\":\"Plot it\"},"
           "{\"role\":\"assistant\",\"content\":\"Plotting.\",\"tool_calls\":["
           "{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":"
           "\"python\",\"arguments\":\"{\\\"code\\\":\\\"plot()\\\"}\"}},"
           "{\"id\":\"call_2\",\"type\":\"function\",\"function\":{\"name\":"
           "\"python\",\"arguments\":\"{\\\"code\\\":\\\"oops\\\"}\"}}]},"
           "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":"
           "\"done\"},"
           "{\"role\":\"tool\",\"tool_call_id\":\"call_2\",\"content\":"
           "\"NameError: oops\"},"
           "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":"
           "\"Images produced by tool call call_1:\"},{\"type\":\"image_url\","
           "\"image_url\":{\"url\":\"data:image/png;base64,"
           "iVBORw0KGgoAAAANSUhEUg==\"}}]},"
           "{\"role\":\"user\",\"content\":\"Thanks\"}]"),
       "openai: tool results become tool messages, and their images one user "
       "message of image_url parts after them");
    s_run_release(&r);

    s_run(&r, "anthropic", 1, "[{\"reply\":{\"text\":\"ok\"}}]", c, NULL);
    is_int(r.rc, 0, "anthropic: a conversation with an image result is sent");
    json_t *b = s_body(r.reqs, 0);
    ok(s_json_eq(
           json_object_get(b, "messages"),
           "[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":"
           "\"Plot it\"}]},"
           "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":"
           "\"Plotting.\"},{\"type\":\"tool_use\",\"id\":\"call_1\",\"name\":"
           "\"python\",\"input\":{\"code\":\"plot()\"}},{\"type\":"
           "\"tool_use\",\"id\":\"call_2\",\"name\":\"python\",\"input\":"
           "{\"code\":\"oops\"}}]},"
           "{\"role\":\"user\",\"content\":["
           "{\"type\":\"tool_result\",\"tool_use_id\":\"call_1\",\"content\":"
           "[{\"type\":\"text\",\"text\":\"done\"},{\"type\":\"image\","
           "\"source\":{\"type\":\"base64\",\"media_type\":\"image/png\","
           "\"data\":\"iVBORw0KGgoAAAANSUhEUg==\"}}],\"is_error\":false},"
           "{\"type\":\"tool_result\",\"tool_use_id\":\"call_2\",\"content\":"
           "[{\"type\":\"text\",\"text\":\"NameError: oops\"}],"
           "\"is_error\":true},"
           "{\"type\":\"text\",\"text\":\"Thanks\"}]}]"),
       "anthropic: tool results are tool_result blocks with image blocks and "
       "is_error, merged with the next user text into one user message");
    is_str(json_string_value(json_object_get(b, "system")), "S",
           "anthropic: the system prompt is the top-level system field");
    s_run_release(&r);
    ag_conv_destroy(&c);
}

static void
t_usage_summed(const char *kind)
{
    fake_llm_t srv;
    if (s_start(&srv,
                "[{\"reply\":{\"text\":\"a\",\"usage\":{\"input_tokens\":10,"
                "\"output_tokens\":3}}},{\"reply\":{\"text\":\"b\",\"usage\":"
                "{\"input_tokens\":25,\"output_tokens\":4}}}]") < 0) {
        ok(0, "%s: fake server starts", kind);
        return;
    }
    ag_provider_t *p = s_provider(kind, 1);
    if (!p) {
        ok(0, "%s: provider is created", kind);
        s_stop(&srv);
        return;
    }
    ag_conv_t *c = s_conv_hi();
    ag_turn_t t = {0};
    int rc1 = ag_provider_turn(p, c, NULL, NULL, &t, NULL);
    ag_conv_add_assistant(c, t.text, t.calls, t.ncalls);
    ag_turn_release(&t);
    ag_conv_add_user(c, "again");
    int rc2 = ag_provider_turn(p, c, NULL, NULL, &t, NULL);
    ag_turn_release(&t);
    ag_usage_t u = ag_provider_usage(p);
    ok(rc1 == 0 && rc2 == 0, "%s: two turns in a row succeed", kind);
    ok(u.input_tokens == 35 && u.output_tokens == 7 && u.turns == 2 &&
           u.requests == 2,
       "%s: usage is summed over the provider's turns (in %lld, out %lld)",
       kind, (long long)u.input_tokens, (long long)u.output_tokens);
    json_t *reqs = fake_llm_requests(&srv);
    json_t *msgs = json_object_get(s_body(reqs, 1), "messages");
    is_int((long)json_array_size(msgs), strcmp(kind, "openai") == 0 ? 4 : 3,
           "%s: the second request carries the whole conversation", kind);
    json_decref(reqs);
    s_stop(&srv);
    ag_conv_destroy(&c);
    ag_provider_destroy(&p);
}

static void
t_retries(void)
{
    run_t r;
    /* 429 with retry-after (seconds), then success. */
    s_run(&r, "openai", 1,
          "[{\"status\":429,\"headers\":{\"retry-after\":\"1\"},\"body\":"
          "{\"error\":{\"message\":\"Rate limit reached\",\"type\":"
          "\"requests\"}}},{\"reply\":{\"text\":\"fine\"}}]",
          NULL, NULL);
    ok(r.rc == 0 && strcmp(r.turn.text, "fine") == 0,
       "openai: a 429 is retried and the next answer is returned");
    is_int(s_nreq(&r), 2, "openai: 429 then success took exactly two tries");
    is_int(r.usage.requests, 2, "the provider counts both requests");
    ok(r.ms >= 900, "retry-after: 1 is honoured (waited %lld ms)",
       (long long)r.ms);
    s_run_release(&r);

    /* Retry-After may also be an HTTP-date (RFC 9110 10.2.3). */
    char date[64], script[512];
    time_t when = time(NULL) + 3;
    struct tm tm;
    strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT",
             gmtime_r(&when, &tm));
    snprintf(script, sizeof script,
             "[{\"status\":429,\"headers\":{\"retry-after\":\"%s\"},"
             "\"body\":{\"error\":{\"message\":\"later\"}}},"
             "{\"reply\":{\"text\":\"fine\"}}]",
             date);
    s_run(&r, "openai", 1, script, NULL, NULL);
    ok(r.rc == 0 && s_nreq(&r) == 2 && r.ms >= 1000,
       "retry-after as an HTTP-date (%s) is honoured, not ignored (waited "
       "%lld ms)",
       date, (long long)r.ms);
    s_run_release(&r);

    s_run(&r, "anthropic", 1,
          "[{\"status\":429,\"headers\":{\"retry-after-ms\":\"20\"},\"body\":"
          "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\","
          "\"message\":\"slow down\"}}},{\"reply\":{\"text\":\"fine\"}}]",
          NULL, NULL);
    ok(r.rc == 0 && s_nreq(&r) == 2,
       "anthropic: a 429 with retry-after-ms is retried once, then succeeds");
    s_run_release(&r);

    s_run(&r, "openai", 0,
          "[{\"status\":500,\"body\":\"Internal Server Error\"},"
          "{\"reply\":{\"text\":\"after 500\"}}]",
          NULL, NULL);
    ok(r.rc == 0 && s_nreq(&r) == 2 && strcmp(r.turn.text, "after 500") == 0,
       "openai: a 500 is retried, then succeeds");
    s_run_release(&r);

    s_run(&r, "anthropic", 1,
          "[{\"status\":529,\"body\":{\"type\":\"error\",\"error\":{\"type\":"
          "\"overloaded_error\",\"message\":\"Overloaded\"}}},"
          "{\"status\":503,\"body\":\"busy\"},"
          "{\"reply\":{\"text\":\"after 529\"}}]",
          NULL, NULL);
    ok(r.rc == 0 && s_nreq(&r) == 3,
       "anthropic: 529 overloaded and 503 are retried, then it succeeds");
    s_run_release(&r);

    s_run(&r, "openai", 1,
          "[{\"drop\":true},{\"reply\":{\"text\":\"after drop\"}}]", NULL,
          NULL);
    ok(r.rc == 0 && s_nreq(&r) == 2 && strcmp(r.turn.text, "after drop") == 0,
       "openai: a dropped connection is retried, then succeeds");
    s_run_release(&r);

    s_run(&r, "anthropic", 0,
          "[{\"drop\":true},{\"reply\":{\"text\":\"after drop\"}}]", NULL,
          NULL);
    ok(r.rc == 0 && s_nreq(&r) == 2,
       "anthropic: a dropped connection is retried, then succeeds");
    s_run_release(&r);

    /* A stream cut before anything reached the caller is retried. */
    s_run(&r, "openai", 1,
          "[{\"reply\":{\"text\":\"first\"},\"cut_after_bytes\":20},"
          "{\"reply\":{\"text\":\"second\"}}]",
          NULL, NULL);
    ok(r.rc == 0 && s_nreq(&r) == 2 && strcmp(r.turn.text, "second") == 0 &&
           strcmp(buf_cstr(&r.rec.text), "second") == 0,
       "a stream cut before any delta was delivered is retried cleanly");
    s_run_release(&r);

    s_run(&r, "anthropic", 1,
          "[{\"sse_events\":[{\"event\":\"error\",\"data\":{\"type\":"
          "\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":"
          "\"Overloaded\"}}}]},{\"reply\":{\"text\":\"recovered\"}}]",
          NULL, NULL);
    ok(r.rc == 0 && s_nreq(&r) == 2 && strcmp(r.turn.text, "recovered") == 0,
       "anthropic: an overloaded_error event before any output is retried");
    s_run_release(&r);
}

static void
t_retry_exhausted(void)
{
    run_t r;
    const char *e429 = "{\"status\":429,\"headers\":{\"retry-after-ms\":\"5\"}"
                       ",\"body\":{\"error\":{\"message\":\"Rate limit "
                       "reached for model-x\"}}}";
    char script[1024];
    snprintf(script, sizeof script, "[%s,%s,%s,%s,%s]", e429, e429, e429, e429,
             "{\"reply\":{\"text\":\"too late\"}}");
    s_run(&r, "openai", 1, script, NULL, NULL);
    is_str(r.err.text,
           "openai: rate limited (HTTP 429) after 4 tries; last message: "
           "Rate limit reached for model-x",
           "openai: a rate limit outlasting the retries gives a clear error");
    ok(r.rc == -1 && r.err.code == ERR_PROVIDER && s_nreq(&r) == 4,
       "openai: exactly 4 tries are made by default (%zu)", s_nreq(&r));
    s_run_release(&r);

    const char *e529 = "{\"status\":529,\"body\":{\"type\":\"error\","
                       "\"error\":{\"type\":\"overloaded_error\",\"message\":"
                       "\"Overloaded\"}}}";
    snprintf(script, sizeof script, "[%s,%s,%s,%s]", e529, e529, e529, e529);
    s_run(&r, "anthropic", 0, script, NULL, NULL);
    is_str(r.err.text,
           "anthropic: overloaded (HTTP 529) after 4 tries; last message: "
           "Overloaded",
           "anthropic: 529 outlasting the retries names status and message");
    s_run_release(&r);
}

static void
t_http_errors(void)
{
    run_t r;
    s_run(&r, "openai", 1,
          "[{\"status\":401,\"body\":{\"error\":{\"message\":\"Incorrect API "
          "key provided: " OKEY "\",\"type\":\"invalid_request_error\"}}}]",
          NULL, NULL);
    is_str(r.err.text,
           "openai: authentication failed (HTTP 401): check OPENAI_API_KEY",
           "openai: 401 names OPENAI_API_KEY (and not the key the server "
           "echoed)");
    is_int(s_nreq(&r), 1, "openai: 401 is not retried");
    s_run_release(&r);

    s_run(&r, "anthropic", 1,
          "[{\"status\":401,\"body\":{\"type\":\"error\",\"error\":{\"type\":"
          "\"authentication_error\",\"message\":\"invalid x-api-key\"}}}]",
          NULL, NULL);
    is_str(r.err.text,
           "anthropic: authentication failed (HTTP 401): check "
           "ANTHROPIC_API_KEY",
           "anthropic: 401 names ANTHROPIC_API_KEY");
    s_run_release(&r);

    s_run(&r, "openai", 1,
          "[{\"status\":403,\"body\":{\"error\":{\"message\":\"key " OKEY
          " may not use this model\"}}}]",
          NULL, NULL);
    ok(strstr(r.err.text, "[redacted] may not use this model") != NULL,
       "a key echoed in a server message is redacted (%s)", r.err.text);
    s_run_release(&r);

    s_run(&r, "openai", 0,
          "[{\"status\":404,\"body\":{\"error\":{\"message\":\"The model "
          "`model-x` does not exist or you do not have access to it.\","
          "\"type\":\"invalid_request_error\",\"code\":"
          "\"model_not_found\"}}}]",
          NULL, NULL);
    ok(strstr(r.err.text, "HTTP 404") &&
           strstr(r.err.text, ": The model `model-x` does not exist or you "
                              "do not have access to it."),
       "openai: 404 surfaces the server's own message (%s)", r.err.text);
    ok(s_nreq(&r) == 1 && r.err.code == ERR_PROVIDER,
       "openai: 404 is not retried");
    s_run_release(&r);

    s_run(&r, "anthropic", 1,
          "[{\"status\":404,\"body\":{\"type\":\"error\",\"error\":{\"type\":"
          "\"not_found_error\",\"message\":\"model: model-x\"}}}]",
          NULL, NULL);
    ok(strstr(r.err.text, "HTTP 404") && strstr(r.err.text, ": model: model-x"),
       "anthropic: 404 surfaces the server's own message (%s)", r.err.text);
    s_run_release(&r);

    s_run(&r, "openai", 1,
          "[{\"status\":400,\"body\":{\"error\":{\"message\":\"Invalid "
          "schema for function 'python'\"}}}]",
          NULL, TOOLS);
    is_str(r.err.text,
           "openai: the server rejected the request (HTTP 400): Invalid "
           "schema for function 'python'",
           "a 400 gives the server's reason");
    s_run_release(&r);
}

static void
t_malformed(void)
{
    run_t r;
    s_run(&r, "openai", 0,
          "[{\"body\":\"{\\\"choices\\\": [tru\",\"headers\":"
          "{\"Content-Type\":\"application/json\"}}]",
          NULL, NULL);
    ok(r.rc == -1 && strstr(r.err.text, "malformed JSON") &&
           strstr(r.err.text, "'{\"choices\": [tru'"),
       "openai: a malformed JSON body gives a clear error with a snippet "
       "(%s)",
       r.err.text);
    is_int(s_nreq(&r), 1, "a malformed body is not retried");
    s_run_release(&r);

    s_run(&r, "anthropic", 1,
          "[{\"sse_events\":[\"event: message_start\\ndata: {not json\\n\\n\"]"
          "}]",
          NULL, NULL);
    ok(r.rc == -1 && strstr(r.err.text, "malformed JSON in the event stream") &&
           strstr(r.err.text, "{not json"),
       "anthropic: a malformed event gives a clear error with a snippet "
       "(%s)",
       r.err.text);
    s_run_release(&r);

    s_run(&r, "openai", 1,
          "[{\"sse_events\":[{\"data\":{\"error\":{\"message\":\"context "
          "length exceeded\",\"type\":\"invalid_request_error\"}}}]}]",
          NULL, NULL);
    ok(r.rc == -1 && strstr(r.err.text, "context length exceeded") &&
           s_nreq(&r) == 1,
       "openai: an error object inside the stream becomes the error (%s)",
       r.err.text);
    s_run_release(&r);
}

static void
t_stream_cut(const char *kind)
{
    run_t r;
    /* Enough text that some deltas arrive before the cut. */
    s_run(&r, kind, 1,
          "[{\"reply\":{\"text\":\"The quarterly variance is large and "
          "growing.\",\"split\":2},\"cut_after_bytes\":1400},"
          "{\"reply\":{\"text\":\"unused\"}}]",
          NULL, NULL);
    ok(r.rc == -1 && r.err.code == ERR_PROVIDER &&
           strstr(r.err.text, "cut off mid-message"),
       "%s: a stream cut mid-message gives a clear error (%s)", kind,
       r.err.text);
    ok(r.rec.text.len > 0 && s_nreq(&r) == 1,
       "%s: after text reached the caller the cut is not retried "
       "(%zu delivered bytes, %zu requests)",
       kind, r.rec.text.len, s_nreq(&r));
    s_run_release(&r);

    /* A stream that ends cleanly without its terminator. */
    const char *script =
        strcmp(kind, "openai") == 0
            ? "[{\"sse_events\":[{\"data\":{\"choices\":[{\"index\":0,"
              "\"delta\":{\"content\":\"partial\"}}]}}]}]"
            : "[{\"sse_events\":[{\"event\":\"content_block_delta\",\"data\":"
              "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":"
              "{\"type\":\"text_delta\",\"text\":\"partial\"}}}]}]";
    s_run(&r, kind, 1, script, NULL, NULL);
    ok(r.rc == -1 && strstr(r.err.text, "cut off mid-message"),
       "%s: a stream closed before its terminator is reported as cut (%s)",
       kind, r.err.text);
    s_run_release(&r);

    if (strcmp(kind, "anthropic") == 0) {
        s_run(&r, kind, 1,
              "[{\"sse_events\":[{\"event\":\"content_block_delta\",\"data\":"
              "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":"
              "{\"type\":\"text_delta\",\"text\":\"Hal\"}}},{\"event\":"
              "\"error\",\"data\":{\"type\":\"error\",\"error\":{\"type\":"
              "\"overloaded_error\",\"message\":\"Overloaded\"}}}]}]",
              NULL, NULL);
        ok(r.rc == -1 && s_nreq(&r) == 1 &&
               strstr(r.err.text, "overloaded_error in the middle of the "
                                  "reply"),
           "anthropic: overloaded_error after output is a clear error, not "
           "a retry (%s)",
           r.err.text);
        s_run_release(&r);
    }
}

static void
t_config(void)
{
    err_t err = {0};
    s_env_clear();
    ag_provider_t *p = ag_provider_new(NULL, &err);
    ok(p == NULL && err.code == ERR_USAGE &&
           strstr(err.text, "OPENAI_API_KEY") &&
           strstr(err.text, "ANTHROPIC_API_KEY") &&
           strstr(err.text, "JUPYTER_AGENT_MODEL"),
       "with nothing configured the error names the variables (%s)", err.text);

    p = ag_provider_new("openai:gpt-4o", &err);
    ok(p == NULL && strstr(err.text, "OPENAI_API_KEY is not set"),
       "openai without a key or base URL says OPENAI_API_KEY is not set");
    p = ag_provider_new("anthropic:claude-x", &err);
    ok(p == NULL && strstr(err.text, "ANTHROPIC_API_KEY is not set"),
       "anthropic without a key says ANTHROPIC_API_KEY is not set");

    setenv("ANTHROPIC_API_KEY", AKEY, 1);
    p = ag_provider_new(NULL, &err);
    ok(p && strcmp(ag_provider_name(p), "anthropic") == 0 &&
           strcmp(ag_provider_model(p), "anthropic:claude-sonnet-4-5") == 0,
       "ANTHROPIC_API_KEY alone selects anthropic:claude-sonnet-4-5");
    ag_provider_destroy(&p);
    setenv("JUPYTER_AGENT_MODEL", "claude-opus-4-1", 1);
    p = ag_provider_new(NULL, &err);
    ok(p && strcmp(ag_provider_model(p), "anthropic:claude-opus-4-1") == 0,
       "JUPYTER_AGENT_MODEL with a bare claude name selects anthropic");
    ag_provider_destroy(&p);
    p = ag_provider_new("openai:", &err);
    ok(p == NULL && err.code == ERR_USAGE, "a spec without a model is "
                                           "rejected");
    unsetenv("OPENAI_BASE_URL");
    setenv("OPENAI_API_KEY", OKEY, 1);
    p = ag_provider_new("bogus:thing", &err);
    ok(p == NULL && err.code == ERR_USAGE &&
           strstr(err.text, "unknown model provider 'bogus'") &&
           !strstr(err.text, "OPENAI_API_KEY"),
       "--model bogus:thing says the provider is unknown (%s)", err.text);
    ag_provider_destroy(&p);
    unsetenv("OPENAI_API_KEY");
    setenv("OPENAI_BASE_URL", "ftp://x", 1);
    p = ag_provider_new("openai:m", &err);
    ok(p == NULL && strstr(err.text, "OPENAI_BASE_URL must start with http"),
       "a non-http base URL is rejected");
    ok(strstr(err.text, OKEY) == NULL, "config errors carry no key");

    /* A local server with no key, and a model name containing ':'. */
    fake_llm_t srv;
    if (s_start(&srv, "[{\"reply\":{\"text\":\"local\"}}]") < 0) {
        ok(0, "fake server starts");
        return;
    }
    unsetenv("OPENAI_API_KEY");
    err_clear(&err);
    p = ag_provider_new("openai:llama3.1:8b", &err);
    ag_conv_t *c = s_conv_hi();
    ag_turn_t t = {0};
    int rc = p ? ag_provider_turn(p, c, NULL, NULL, &t, &err) : -1;
    json_t *reqs = fake_llm_requests(&srv);
    ok(rc == 0 && strcmp(t.text, "local") == 0,
       "a local OpenAI-compatible server works without a key (%s)", err.text);
    is_str(json_string_value(json_object_get(s_body(reqs, 0), "model")),
           "llama3.1:8b", "a model name containing ':' is sent whole");
    ok(s_header(reqs, 0, "Authorization") == NULL,
       "no Authorization header is sent without a key");
    json_decref(reqs);
    ag_turn_release(&t);
    ag_conv_destroy(&c);
    ag_provider_destroy(&p);
    s_stop(&srv);

    /* Nothing listening: a clear connection error after the tries. */
    if (s_start(&srv, "[]") < 0)
        return;
    char base[64];
    snprintf(base, sizeof base, "%s", srv.openai_base);
    s_stop(&srv);
    setenv("OPENAI_BASE_URL", base, 1);
    p = ag_provider_new("openai:m", &err);
    ag_provider_set_retry(p, 2, 1);
    c = s_conv_hi();
    rc = ag_provider_turn(p, c, NULL, NULL, &t, &err);
    ok(rc == -1 &&
           strstr(err.text, "openai: could not reach http://127.0.0.1") &&
           strstr(err.text, "after 2 tries"),
       "a refused connection is retried, then reported with the URL (%s)",
       err.text);
    s_key_check_text(err.text);
    ag_conv_destroy(&c);
    ag_provider_destroy(&p);

    /* The URL in messages is the one contacted, minus credentials. */
    const char *port = strrchr(base, ':') + 1;
    static const struct {
        const char *pre; /* base URL: pre, the dead port, post */
        const char *post;
        const char *host; /* must be named in the message */
        const char *gone; /* must not appear in it */
    } urls[] = {
        {"http://me:s3cret@127.0.0.1:", "/v1", "http://127.0.0.1:", "s3cret"},
        {"http://127.0.0.1:", "?x=a@evil.example",
         "http://127.0.0.1:", "http://evil.example"},
        {"http://127.0.0.1:", "#@evil.example",
         "http://127.0.0.1:", "http://evil.example"},
    };
    int plen = (int)strcspn(port, "/");
    for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++) {
        char url[128];
        snprintf(url, sizeof url, "%s%.*s%s", urls[i].pre, plen, port,
                 urls[i].post);
        setenv("OPENAI_BASE_URL", url, 1);
        err_clear(&err);
        p = ag_provider_new("openai:m", &err);
        if (p)
            ag_provider_set_retry(p, 1, 1);
        c = s_conv_hi();
        rc = p ? ag_provider_turn(p, c, NULL, NULL, &t, &err) : -1;
        ok(rc == -1 && strstr(err.text, urls[i].host) &&
               !strstr(err.text, urls[i].gone),
           "an error about %s names the host contacted and hides "
           "credentials (%s)",
           url, err.text);
        ag_conv_destroy(&c);
        ag_provider_destroy(&p);
    }
    setenv("OPENAI_BASE_URL", "http://me:s3cret@[::1", 1);
    p = ag_provider_new("openai:m", &err);
    ok(!p && !strstr(err.text, "s3cret"),
       "a base URL that does not parse is refused without echoing its "
       "password (%s)",
       err.text);
}

static void
t_json_when_streaming(void)
{
    run_t r;
    /* A server that ignores "stream": true and answers with one body. */
    s_run(&r, "openai", 1,
          "[{\"body\":{\"choices\":[{\"index\":0,\"message\":{\"role\":"
          "\"assistant\",\"content\":\"plain\"},\"finish_reason\":\"stop\"}],"
          "\"usage\":{\"prompt_tokens\":2,\"completion_tokens\":1}}}]",
          NULL, NULL);
    ok(r.rc == 0 && strcmp(r.turn.text, "plain") == 0 &&
           r.turn.usage.input_tokens == 2,
       "a server that ignores stream:true and sends JSON still works");
    s_run_release(&r);
}

/* ---- record and replay ----------------------------------------------- */

static void
t_record_replay(void)
{
    char dir[] = "/tmp/test_providers.XXXXXX";
    char path[128];
    if (!mkdtemp(dir)) {
        ok(0, "temp dir");
        return;
    }
    snprintf(path, sizeof path, "%s/session.jsonl", dir);
    fake_llm_t srv;
    if (s_start(&srv,
                "[{\"reply\":{\"text\":\"Running.\",\"tool_calls\":[{\"id\":"
                "\"call_9\",\"name\":\"python\",\"arguments\":\"{\\\"code\\\":"
                "\\\"print(2)\\\"}\"}],\"usage\":{\"input_tokens\":7,"
                "\"output_tokens\":2}}},{\"reply\":{\"text\":\"It printed 2."
                "\",\"usage\":{\"input_tokens\":9,\"output_tokens\":4}}}]") <
        0) {
        ok(0, "fake server starts");
        return;
    }
    err_t err = {0};
    ag_provider_t *p = s_provider("openai", 1);
    ok(ag_provider_set_record(p, path, &err) == 0, "recording starts (%s)",
       err.text);
    ag_conv_t *c = s_conv_hi();
    ag_turn_t t = {0};
    int rc = ag_provider_turn(p, c, NULL, NULL, &t, &err);
    ag_conv_add_assistant(c, t.text, t.calls, t.ncalls);
    ag_turn_release(&t);
    ag_conv_add_tool_result(c, "call_9", "python", "2\n", 0, NULL, 0);
    rc |= ag_provider_turn(p, c, NULL, NULL, &t, &err);
    ag_turn_release(&t);
    ok(rc == 0, "two live turns are recorded (%s)", err.text);
    ag_provider_destroy(&p);
    s_stop(&srv);
    ag_conv_destroy(&c);

    fake_llm_t tmp = {0};
    snprintf(tmp.log, sizeof tmp.log, "%s", path);
    char *text = fake_llm_log_text(&tmp);
    ok(strncmp(text,
               "{\"jupyter_agent_replay\":1,\"model\":\"openai:model-x\"}\n",
               52) == 0,
       "the recording starts with its header line");
    ok(strstr(text, "\"arguments\":\"{\\\"code\\\":\\\"print(2)\\\"}\"") &&
           strstr(text, "\"input_tokens\":9"),
       "the recording holds neutral turns (arguments, usage)");
    ok(!strstr(text, OKEY) && !strstr(text, AKEY),
       "the recording holds no key");
    free(text);

    /* Play it back with no server at all. */
    s_env_clear();
    char spec[160];
    snprintf(spec, sizeof spec, "replay:%s", path);
    p = ag_provider_new(spec, &err);
    ok(p != NULL, "a replay provider opens the recording (%s)", err.text);
    if (!p)
        return;
    is_str(ag_provider_model(p), "openai:model-x",
           "the replay reports the recorded model");
    rec_t rec;
    ag_stream_cb_t cb;
    s_rec_init(&rec, &cb);
    c = s_conv_hi();
    rc = ag_provider_turn(p, c, NULL, &cb, &t, &err);
    ok(rc == 0 && strcmp(t.text, "Running.") == 0 && t.ncalls == 1 &&
           strcmp(t.calls[0].id, "call_9") == 0 &&
           strcmp(t.calls[0].arguments, "{\"code\":\"print(2)\"}") == 0 &&
           t.stop == AG_STOP_TOOL_USE,
       "replay turn 1 gives back the recorded text and tool call");
    ok(strcmp(buf_cstr(&rec.text), "Running.") == 0 &&
           strcmp(buf_cstr(&rec.starts), "python") == 0,
       "replay calls the streaming callbacks too");
    ag_turn_release(&t);
    rc = ag_provider_turn(p, c, NULL, &cb, &t, &err);
    ok(rc == 0 && strcmp(t.text, "It printed 2.") == 0,
       "replay turn 2 gives back the recorded answer");
    ag_turn_release(&t);
    ag_usage_t u = ag_provider_usage(p);
    ok(u.input_tokens == 16 && u.output_tokens == 6,
       "replayed usage is summed like live usage");
    rc = ag_provider_turn(p, c, NULL, &cb, &t, &err);
    ok(rc == -1 && err.code == ERR_USAGE &&
           strstr(err.text, "holds 2 recorded turns") &&
           strstr(err.text, "asked for turn 3"),
       "replay past the end of the recording fails clearly (%s)", err.text);
    s_rec_release(&rec);
    ag_conv_destroy(&c);
    ag_provider_destroy(&p);

    FILE *f = fopen(path, "w");
    fputs("{\"hello\": 1}\n", f);
    fclose(f);
    p = ag_provider_new(spec, &err);
    ok(p == NULL && strstr(err.text, "does not start with the header"),
       "a file that is not a recording is refused (%s)", err.text);
    unlink(path);
    p = ag_provider_new(spec, &err);
    ok(p == NULL && err.code == ERR_IO && strstr(err.text, "cannot open"),
       "a missing recording is a clear I/O error");
    rmdir(dir);
}

/* ---- cancellation ---------------------------------------------------- */

static atomic_int g_cancel;

static void *
s_canceller(void *arg)
{
    (void)arg;
    struct timespec ts = {0, 200 * 1000000L};
    nanosleep(&ts, NULL);
    atomic_store(&g_cancel, 1);
    return NULL;
}

static void
t_cancel(const char *script, const char *what)
{
    fake_llm_t srv;
    if (s_start(&srv, script) < 0) {
        ok(0, "fake server starts");
        return;
    }
    ag_provider_t *p = s_provider("openai", 1);
    atomic_store(&g_cancel, 0);
    ag_provider_set_cancel(p, &g_cancel);
    ag_conv_t *c = s_conv_hi();
    ag_turn_t t = {0};
    err_t err = {0};
    pthread_t th;
    pthread_create(&th, NULL, s_canceller, NULL);
    int rc = ag_provider_turn(p, c, NULL, NULL, &t, &err);
    pthread_join(th, NULL);
    ok(rc == -1 && err.code == ERR_INTERRUPTED,
       "setting the cancel flag %s aborts the turn with ERR_INTERRUPTED (%s)",
       what, err.text);
    rc = ag_provider_turn(p, c, NULL, NULL, &t, &err);
    ok(rc == -1 && err.code == ERR_INTERRUPTED,
       "while the flag stays set new turns fail at once");
    ag_conv_destroy(&c);
    ag_provider_destroy(&p);
    s_stop(&srv);
}

int
main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    t_text_answer("openai", 1);
    t_text_answer("openai", 0);
    t_text_answer("anthropic", 1);
    t_text_answer("anthropic", 0);
    t_openai_fragments();
    t_anthropic_fragments();
    t_whole_tool_calls("openai");
    t_whole_tool_calls("anthropic");
    t_image_shapes();
    t_usage_summed("openai");
    t_usage_summed("anthropic");
    t_retries();
    t_retry_exhausted();
    t_http_errors();
    t_malformed();
    t_stream_cut("openai");
    t_stream_cut("anthropic");
    t_json_when_streaming();
    t_config();
    t_record_replay();
    t_cancel("[{\"delay\":20,\"reply\":{\"text\":\"late\"}}]",
             "while waiting for the server");
    t_cancel("[{\"status\":429,\"headers\":{\"retry-after\":\"30\"},\"body\":"
             "\"{}\"},{\"reply\":{\"text\":\"late\"}}]",
             "during a retry wait");
    ok(g_leaks == 0 && g_bodies >= 30 && g_errors >= 15,
       "no API key appears in any request body (%d checked) or error text "
       "(%d checked)",
       g_bodies, g_errors);
    return done_testing();
}
