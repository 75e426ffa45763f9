/* kb_gateway: the REST half (see kb_gateway.h); the WebSocket transport is
 * kb_gateway_ws.c. */
#include "kb_gateway.h"

#include "kb_gateway_impl.h"

#include "common/buf.h"
#include "common/escape.h"
#include "common/jsonlim.h"
#include "common/secret.h"
#include "common/strv.h"
#include "common/xalloc.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_REQUEST_MS 30000
#define DEFAULT_RECONNECT_MS 10000
/* A REST answer is a small JSON document; a server sending more is not
 * listened to. */
#define MAX_BODY ((size_t)4 << 20)
/* How much of a server's own error text we repeat. */
#define MAX_REASON 300

void
kb_gateway_release_parts(kb_gateway_parts_t *p)
{
    free(p->host);
    free(p->path);
    memset(p, 0, sizeof *p);
}

/* Split `url` into its parts with libcurl's URL parser. */
static int
s_parse_url(const char *url, kb_gateway_parts_t *p, err_t *err)
{
    CURLU *u = curl_url();
    char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL;
    int rc = -1;
    memset(p, 0, sizeof *p);
    if (!u || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK) {
        err_set(err, ERR_USAGE,
                "--gateway: cannot parse the URL; give one like "
                "http://127.0.0.1:8888 or https://gateway.example.org/base");
        goto out;
    }
    if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0) {
        err_set(err, ERR_USAGE,
                "--gateway: the URL must start with http:// or https://");
        goto out;
    }
    p->tls = scheme[4] == 's';
    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT);
    curl_url_get(u, CURLUPART_PATH, &path, 0);
    p->port = port ? atoi(port) : (p->tls ? 443 : 80);
    p->host = xstrdup(host);
    /* The base path without its trailing slashes ("" for the root). */
    size_t n = path ? strlen(path) : 0;
    while (n && path[n - 1] == '/')
        n--;
    p->path = xstrndup(path ? path : "", n);
    rc = 0;
out:
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_free(path);
    curl_url_cleanup(u);
    return rc;
}

kb_gateway_t *
kb_gateway_new(const kb_gateway_opts_t *opts, err_t *err)
{
    if (!opts || !opts->url || !*opts->url) {
        err_set(err, ERR_USAGE, "--gateway: no URL given");
        return NULL;
    }
    kb_gateway_t *g = xcalloc(1, sizeof *g);
    if (s_parse_url(opts->url, &g->parts, err)) {
        free(g);
        return NULL;
    }
    bool v6 = strchr(g->parts.host, ':') != NULL;
    g->shown = xasprintf("%s://%s%s%s:%d%s", g->parts.tls ? "https" : "http",
                         v6 ? "[" : "", g->parts.host, v6 ? "]" : "",
                         g->parts.port, g->parts.path);
    if (opts->token && *opts->token)
        g->auth = xasprintf("token %s", opts->token);
    g->ca_file = opts->ca_file ? xstrdup(opts->ca_file) : NULL;
    size_t nenv = 0;
    for (char *const *e = opts->env; e && *e; e++)
        strv_push(&g->env, &nenv, xstrdup(*e));
    g->request_ms = opts->request_ms ? opts->request_ms : DEFAULT_REQUEST_MS;
    g->reconnect_ms =
        opts->reconnect_ms ? opts->reconnect_ms : DEFAULT_RECONNECT_MS;
    return g;
}

void
kb_gateway_destroy(kb_gateway_t **pg)
{
    if (!pg || !*pg)
        return;
    kb_gateway_t *g = *pg;
    kb_gateway_release_parts(&g->parts);
    free(g->shown);
    secret_free(g->auth); /* a secret: do not leave it in freed memory */
    free(g->ca_file);
    strv_free(g->env);
    free(g);
    *pg = NULL;
}

const char *
kb_gateway_url(const kb_gateway_t *g)
{
    return g->shown;
}

static size_t
s_on_body(char *data, size_t size, size_t n, void *arg)
{
    buf_t *b = arg;
    if (buf_append(b, data, size * n))
        return 0; /* past the cap: curl fails with CURLE_WRITE_ERROR */
    return size * n;
}

/* The server's reason from an error body ({"message": ..., "reason": ...}
 * as jupyter_server and the gateways send), escaped and cut, into out. */
static void
s_reason(const buf_t *body, char *out, size_t size)
{
    out[0] = '\0';
    jsonlim_t jl = {16, 0};
    json_t *j =
        body->len ? jsonlim_loadb(body->data, body->len, 0, &jl, NULL) : NULL;
    const char *text = json_string_value(json_object_get(j, "message"));
    if (!text || !*text)
        text = json_string_value(json_object_get(j, "reason"));
    if (text && *text) {
        char cut[MAX_REASON + 1];
        snprintf(cut, sizeof cut, "%s", text);
        char *shown = esc_dup(cut, ESC_NAME);
        snprintf(out, size, ": %s", shown);
        free(shown);
    }
    json_decref(j);
}

int
kb_gateway_request(kb_gateway_t *g, const char *method, const char *path,
                   json_t *body, long *status, json_t **reply, err_t *err)
{
    CURL *h = curl_easy_init();
    if (!h)
        return err_set(err, ERR_KERNEL, "cannot set up an HTTP request");
    char *url = xasprintf("%s%s", g->shown, path);
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    char *auth = g->auth ? xasprintf("Authorization: %s", g->auth) : NULL;
    struct curl_slist *hdrs = NULL;
    buf_t resp;
    buf_init(&resp, MAX_BODY);
    int rc = -1;
    hdrs = curl_slist_append(hdrs, "Accept: application/json");
    if (text)
        hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
    if (auth)
        hdrs = curl_slist_append(hdrs, auth);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    if (text)
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, text);
    else if (strcmp(method, "POST") == 0)
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L); /* the token stays */
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)g->request_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
    if (g->ca_file)
        curl_easy_setopt(h, CURLOPT_CAINFO, g->ca_file);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, s_on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &resp);
    char cerr[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
    CURLcode res = curl_easy_perform(h);
    if (res != CURLE_OK) {
        /* curl's words can quote the server: escaped before printing */
        char *what = esc_dup(*cerr ? cerr : curl_easy_strerror(res), ESC_NAME);
        bool tls = res == CURLE_PEER_FAILED_VERIFICATION ||
                   res == CURLE_SSL_CACERT_BADFILE ||
                   res == CURLE_SSL_CONNECT_ERROR;
        err_set(err, ERR_KERNEL, "cannot reach the Jupyter server at %s: %s%s",
                g->shown,
                res == CURLE_WRITE_ERROR ? "its answer was too large" : what,
                tls ? " (for a private CA, name its certificate with "
                      "--gateway-ca FILE)"
                : res == CURLE_COULDNT_CONNECT
                    ? " (is it running? check --gateway)"
                    : "");
        free(what);
        goto out;
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    char why[MAX_REASON + 16];
    if (*status == 401 || (*status == 403 && strcmp(method, "POST") != 0)) {
        s_reason(&resp, why, sizeof why);
        err_set(err, ERR_KERNEL,
                "the Jupyter server at %s refused our credentials (HTTP "
                "%ld)%s; check the token (--gateway-token-file or "
                "JUPYTER_GATEWAY_AUTH_TOKEN)",
                g->shown, *status, why);
        goto out;
    }
    if (*status >= 300) {
        s_reason(&resp, why, sizeof why);
        snprintf(g->last_reason, sizeof g->last_reason, "%s", why);
        rc = 0; /* the caller words it */
        goto out;
    }
    if (reply) {
        *reply =
            resp.len ? jsonlim_loadb(resp.data, resp.len, 0, NULL, NULL) : NULL;
        if (!*reply) {
            err_set(err, ERR_KERNEL,
                    "the Jupyter server at %s answered %s %s with something "
                    "that is not JSON (is it a Jupyter server?)",
                    g->shown, method, path);
            goto out;
        }
    }
    rc = 0;
out:
    for (struct curl_slist *l = hdrs; l; l = l->next)
        secret_wipe(l->data); /* curl's copy of the Authorization line */
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    secret_free(auth);
    free(text);
    free(url);
    buf_release(&resp);
    return rc;
}

json_t *
kb_gateway_kernelspecs(kb_gateway_t *g, err_t *err)
{
    long status = 0;
    json_t *reply = NULL;
    if (kb_gateway_request(g, "GET", "/api/kernelspecs", NULL, &status, &reply,
                           err))
        return NULL;
    if (status != 200 || !json_is_object(reply)) {
        json_decref(reply);
        err_set(err, ERR_KERNEL,
                "the Jupyter server at %s did not list its kernels (HTTP "
                "%ld)%s; is the URL a Jupyter Server or Gateway?",
                g->shown, status, g->last_reason);
        return NULL;
    }
    return reply;
}

/* A kernel id is a UUID; anything else from a server is refused before it
 * becomes part of a URL. */
static bool
s_valid_id(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((id[i] >= '0' && id[i] <= '9') ||
              (id[i] >= 'a' && id[i] <= 'z') ||
              (id[i] >= 'A' && id[i] <= 'Z') || id[i] == '-'))
            return false;
    return true;
}

char *
kb_gateway_start_kernel(kb_gateway_t *g, const char *name, err_t *err)
{
    json_t *specs = kb_gateway_kernelspecs(g, err);
    if (!specs)
        return NULL;
    const char *want =
        name ? name : json_string_value(json_object_get(specs, "default"));
    json_t *known = json_object_get(specs, "kernelspecs");
    if (!want || !json_object_get(known, want)) {
        buf_t names;
        buf_init(&names, 1024);
        const char *key;
        json_t *v;
        json_object_foreach(known, key, v)
        {
            char *shown = esc_dup(key, ESC_NAME);
            buf_printf(&names, "%s%s", names.len ? ", " : "", shown);
            free(shown);
        }
        char *shown = esc_dup(want ? want : "(none)", ESC_NAME);
        err_set(err, ERR_USAGE,
                "--kernel: the Jupyter server at %s has no kernelspec '%s'; "
                "it offers: %s",
                g->shown, shown, names.len ? buf_cstr(&names) : "none");
        free(shown);
        buf_release(&names);
        json_decref(specs);
        return NULL;
    }
    json_t *env = json_object();
    for (char **e = g->env; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq)
            continue;
        char *key = xstrndup(*e, (size_t)(eq - *e));
        json_object_set_new(env, key, json_string(eq + 1));
        free(key);
    }
    json_t *body = json_pack("{s:s, s:o}", "name", want, "env", env);
    char *kname = xstrdup(want);
    json_decref(specs);
    long status = 0;
    json_t *reply = NULL;
    char *id = NULL;
    int rc = kb_gateway_request(g, "POST", "/api/kernels", body, &status,
                                &reply, err);
    json_decref(body);
    if (rc)
        goto out;
    if (status == 403) {
        err_set(err, ERR_KERNEL,
                "the Jupyter server at %s refused to start kernel '%s' (HTTP "
                "403)%s; a gateway does this when a limit on kernels is "
                "reached: stop other sessions or ask its operator",
                g->shown, kname, g->last_reason);
        goto out;
    }
    const char *got = json_string_value(json_object_get(reply, "id"));
    if ((status != 200 && status != 201) || !got) {
        err_set(err, ERR_KERNEL,
                "the Jupyter server at %s could not start kernel '%s' (HTTP "
                "%ld)%s",
                g->shown, kname, status, g->last_reason);
        goto out;
    }
    if (!s_valid_id(got)) {
        err_set(err, ERR_KERNEL,
                "the Jupyter server at %s answered with a malformed kernel "
                "id",
                g->shown);
        goto out;
    }
    id = xstrdup(got);
out:
    json_decref(reply);
    free(kname);
    return id;
}

/* POST/DELETE/GET on /api/kernels/{id}[suffix]; the status into *status. */
static int
s_kernel_call(kb_gateway_t *g, const char *method, const char *id,
              const char *suffix, long *status, json_t **reply, err_t *err)
{
    if (!s_valid_id(id))
        return err_set(err, ERR_KERNEL, "malformed kernel id");
    char *path = xasprintf("/api/kernels/%s%s", id, suffix);
    int rc = kb_gateway_request(g, method, path, NULL, status, reply, err);
    free(path);
    if (rc == 0 && *status == 404)
        rc = err_set(err, ERR_KERNEL,
                     "kernel %s is gone from the Jupyter server at %s "
                     "(deleted by someone else, or culled as idle)",
                     id, g->shown);
    return rc;
}

int
kb_gateway_kernel_state(kb_gateway_t *g, const char *id, char state[64],
                        err_t *err)
{
    long status = 0;
    json_t *reply = NULL;
    if (s_kernel_call(g, "GET", id, "", &status, &reply, err))
        return -1;
    if (status != 200) {
        json_decref(reply);
        return err_set(err, ERR_KERNEL,
                       "the Jupyter server at %s answered HTTP %ld for "
                       "kernel %s%s",
                       g->shown, status, id, g->last_reason);
    }
    const char *s =
        json_string_value(json_object_get(reply, "execution_state"));
    snprintf(state, 64, "%s", s ? s : "unknown");
    json_decref(reply);
    return 0;
}

static int
s_action(kb_gateway_t *g, const char *id, const char *action, err_t *err)
{
    long status = 0;
    char *suffix = xasprintf("/%s", action);
    int rc = s_kernel_call(g, "POST", id, suffix, &status, NULL, err);
    free(suffix);
    if (rc == 0 && status >= 300)
        rc = err_set(err, ERR_KERNEL,
                     "the Jupyter server at %s could not %s kernel %s (HTTP "
                     "%ld)%s",
                     g->shown, action, id, status, g->last_reason);
    return rc;
}

int
kb_gateway_interrupt(kb_gateway_t *g, const char *id, err_t *err)
{
    return s_action(g, id, "interrupt", err);
}

int
kb_gateway_restart(kb_gateway_t *g, const char *id, err_t *err)
{
    return s_action(g, id, "restart", err);
}

int
kb_gateway_delete(kb_gateway_t *g, const char *id, err_t *err)
{
    long status = 0;
    err_t e;
    if (s_kernel_call(g, "DELETE", id, "", &status, NULL, &e)) {
        if (status == 404)
            return 0;
        if (err)
            *err = e;
        return -1;
    }
    if (status >= 300)
        return err_set(err, ERR_KERNEL,
                       "the Jupyter server at %s could not delete kernel %s "
                       "(HTTP %ld)%s",
                       g->shown, id, status, g->last_reason);
    return 0;
}
