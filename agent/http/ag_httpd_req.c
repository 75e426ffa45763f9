#include "agent/http/ag_httpd_impl.h"

#include "common/log.h"
#include "common/xalloc.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- key/value lists --------------------------------------------------- */

void
ag_httpd_kvs_add(ag_httpd_kvs_t *l, const char *name, const char *value)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        l->v = xrealloc(l->v, l->cap * sizeof *l->v);
    }
    l->v[l->n++] = (ag_httpd_kv_t){xstrdup(name), xstrdup(value ? value : "")};
}

void
ag_httpd_kvs_free(ag_httpd_kvs_t *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].name);
        free(l->v[i].value);
    }
    free(l->v);
    *l = (ag_httpd_kvs_t){0};
}

/* ---- answers ------------------------------------------------------------- */

void
ag_httpd_add_header(ag_httpd_req_t *req, const char *name, const char *value)
{
    ag_httpd_kvs_add(&req->rheaders, name, value);
}

void
ag_httpd_reply(ag_httpd_req_t *req, unsigned status, const char *type,
               const char *body, size_t len)
{
    if (req->answered) {
        log_warn("http: a second answer to %s %s ignored", req->method,
                 req->path);
        return;
    }
    req->answered = true;
    req->status = status;
    req->type = type ? xstrdup(type) : NULL;
    req->rbody = xmalloc(len + 1);
    if (len)
        memcpy(req->rbody, body, len);
    req->rbody[len] = '\0';
    req->rlen = len;
    if (req->state != S_WORKING)
        return; /* on the event loop: queued when the handler returns */
    /* Hand back: the connection's resumption is our last touch of req. */
    struct MHD_Connection *c = req->c;
    if (req->job)
        req->job->answered = true;
    req->job = NULL;
    req->state = S_BACK;
    MHD_resume_connection(c);
}

/* ---- the request's accessors ------------------------------------------- */

const char *
ag_httpd_method(const ag_httpd_req_t *req)
{
    return req->method;
}

const char *
ag_httpd_path(const ag_httpd_req_t *req)
{
    return req->path;
}

const char *
ag_httpd_header(const ag_httpd_req_t *req, const char *name)
{
    for (size_t i = 0; i < req->headers.n; i++)
        if (strcasecmp(req->headers.v[i].name, name) == 0)
            return req->headers.v[i].value;
    return NULL;
}

const char *
ag_httpd_query(const ag_httpd_req_t *req, const char *name)
{
    for (size_t i = 0; i < req->args.n; i++)
        if (strcmp(req->args.v[i].name, name) == 0)
            return req->args.v[i].value;
    return NULL;
}

const char *
ag_httpd_body(const ag_httpd_req_t *req, size_t *len)
{
    if (len)
        *len = req->body.len;
    return req->body.data ? req->body.data : "";
}

const char *
ag_httpd_peer(const ag_httpd_req_t *req)
{
    return req->peer;
}
