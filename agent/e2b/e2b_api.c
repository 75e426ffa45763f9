#include "agent/e2b/e2b_api.h"

#include "agent/session/ag_pause.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"

#include <stdlib.h>
#include <string.h>

const char *
e2b_api_kernel_for(const char *template_id)
{
    static const char *const python[] = {"code-interpreter-v1",
                                         "code-interpreter", "base"};
    for (size_t i = 0; template_id && i < sizeof python / sizeof python[0]; i++)
        if (strcmp(template_id, python[i]) == 0)
            return "python3";
    return NULL;
}

/* The parsed JSON body of a request, or NULL after answering 400. An
 * empty body is {}. */
static json_t *
s_body(e2b_req_t *r)
{
    if (r->body_len == 0)
        return json_object();
    json_error_t je;
    json_t *j = json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES, &je);
    if (!j || !json_is_object(j)) {
        e2b_reply_error(r, 400, "the request body is not a JSON object%s%s",
                        j ? "" : ": ", j ? "" : je.text);
        json_decref(j);
        return NULL;
    }
    return j;
}

/* An object whose values are all strings (metadata, envVars), or NULL. */
static bool
s_string_map(const json_t *j)
{
    if (!j || json_is_null(j))
        return true;
    if (!json_is_object(j))
        return false;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)j, k, v) if (!json_is_string(v)) return false;
    return true;
}

/* E2B's network settings as --allow-net rules (docs/e2b.md): allowOut is
 * the list; everything else is refused here already, so E2B's "deny all"
 * (allow_internet_access false, or denyOut holding 0.0.0.0/0) is what
 * every rule set means, and other denyOut entries can only narrow what
 * allowOut (which wins in E2B) does not name. Without "deny all" E2B
 * would let everything else out, which this server does not offer.
 * Returns the rules (new string, "" for none) or NULL after answering. */
static char *
s_net_rules(e2b_req_t *r, const json_t *net, const json_t *internet)
{
    const json_t *xf = json_object_get(net, "rules");
    if (xf && !json_is_null(xf) &&
        !(json_is_object(xf) && json_object_size(xf) == 0)) {
        e2b_reply_error(r, 501,
                        "network.rules (headers injected at the egress) are "
                        "not offered on this door; leave them out");
        return NULL;
    }
    static const char *const unsupported[] = {"egressProxy", "maskRequestHost",
                                              "httpsPorts"};
    for (size_t i = 0; i < 3; i++) {
        const json_t *v = json_object_get(net, unsupported[i]);
        if (v && !json_is_null(v)) {
            e2b_reply_error(r, 501, "network.%s is not supported here",
                            unsupported[i]);
            return NULL;
        }
    }
    if (json_is_false(json_object_get(net, "allowPublicTraffic"))) {
        e2b_reply_error(r, 501,
                        "network.allowPublicTraffic: this server has no "
                        "public sandbox URLs to protect");
        return NULL;
    }
    const json_t *deny = json_object_get(net, "denyOut");
    if (deny && !json_is_null(deny) && !json_is_array(deny)) {
        e2b_reply_error(r, 400, "network.denyOut must be a list of strings");
        return NULL;
    }
    bool deny_all = json_is_false(internet);
    size_t i;
    const json_t *d;
    json_array_foreach(deny, i,
                       d) if (json_is_string(d) &&
                              (strcmp(json_string_value(d), "0.0.0.0/0") == 0))
        deny_all = true;
    if (!deny_all) {
        e2b_reply_error(r, 501,
                        "this server lets out only what network.allowOut "
                        "names: say so with denyOut [\"0.0.0.0/0\"] (E2B's "
                        "ALL_TRAFFIC) or allow_internet_access false; open "
                        "internet is not offered");
        return NULL;
    }
    const json_t *allow = json_object_get(net, "allowOut");
    char *rules =
        !allow || json_is_null(allow)
            ? xstrdup("")
            : (json_is_array(allow) ? ag_net_rules_join(allow) : NULL);
    err_t err = {0};
    if (!rules || sb_net_rules_check(rules, &err) < 0) {
        e2b_reply_error(r, 400, "network.allowOut: %s",
                        rules ? err.text
                              : "must be a list of hosts, *.domains, IP "
                                "addresses or CIDRs");
        free(rules);
        return NULL;
    }
    return rules;
}

/* Fields of a create that another issue brings: 501 naming them. */
static bool
s_refuse_unsupported(e2b_req_t *r, const json_t *body)
{
    json_t *mcp = json_object_get(body, "mcp");
    if (mcp && !json_is_null(mcp)) {
        e2b_reply_error(r, 501,
                        "mcp: the MCP gateway inside sandboxes is "
                        "not supported; run 'jupyter-agent mcp' "
                        "instead");
        return true;
    }
    json_t *vol = json_object_get(body, "volumeMounts");
    if (json_array_size(vol) > 0) {
        e2b_reply_error(r, 501,
                        "volumeMounts: volumes are not supported; "
                        "the operator shares host directories "
                        "read-only with --bind");
        return true;
    }
    return false;
}

/* timeout (seconds) from `body`, or -1 after answering 400; `dflt` when
 * absent. */
static int
s_timeout(e2b_req_t *r, const json_t *body, const e2b_config_t *cfg, int dflt)
{
    json_t *t = json_object_get(body, "timeout");
    if (!t || json_is_null(t))
        return dflt;
    json_int_t v = json_is_integer(t) ? json_integer_value(t) : -1;
    if (v < 0 || v > cfg->max_timeout_s) {
        e2b_reply_error(r, 400,
                        "timeout must be a number of seconds from 0 to %d "
                        "(the server's longest)",
                        cfg->max_timeout_s);
        return -1;
    }
    return (int)v;
}

static void
s_create(e2b_req_t *r, const e2b_config_t *cfg, const char *owner)
{
    json_t *body = s_body(r);
    if (!body)
        return;
    const char *tpl = json_string_value(json_object_get(body, "templateID"));
    if (!tpl) {
        e2b_reply_error(r, 400,
                        "templateID is required (e.g. "
                        "\"code-interpreter-v1\" or \"base\")");
        goto out;
    }
    const char *kernel = e2b_api_kernel_for(tpl);
    if (!kernel) {
        e2b_reply_error(r, 404,
                        "template '%.100s' not found: this server has "
                        "\"code-interpreter-v1\" and \"base\" (a sandboxed "
                        "python3 kernel); custom templates are not "
                        "supported",
                        tpl);
        goto out;
    }
    json_t *meta = json_object_get(body, "metadata");
    json_t *env = json_object_get(body, "envVars");
    if (!s_string_map(meta) || !s_string_map(env)) {
        e2b_reply_error(r, 400,
                        "metadata and envVars must be objects of "
                        "strings");
        goto out;
    }
    if (s_refuse_unsupported(r, body))
        goto out;
    /* autoPause: E2B's default keeps the memory (autoPauseMemory absent
     * or true), which this engine may not do: refused with the reason,
     * rather than a sandbox that would lose its state at the timeout. */
    bool auto_pause = json_is_true(json_object_get(body, "autoPause"));
    bool auto_memory = !json_is_false(json_object_get(body, "autoPauseMemory"));
    json_t *resume = json_object_get(body, "autoResume");
    bool auto_resume = json_is_true(json_object_get(resume, "enabled")) ||
                       json_is_true(resume);
    if (auto_resume && !(auto_pause && auto_memory)) {
        e2b_reply_error(r, 400,
                        "autoResume needs autoPause with the memory kept "
                        "(a files-only pause is resumed with "
                        "Sandbox.connect())");
        goto out;
    }
    if (auto_pause) {
        err_t perr = {0};
        if (!cfg->pause_dir) {
            e2b_reply_error(r, 501,
                            "autoPause: this server keeps no paused "
                            "sandboxes (no state directory)");
            goto out;
        }
        if (ag_pause_check(&cfg->session->policy, auto_memory, &perr) < 0) {
            e2b_reply_error(r, 400, "autoPause: %s", perr.text);
            goto out;
        }
    }
    int timeout = s_timeout(r, body, cfg, cfg->default_timeout_s);
    if (timeout < 0)
        goto out;
    const json_t *net = json_object_get(body, "network");
    const json_t *internet = json_object_get(body, "allow_internet_access");
    char *allow_net = NULL; /* network rules: this sandbox's own */
    if ((net && !json_is_null(net) &&
         !(json_is_object(net) && json_object_size(net) == 0)) ||
        json_is_boolean(internet)) {
        if (json_is_true(internet) && !net) {
            e2b_reply_error(r, 501,
                            "allow_internet_access: this server's egress "
                            "lets out only what network.allowOut names; open "
                            "internet is not offered");
            goto out;
        }
        if (!(allow_net = s_net_rules(r, net, internet)))
            goto out;
    }
    e2b_create_t c = {.template_id = tpl,
                      .kernel_name = kernel,
                      .timeout_s = timeout ? timeout : 1,
                      .metadata = json_is_object(meta) ? meta : NULL,
                      .env_vars = json_is_object(env) ? env : NULL,
                      .owner = owner,
                      .allow_net = allow_net};
    err_t err = {0};
    ag_reg_entry_t *e = e2b_sandbox_create(cfg, &c, &err);
    free(allow_net);
    if (!e) {
        if (err.code == ERR_USAGE)
            e2b_reply_error(r, 429,
                            "too many sandboxes: %s (--max-sandboxes %d)",
                            err.text, ag_registry_max(cfg->registry));
        else
            e2b_reply_error(r, 500, "the sandbox could not start: %s",
                            err.text);
        goto out;
    }
    if (auto_pause)
        e2b_sandbox_set_auto_pause(e2b_sandbox_of(e), true, auto_memory,
                                   auto_resume);
    e2b_reply_json(r, 201, e2b_sandbox_info(e2b_sandbox_of(e), true));
    ag_reg_unref(&e);
out:
    json_decref(body);
}

/* The caller's live sandbox `id`, or NULL after answering 404. */
static ag_reg_entry_t *
s_find(e2b_req_t *r, const e2b_config_t *cfg, const char *owner, const char *id)
{
    ag_reg_entry_t *e = ag_registry_get(cfg->registry, id);
    if (e && strcmp(ag_reg_owner(e), owner) != 0)
        ag_reg_unref(&e); /* another key's: as if it did not exist */
    if (!e)
        e2b_reply_error(r, 404,
                        "sandbox '%.64s' not found (it was killed, timed out "
                        "or never existed)",
                        id);
    return e;
}

static void
s_list(e2b_req_t *r, const e2b_config_t *cfg, const char *owner)
{
    const char *state = e2b_req_arg(r, "state");
    json_t *out = json_array();
    bool want_running = !state || strstr(state, "running");
    bool want_paused = !state || strstr(state, "paused");
    size_t n;
    ag_reg_entry_t **v = ag_registry_list(cfg->registry, &n);
    for (size_t i = 0; i < n; i++) {
        bool paused = e2b_sandbox_paused(e2b_sandbox_of(v[i]));
        if ((paused ? want_paused : want_running) &&
            ag_reg_state(v[i]) == AG_REG_RUNNING &&
            strcmp(ag_reg_owner(v[i]), owner) == 0)
            json_array_append_new(
                out, e2b_sandbox_info(e2b_sandbox_of(v[i]), false));
        ag_reg_unref(&v[i]);
    }
    free(v);
    e2b_reply_json(r, 200, out);
}

/* POST .../timeout {"timeout": S} (required) and the old keep-alive
 * .../refreshes {"duration": S} (default: the create's default): the end
 * becomes now + S. */
static void
s_new_end(e2b_req_t *r, const e2b_config_t *cfg, ag_reg_entry_t *e,
          const char *field, bool required)
{
    json_t *body = s_body(r);
    if (!body)
        return;
    json_t *v = json_object_get(body, field);
    json_int_t t = v ? (json_is_integer(v) ? json_integer_value(v) : -1)
                     : (required ? -2 : cfg->default_timeout_s);
    json_decref(body);
    if (t == -2) {
        e2b_reply_error(r, 400, "%s (seconds) is required", field);
        return;
    }
    if (t < 0 || t > cfg->max_timeout_s) {
        e2b_reply_error(r, 400, "%s must be a number of seconds from 0 to %d",
                        field, cfg->max_timeout_s);
        return;
    }
    if (!ag_reg_set_deadline(e, clock_mono_ms() + (int64_t)t * 1000)) {
        e2b_reply_error(r, 404, "the sandbox ended meanwhile");
        return;
    }
    e2b_reply_empty(r, 204);
}

/* The client is told what a resume kept: "memoryKept" in the body and
 * X-Jupyter-Agent-Memory-Kept (the SDK reads neither; docs/e2b.md says
 * a files-only pause restarts the kernel). */
static void
s_reply_sandbox(e2b_req_t *r, int status, e2b_sandbox_t *sb, bool resumed,
                bool memory_kept)
{
    json_t *info = e2b_sandbox_info(sb, true);
    if (resumed) {
        json_object_set_new(info, "memoryKept", json_boolean(memory_kept));
        json_object_set_new(
            info, "resumeNote",
            json_string(memory_kept
                            ? "resumed with its memory"
                            : "resumed from a files-only pause: /home/user "
                              "is as it was, the kernel is new (variables "
                              "and imports are gone)"));
        e2b_reply_header(r, "X-Jupyter-Agent-Memory-Kept",
                         memory_kept ? "true" : "false");
    }
    e2b_reply_json(r, status, info);
}

static void
s_connect(e2b_req_t *r, const e2b_config_t *cfg, ag_reg_entry_t *e)
{
    json_t *body = s_body(r);
    if (!body)
        return;
    int t = s_timeout(r, body, cfg, -2);
    json_decref(body);
    if (t == -1)
        return;
    e2b_sandbox_t *sb = e2b_sandbox_of(e);
    bool memory_kept = true;
    err_t err = {0};
    int rc = e2b_sandbox_resume(sb, &memory_kept, &err);
    if (rc < 0) {
        e2b_reply_error(r, 500, "the paused sandbox could not resume: %s",
                        err.text);
        return;
    }
    int64_t now = clock_mono_ms();
    int64_t want = now + (int64_t)(t >= 0 ? t : cfg->default_timeout_s) * 1000;
    /* Connecting extends a running sandbox's life, never shortens it; a
     * resumed one gets its new life. */
    if (rc == 0 || (t >= 0 && want > ag_reg_deadline(e)))
        ag_reg_set_deadline(e, want);
    s_reply_sandbox(r, rc == 0 ? 201 : 200, sb, rc == 0, memory_kept);
}

/* POST /sandboxes/{id}/pause {"memory": bool}: E2B's default (memory
 * absent) keeps the memory; only "memory": false is a files-only pause. */
static void
s_pause(e2b_req_t *r, ag_reg_entry_t *e)
{
    json_t *body = s_body(r);
    if (!body)
        return;
    bool memory = !json_is_false(json_object_get(body, "memory"));
    json_decref(body);
    err_t err = {0};
    int rc = e2b_sandbox_pause(e2b_sandbox_of(e), memory, &err);
    if (rc < 0)
        e2b_reply_error(r, err.code == ERR_USAGE ? 400 : 500, "pause: %s",
                        err.text);
    else if (rc == 1)
        e2b_reply_error(r, 409, "the sandbox is already paused");
    else {
        e2b_reply_header(r, "X-Jupyter-Agent-Memory-Kept",
                         memory ? "true" : "false");
        e2b_reply_empty(r, 204);
    }
}

/* PUT /sandboxes/ID/network (SandboxNetworkUpdateConfig): 204 once the
 * box's proxy judges its next connections by the new rules. */
static void
s_network(e2b_req_t *r, ag_reg_entry_t *e)
{
    json_t *body = s_body(r);
    if (!body)
        return;
    char *rules =
        s_net_rules(r, body, json_object_get(body, "allow_internet_access"));
    err_t err = {0};
    if (rules && e2b_sandbox_set_net_rules(e2b_sandbox_of(e), rules, &err) < 0)
        e2b_reply_error(r, err.code == ERR_USAGE ? 409 : 500, "network: %s",
                        err.text);
    else if (rules)
        e2b_reply_empty(r, 204);
    free(rules);
    json_decref(body);
}

/* "/sandboxes/ID/REST" -> ID (copied into id) and REST ("" or "timeout"). */
static bool
s_split(const char *path, char *id, size_t size, const char **rest)
{
    const char *p = path;
    const char *slash = strchr(p, '/');
    size_t n = slash ? (size_t)(slash - p) : strlen(p);
    if (n == 0 || n >= size)
        return false;
    memcpy(id, p, n);
    id[n] = '\0';
    *rest = slash ? slash + 1 : "";
    return true;
}

static void
s_not_yet(e2b_req_t *r, const char *what, const char *issue)
{
    e2b_reply_error(r, 501, "%s is not supported yet (%s); nothing was done",
                    what, issue);
}

void
e2b_api_handle(e2b_req_t *r, const e2b_config_t *cfg, const char *owner)
{
    const char *p = r->path;
    bool v2 = strncmp(p, "/v2/", 4) == 0;
    if (v2)
        p += 3;
    bool get = strcmp(r->method, "GET") == 0;
    bool post = strcmp(r->method, "POST") == 0;
    bool del = strcmp(r->method, "DELETE") == 0;
    bool put = strcmp(r->method, "PUT") == 0;
    if (strcmp(p, "/sandboxes") == 0) {
        if (post) {
            s_create(r, cfg, owner);
            return;
        }
        if (get) {
            s_list(r, cfg, owner);
            return;
        }
        {
            e2b_reply_error(r, 405, "use GET or POST on /sandboxes");
            return;
        }
    }
    if (strcmp(p, "/sandboxes/metrics") == 0) {
        s_not_yet(r, "sandbox metrics", "no metrics endpoint here");
        return;
    }
    if (strncmp(p, "/sandboxes/", 11) == 0) {
        char id[128];
        const char *rest;
        if (!s_split(p + 11, id, sizeof id, &rest)) {
            e2b_reply_error(r, 404, "no such sandbox path");
            return;
        }
        ag_reg_entry_t *e = s_find(r, cfg, owner, id);
        if (!e)
            return;
        if (!*rest && get)
            e2b_reply_json(r, 200, e2b_sandbox_info(e2b_sandbox_of(e), false));
        else if (!*rest && del) {
            ag_reg_end(e, "killed");
            e2b_reply_empty(r, 204);
        } else if (strcmp(rest, "timeout") == 0 && post)
            s_new_end(r, cfg, e, "timeout", true);
        else if (strcmp(rest, "connect") == 0 && post)
            s_connect(r, cfg, e);
        else if (strcmp(rest, "refreshes") == 0 && post)
            s_new_end(r, cfg, e, "duration", false);
        else if (strcmp(rest, "pause") == 0 && post)
            s_pause(r, e);
        else if (strcmp(rest, "resume") == 0 && post)
            s_connect(r, cfg, e); /* the old API's resume */
        else if (strcmp(rest, "fork") == 0)
            s_not_yet(r, "forking sandboxes",
                      "persistence, issue 31: a gVisor checkpoint restores "
                      "only into the box it came from");
        else if (strncmp(rest, "snapshots", 9) == 0)
            s_not_yet(r, "snapshots", "persistence, issue 31");
        else if (strcmp(rest, "network") == 0 && put)
            s_network(r, e);
        else if (strncmp(rest, "metrics", 7) == 0 ||
                 strncmp(rest, "logs", 4) == 0)
            s_not_yet(r, "sandbox metrics and logs", "not provided here");
        else
            e2b_reply_error(r, 404, "no such sandbox endpoint: %s %.100s",
                            r->method, r->path);
        ag_reg_unref(&e);
        return;
    }
    if (strncmp(p, "/snapshots", 10) == 0) {
        s_not_yet(r, "snapshots", "persistence, issue 31");
        return;
    }
    if (strncmp(p, "/templates", 10) == 0) {
        s_not_yet(r, "building templates",
                  "the templates here are code-interpreter-v1 and "
                  "base");
        return;
    }
    if (strncmp(p, "/volumes", 8) == 0) {
        s_not_yet(r, "volumes", "use the operator's --bind");
        return;
    }
    if (strcmp(p, "/health") == 0 && get) {
        e2b_reply_json(r, 200, json_pack("{s:s}", "status", "ok"));
        return;
    }
    e2b_reply_error(r, 404, "no such endpoint: %s %.100s", r->method, r->path);
}
