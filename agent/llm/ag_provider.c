#include "agent/llm/ag_provider.h"

#include "agent/llm/ag_provider_impl.h"
#include "common/fileio.h"
#include "common/jget.h"
#include "common/log.h"
#include "common/secret.h"
#include "common/xalloc.h"

#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define S_OPENAI_BASE "https://api.openai.com/v1"
#define S_ANTHROPIC_BASE "https://api.anthropic.com"

/* ---- small helpers ---------------------------------------------------- */

json_t *
ag_provider_tool_spec(const json_t *tool, size_t index, const char *who,
                      const char *schema_key, err_t *err)
{
    const char *name = jget_str(tool, "name", NULL);
    const json_t *params = json_object_get(tool, "parameters");
    if (!name) {
        err_set(err, ERR_USAGE, "%s: tool %zu has no \"name\"", who, index);
        return NULL;
    }
    json_t *o = json_pack("{s:s}", "name", name);
    if (jget_str(tool, "description", NULL))
        json_object_set_new(o, "description",
                            json_string(jget_str(tool, "description", NULL)));
    json_object_set_new(
        o, schema_key,
        params ? json_deep_copy(params)
               : json_pack("{s:s, s:{}}", "type", "object", "properties"));
    return o;
}

void
ag_turn_release(ag_turn_t *t)
{
    if (!t)
        return;
    free((void *)t->text);
    for (size_t i = 0; i < t->ncalls; i++) {
        free((void *)t->calls[i].id);
        free((void *)t->calls[i].name);
        free((void *)t->calls[i].arguments);
    }
    free((void *)t->calls);
    memset(t, 0, sizeof *t);
}

static const char *
s_env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static long
s_env_long(const char *name, long dflt, long min)
{
    const char *v = s_env(name);
    if (!v)
        return dflt;
    char *end;
    long n = strtol(v, &end, 10);
    if (*end || n < min) {
        log_warn("%s=%s is not a number >= %ld; using %ld", name, v, min, dflt);
        return dflt;
    }
    return n;
}

/* Replace every occurrence of the key in `text` by "[redacted]". */
static void
s_redact(const ag_provider_t *p, char *text, size_t size)
{
    if (!p || !p->key || strlen(p->key) < 4)
        return;
    size_t klen = strlen(p->key);
    char *hit;
    while ((hit = strstr(text, p->key))) {
        static const char r[] = "[redacted]";
        size_t rest = strlen(hit + klen);
        size_t rlen = sizeof r - 1;
        if ((size_t)(hit - text) + rlen + rest + 1 > size)
            rest = size - 1 - (size_t)(hit - text) - rlen;
        memmove(hit + rlen, hit + klen, rest);
        memcpy(hit, r, rlen);
        hit[rlen + rest] = '\0';
    }
}

/* ---- construction ----------------------------------------------------- */

static int
s_load_replay(ag_provider_t *p, const char *path, err_t *err)
{
    FILE *f = fopen(path, "r");
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    size_t lineno = 0;
    int rc = -1;
    if (!f)
        return err_errno(err, ERR_IO, "replay: cannot open %s", path);
    p->replay = json_array();
    while ((n = getline(&line, &cap, f)) >= 0) {
        lineno++;
        json_error_t je;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        if (n == 0)
            continue;
        json_t *j = json_loadb(line, (size_t)n, 0, &je);
        if (!json_is_object(j)) {
            json_decref(j);
            err_set(err, ERR_USAGE,
                    "replay: %s line %zu is not a JSON object (%s); is this "
                    "a recording made with --record?",
                    path, lineno, je.text);
            goto out;
        }
        if (lineno == 1) {
            const char *model = jget_str(j, "model", NULL);
            if (jget_int(j, "jupyter_agent_replay", 0) != 1) {
                json_decref(j);
                err_set(err, ERR_USAGE,
                        "replay: %s does not start with the header "
                        "{\"jupyter_agent_replay\": 1, ...}; is this a "
                        "recording made with --record?",
                        path);
                goto out;
            }
            free(p->spec);
            p->spec = xasprintf("%s", model ? model : "replay");
            json_decref(j);
            continue;
        }
        json_array_append_new(p->replay, j);
    }
    if (lineno == 0) {
        err_set(err, ERR_USAGE, "replay: %s is empty", path);
        goto out;
    }
    rc = 0;
out:
    free(line);
    fclose(f);
    return rc;
}

/* The base URL must be an http or https URL libcurl can parse. */
static int
s_check_base_url(const ag_provider_ops_t *ops, const char *url, err_t *err)
{
    if (ag_url_is_http(url))
        return 0;
    char safe[400];
    ag_safe_url(url, safe, sizeof safe); /* never echo a password */
    return err_set(err, ERR_USAGE,
                   "%s: %s must start with http:// or https:// (got '%s')",
                   ops->name, ops->base_env, safe);
}

ag_provider_t *
ag_provider_new(const char *spec, err_t *err)
{
    char *owned = NULL;
    ag_provider_t *p = NULL;
    if (!spec || !*spec)
        spec = s_env("JUPYTER_AGENT_MODEL");
    if (!spec) {
        if (s_env("OPENAI_API_KEY") || s_env("OPENAI_BASE_URL"))
            spec = "openai:gpt-4o";
        else if (s_env("ANTHROPIC_API_KEY"))
            spec = "anthropic:claude-sonnet-4-5";
        else {
            err_set(err, ERR_USAGE,
                    "no model provider configured: set OPENAI_API_KEY (and "
                    "optionally OPENAI_BASE_URL) or ANTHROPIC_API_KEY, and "
                    "choose a model with --model or JUPYTER_AGENT_MODEL "
                    "(e.g. openai:gpt-4o, anthropic:claude-sonnet-4-5, "
                    "replay:FILE)");
            return NULL;
        }
    }
    const char *colon = strchr(spec, ':');
    const char *kind;
    const char *rest;
    if (colon && (strncmp(spec, "openai:", 7) == 0 ||
                  strncmp(spec, "anthropic:", 10) == 0 ||
                  strncmp(spec, "replay:", 7) == 0)) {
        owned = xstrndup(spec, (size_t)(colon - spec));
        kind = owned;
        rest = colon + 1;
    } else if (colon && !s_env("OPENAI_BASE_URL")) {
        /* PROVIDER:MODEL with a provider we do not know: a name with a
         * colon is a bare model name only for a local server (Ollama's
         * "llama3.1:8b"), and without OPENAI_BASE_URL there is none. */
        err_set(err, ERR_USAGE,
                "unknown model provider '%.*s' in '%s': use openai:MODEL, "
                "anthropic:MODEL or replay:FILE (a model name with a colon, "
                "e.g. Ollama's llama3.1:8b, is for the server "
                "OPENAI_BASE_URL names: set it)",
                (int)(colon - spec < 40 ? colon - spec : 40), spec, spec);
        goto fail;
    } else {
        /* A bare model name (Ollama names like "llama3.1:8b" included). */
        kind = strncmp(spec, "claude", 6) == 0 ? "anthropic" : "openai";
        rest = spec;
    }
    if (!*rest) {
        err_set(err, ERR_USAGE,
                "model '%s' names no model; use e.g. openai:gpt-4o, "
                "anthropic:claude-sonnet-4-5 or replay:FILE",
                spec);
        goto fail;
    }

    if (sodium_init() < 0) { /* randombytes_uniform() jitters retries */
        err_set(err, ERR_PROVIDER, "cannot initialise libsodium");
        goto fail;
    }
    p = xcalloc(1, sizeof *p);
    p->stream = s_env_long("JUPYTER_AGENT_STREAM", 1, 0) != 0;
    p->max_tries = (int)s_env_long("JUPYTER_AGENT_MAX_TRIES", 4, 1);
    p->retry_base_ms = s_env_long("JUPYTER_AGENT_RETRY_BASE_MS", 1000, 0);
    p->read_timeout_s = s_env_long("JUPYTER_AGENT_READ_TIMEOUT", 300, 1);

    if (strcmp(kind, "replay") == 0) {
        p->replay_path = xstrdup(rest);
        p->model = xstrdup(rest);
        p->spec = xasprintf("replay:%s", rest);
        if (s_load_replay(p, rest, err) < 0)
            goto fail;
    } else {
        const ag_provider_ops_t *ops =
            strcmp(kind, "anthropic") == 0 ? &ag_anthropic_ops : &ag_openai_ops;
        const char *dflt =
            ops == &ag_openai_ops ? S_OPENAI_BASE : S_ANTHROPIC_BASE;
        const char *base = s_env(ops->base_env);
        const char *key = s_env(ops->key_env);
        p->ops = ops;
        p->model = xstrdup(rest);
        p->spec = xasprintf("%s:%s", ops->name, rest);
        p->base_url = xstrdup(base ? base : dflt);
        size_t bl = strlen(p->base_url);
        while (bl > 0 && p->base_url[bl - 1] == '/')
            p->base_url[--bl] = '\0';
        if (s_check_base_url(ops, p->base_url, err))
            goto fail;
        if (key)
            p->key = xstrdup(key);
        else if (!base) {
            err_set(err, ERR_USAGE,
                    "%s: %s is not set; export it, or point %s at a local "
                    "server that needs no key",
                    ops->name, ops->key_env, ops->base_env);
            goto fail;
        }
        p->max_tokens = ops == &ag_anthropic_ops ? 8192 : 0;
    }
    free(owned);
    return p;
fail:
    free(owned);
    ag_provider_destroy(&p);
    return NULL;
}

void
ag_provider_destroy(ag_provider_t **pp)
{
    if (!pp || !*pp)
        return;
    ag_provider_t *p = *pp;
    if (p->record)
        fclose(p->record);
    secret_free(p->key);
    ag_http_destroy(&p->http);
    json_decref(p->replay);
    free(p->replay_path);
    free(p->spec);
    free(p->model);
    free(p->base_url);
    free(p);
    *pp = NULL;
}

ag_usage_t
ag_provider_usage(const ag_provider_t *p)
{
    return p->total;
}

const char *
ag_provider_name(const ag_provider_t *p)
{
    return p->ops ? p->ops->name : "replay";
}

const char *
ag_provider_model(const ag_provider_t *p)
{
    return p->spec;
}

void
ag_provider_set_cancel(ag_provider_t *p, const atomic_int *flag)
{
    p->cancel = flag;
}

void
ag_provider_set_stream(ag_provider_t *p, int stream)
{
    p->stream = stream ? 1 : 0;
}

void
ag_provider_set_retry(ag_provider_t *p, int max_tries, long base_ms)
{
    p->max_tries = max_tries >= 1 ? max_tries : 1;
    p->retry_base_ms = base_ms >= 0 ? base_ms : 0;
}

int
ag_provider_set_record(ag_provider_t *p, const char *path, err_t *err)
{
    if (p->record) {
        fclose(p->record);
        p->record = NULL;
    }
    if (!path)
        return 0;
    /* A new or regular file: never a device, FIFO or link made one. */
    int fd = file_open_output(path, "--record", 0666, err);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        return fd < 0
                   ? -1
                   : err_errno(err, ERR_IO, "record: cannot create %s", path);
    }
    json_t *h =
        json_pack("{s:i, s:s}", "jupyter_agent_replay", 1, "model", p->spec);
    char *line = json_dumps(h, JSON_COMPACT);
    json_decref(h);
    int bad = fprintf(f, "%s\n", line) < 0 || fflush(f) != 0;
    free(line);
    if (bad) {
        fclose(f);
        return err_errno(err, ERR_IO, "record: cannot write %s", path);
    }
    p->record = f;
    return 0;
}

/* ---- replay ------------------------------------------------------------ */

static enum ag_stop
s_stop_from_name(const char *s)
{
    if (!s || strcmp(s, "end") == 0)
        return AG_STOP_END;
    if (strcmp(s, "tool_use") == 0)
        return AG_STOP_TOOL_USE;
    if (strcmp(s, "max_tokens") == 0)
        return AG_STOP_MAX_TOKENS;
    return AG_STOP_OTHER;
}

static const char *
s_stop_name(enum ag_stop s)
{
    switch (s) {
    case AG_STOP_END:
        return "end";
    case AG_STOP_TOOL_USE:
        return "tool_use";
    case AG_STOP_MAX_TOKENS:
        return "max_tokens";
    case AG_STOP_OTHER:
        break;
    }
    return "other";
}

static int
s_replay_turn(ag_provider_t *p, const ag_stream_cb_t *cb, ag_turn_t *out,
              err_t *err)
{
    size_t n = json_array_size(p->replay);
    if (p->replay_pos >= n)
        return err_set(err, ERR_USAGE,
                       "replay: %s holds %zu recorded turn%s and the "
                       "conversation asked for turn %zu; the session went "
                       "further than the recording",
                       p->replay_path, n, n == 1 ? "" : "s", p->replay_pos + 1);
    const json_t *t = json_array_get(p->replay, p->replay_pos);
    size_t lineno = p->replay_pos + 2;
    const json_t *calls = json_object_get(t, "tool_calls");
    const json_t *usage = json_object_get(t, "usage");
    const char *text = jget_str(t, "text", NULL);
    ag_turn_state_t st;
    int rc = -1;
    ag_ts_init(&st, p, cb);
    if ((json_object_get(t, "text") && !text) ||
        (calls && !json_is_array(calls))) {
        err_set(err, ERR_USAGE,
                "replay: %s line %zu: \"text\" must be a string and "
                "\"tool_calls\" an array",
                p->replay_path, lineno);
        goto out;
    }
    if (text)
        ag_ts_text(&st, text, strlen(text));
    size_t i;
    const json_t *c;
    json_array_foreach(calls, i, c)
    {
        const char *id = jget_str(c, "id", NULL);
        const char *name = jget_str(c, "name", NULL);
        const json_t *a = json_object_get(c, "arguments");
        if (!name || !*name ||
            (a && !json_is_string(a) && !json_is_object(a))) {
            err_set(err, ERR_USAGE,
                    "replay: %s line %zu: tool call %zu needs a \"name\" and "
                    "string \"arguments\"",
                    p->replay_path, lineno, i);
            goto out;
        }
        if (ag_ts_call(&st, i, id, name, err) < 0)
            goto out;
        char *args = json_is_object(a) ? json_dumps(a, JSON_COMPACT) : NULL;
        const char *s = args ? args : json_string_value(a);
        if (s)
            ag_ts_call_args(&st, i, s, strlen(s), err);
        free(args);
    }
    st.usage.input_tokens = jget_int(usage, "input_tokens", 0);
    st.usage.output_tokens = jget_int(usage, "output_tokens", 0);
    if (jget_str(t, "stop_reason", NULL))
        ag_ts_stop(&st, s_stop_from_name(jget_str(t, "stop_reason", NULL)));
    ag_ts_to_turn(&st, out);
    p->replay_pos++;
    rc = 0;
out:
    ag_ts_release(&st);
    return rc;
}

/* ---- the turn ---------------------------------------------------------- */

static int
s_record(ag_provider_t *p, const ag_turn_t *t, err_t *err)
{
    json_t *calls = json_array();
    for (size_t i = 0; i < t->ncalls; i++)
        json_array_append_new(calls,
                              json_pack("{s:s, s:s, s:s}", "id", t->calls[i].id,
                                        "name", t->calls[i].name, "arguments",
                                        t->calls[i].arguments));
    json_t *j =
        json_pack("{s:s, s:o, s:s, s:{s:I, s:I}}", "text", t->text,
                  "tool_calls", calls, "stop_reason", s_stop_name(t->stop),
                  "usage", "input_tokens", (json_int_t)t->usage.input_tokens,
                  "output_tokens", (json_int_t)t->usage.output_tokens);
    char *line = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    int bad =
        !line || fprintf(p->record, "%s\n", line) < 0 || fflush(p->record) != 0;
    free(line);
    if (bad)
        return err_errno(err, ERR_IO, "record: cannot append a turn");
    return 0;
}

int
ag_provider_turn(ag_provider_t *p, const ag_conv_t *conv, const json_t *tools,
                 const ag_stream_cb_t *cb, ag_turn_t *out, err_t *err)
{
    int rc;
    memset(out, 0, sizeof *out);
    if (tools && !json_is_array(tools))
        return err_set(err, ERR_USAGE,
                       "%s: tools must be a JSON array of {name, "
                       "description, parameters}",
                       ag_provider_name(p));
    if (p->cancel && atomic_load(p->cancel))
        return err_set(err, ERR_INTERRUPTED, "%s: interrupted",
                       ag_provider_name(p));
    if (p->ops)
        rc = ag_provider_http_turn(p, conv, tools, cb, out, err);
    else
        rc = s_replay_turn(p, cb, out, err);
    if (rc == 0 && p->record && s_record(p, out, err) < 0) {
        ag_turn_release(out);
        rc = -1;
    }
    if (rc < 0) {
        if (err)
            s_redact(p, err->text, sizeof err->text);
        return -1;
    }
    p->total.input_tokens += out->usage.input_tokens;
    p->total.output_tokens += out->usage.output_tokens;
    p->total.turns++;
    return 0;
}
