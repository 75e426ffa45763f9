#include "agent/e2b/e2b_server.h"

#include "agent/e2b/e2b_api.h"
#include "agent/e2b/e2b_envd.h"
#include "agent/e2b/e2b_http.h"
#include "agent/e2b/e2b_interp.h"
#include "agent/e2b/e2b_pool.h"
#include "agent/e2b/e2b_process.h"
#include "agent/e2b/e2b_sandbox.h"
#include "agent/session/ag_pause.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/netaddr.h"
#include "common/xalloc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define HEADER_DEADLINE_MS 10000 /* request line + headers */
#define IDLE_TIMEOUT_S 30        /* silence on a connection */
#define MAX_CONNECTIONS 1024
#define HEADER_MEMORY (64 * 1024) /* per connection: headers over this 431 */
#define THREAD_STACK (512 * 1024)

typedef struct s_srv s_srv_t;

/* One listening socket and the door it is. */
typedef struct s_listener {
    s_srv_t *srv;
    e2b_port_t port; /* E2B_PORT_API: headers pick the door */
    bool debug;      /* a debug port: the one debug sandbox, no tokens */
    struct MHD_Daemon *d;
} s_listener_t;

/* A connection, for the header deadline. */
typedef struct s_conn {
    int fd;
    int64_t since_ms; /* when the current request began */
    bool in_headers;  /* its headers are not complete yet */
    bool cut;         /* shut down for missing the deadline */
    struct s_conn *next;
} s_conn_t;

struct s_srv {
    const e2b_server_opts_t *o;
    e2b_config_t cfg;
    ag_registry_t *registry;
    bool have_key;
    unsigned char key_hash[crypto_hash_sha256_BYTES];
    pthread_mutex_t lock; /* guards conns and debug */
    s_conn_t *conns;
    ag_reg_entry_t *debug; /* the debug sandbox, or NULL */
    s_listener_t listeners[3];
    int nlisteners;
};

/* One request being received. */
typedef struct s_req {
    buf_t body; /* capped at `cap` */
    size_t cap;
    size_t seen; /* body bytes offered */
    bool too_big;
    bool refused;          /* answered at header time */
    e2b_port_t port;       /* the door */
    ag_reg_entry_t *entry; /* the sandbox, referenced, or NULL */
    e2b_upload_t *upload;  /* POST /files: the body goes there */
    e2b_pinput_t *sinput;  /* StreamInput: the body goes there */
    char owner[17];        /* the API key's label (control plane) */
} s_req_t;

/* ---- connections and the header deadline ------------------------------ */

static void
s_notify_connection(void *cls, struct MHD_Connection *c, void **socket_ctx,
                    enum MHD_ConnectionNotificationCode code)
{
    s_srv_t *srv = ((s_listener_t *)cls)->srv;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        s_conn_t *k = xcalloc(1, sizeof *k);
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        k->fd = ci ? ci->connect_fd : -1;
        /* Answers and stream lines go out at once (no Nagle wait on a
         * small write behind an unacknowledged one). */
        int one = 1;
        if (k->fd >= 0)
            setsockopt(k->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        k->since_ms = clock_mono_ms();
        k->in_headers = true;
        pthread_mutex_lock(&srv->lock);
        k->next = srv->conns;
        srv->conns = k;
        pthread_mutex_unlock(&srv->lock);
        *socket_ctx = k;
        return;
    }
    s_conn_t *k = *socket_ctx;
    if (!k)
        return;
    pthread_mutex_lock(&srv->lock);
    for (s_conn_t **pp = &srv->conns; *pp; pp = &(*pp)->next)
        if (*pp == k) {
            *pp = k->next;
            break;
        }
    pthread_mutex_unlock(&srv->lock);
    free(k);
    *socket_ctx = NULL;
}

static s_conn_t *
s_conn_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static void
s_conn_phase(s_srv_t *srv, struct MHD_Connection *c, bool in_headers)
{
    s_conn_t *k = s_conn_of(c);
    if (!k)
        return;
    pthread_mutex_lock(&srv->lock);
    k->in_headers = in_headers;
    k->since_ms = clock_mono_ms();
    pthread_mutex_unlock(&srv->lock);
}

/* Cut connections whose headers are late (a slowloris holds a thread
 * each, so they must not last). */
static int
s_cut_late(s_srv_t *srv)
{
    int64_t now = clock_mono_ms();
    int n = 0;
    pthread_mutex_lock(&srv->lock);
    for (s_conn_t *k = srv->conns; k; k = k->next)
        if (k->in_headers && !k->cut && k->fd >= 0 &&
            now - k->since_ms > HEADER_DEADLINE_MS) {
            shutdown(k->fd, SHUT_RDWR);
            k->cut = true;
            n++;
        }
    pthread_mutex_unlock(&srv->lock);
    if (n)
        log_info("e2b: closed %d connections that sent no complete request "
                 "headers within %d s",
                 n, HEADER_DEADLINE_MS / 1000);
    return n;
}

/* ---- authentication ---------------------------------------------------- */

static bool
s_key_form_ok(const char *k)
{
    if (!k || strncmp(k, "e2b_", 4) != 0 || !k[4])
        return false;
    for (const char *p = k + 4; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return false;
    return strlen(k) <= 512;
}

/* Check X-API-KEY; fills owner (a label of the key, never the key). */
static bool
s_api_key_ok(s_srv_t *srv, struct MHD_Connection *c, char owner[17])
{
    const char *got =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-API-KEY");
    if (!got)
        return false;
    unsigned char h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(h, (const unsigned char *)got, strlen(got));
    sodium_bin2hex(owner, 17, h, 8);
    if (srv->have_key) /* constant time over the digests' fixed size */
        return sodium_memcmp(h, srv->key_hash, sizeof h) == 0;
    return s_key_form_ok(got);
}

/* ---- the debug sandbox -------------------------------------------------- */

static ag_reg_entry_t *
s_debug_sandbox(s_srv_t *srv, err_t *err)
{
    pthread_mutex_lock(&srv->lock);
    ag_reg_entry_t *e = srv->debug;
    if (e && ag_reg_state(e) == AG_REG_ENDED) {
        ag_reg_unref(&srv->debug);
        e = NULL;
    }
    if (!e) {
        e2b_create_t c = {.template_id = "code-interpreter-v1",
                          .kernel_name = "python3",
                          .timeout_s = srv->cfg.max_timeout_s,
                          .owner = "debug"};
        /* Under the lock: two first requests make one sandbox. */
        srv->debug = e2b_sandbox_create(&srv->cfg, &c, err);
        e = srv->debug;
    }
    if (e)
        ag_reg_ref(e);
    pthread_mutex_unlock(&srv->lock);
    return e;
}

/* ---- the handler -------------------------------------------------------- */

static enum MHD_Result s_refuse(s_req_t *req, struct MHD_Connection *c,
                                const char *method, const char *url,
                                unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

static enum MHD_Result
s_refuse(s_req_t *req, struct MHD_Connection *c, const char *method,
         const char *url, unsigned status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = xvasprintf(fmt, ap);
    va_end(ap);
    e2b_req_t r = {.conn = c, .method = method, .path = url};
    e2b_reply_error(&r, status, "%s", text);
    free(text);
    req->refused = true;
    return r.ret;
}

/* The body cap of a request, from its door and path. */
#define S_STREAM_INPUT "/process.Process/StreamInput"

static size_t
s_body_cap(s_srv_t *srv, e2b_port_t port, const char *url)
{
    if (port == E2B_PORT_ENVD && strcmp(url, "/files") == 0)
        return (size_t)srv->cfg.session->policy.workspace_bytes + 65536;
    if (port == E2B_PORT_ENVD && strcmp(url, S_STREAM_INPUT) == 0)
        return SIZE_MAX; /* a stdin stream; each message is bounded */
    return E2B_INTERP_MAX_BODY;
}

/* Headers are in: pick the door, check credentials and sizes, before any
 * body byte is read. MHD_YES to read on; refusals answer here. */
static enum MHD_Result
s_begin(s_listener_t *l, s_req_t *req, struct MHD_Connection *c,
        const char *url, const char *method)
{
    s_srv_t *srv = l->srv;
    const char *sid =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, "E2b-Sandbox-Id");
    const char *sport =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, "E2b-Sandbox-Port");
    req->port = l->port;
    if (!l->debug && sid) {
        if (sport && strcmp(sport, "49983") == 0)
            req->port = E2B_PORT_ENVD;
        else if (sport && strcmp(sport, "49999") == 0)
            req->port = E2B_PORT_INTERP;
        else
            return s_refuse(req, c, method, url, 400,
                            "E2b-Sandbox-Port %.16s: this server has envd "
                            "(49983) and the code interpreter (49999)",
                            sport ? sport : "(missing)");
    }
    if (req->port == E2B_PORT_API) {
        if (!s_api_key_ok(srv, c, req->owner))
            return s_refuse(req, c, method, url, 401,
                            "Invalid API key: send X-API-KEY with the key "
                            "in the server's --api-key-file (the form "
                            "e2b_ and hex digits)");
    } else if (l->debug) {
        err_t err = {0};
        req->entry = s_debug_sandbox(srv, &err);
        if (!req->entry)
            return s_refuse(req, c, method, url, 503,
                            "the debug sandbox could not start: %s", err.text);
    } else {
        /* 502, as E2B's proxy answers for a sandbox that is not there:
         * the SDKs read it as "not running" (isRunning, health checks). */
        req->entry = ag_registry_get(srv->registry, sid);
        if (!req->entry)
            return s_refuse(req, c, method, url, 502,
                            "sandbox '%.64s' not found (it was killed, timed "
                            "out or never existed)",
                            sid);
        e2b_sandbox_t *sb = e2b_sandbox_of(req->entry);
        const char *tok =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Access-Token");
        const char *ttok = MHD_lookup_connection_value(
            c, MHD_HEADER_KIND, "E2B-Traffic-Access-Token");
        err_t werr = {0}; /* autoResume: the request resumes it */
        if (e2b_sandbox_paused(sb) && e2b_sandbox_wake(sb, tok, ttok, &werr))
            return s_refuse(req, c, method, url,
                            werr.code == ERR_VERIFY ? 401 : 502, "%s",
                            werr.text);
        if (!e2b_sandbox_token_ok(sb, tok, ttok))
            return s_refuse(req, c, method, url, 401,
                            "this sandbox needs its access token: send "
                            "X-Access-Token (the envdAccessToken its create "
                            "answered)");
    }
    req->cap = s_body_cap(srv, req->port, url);
    const char *len =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
    if (len && strtoull(len, NULL, 10) > req->cap)
        return s_refuse(req, c, method, url, 413,
                        "a body of %.20s bytes is over this endpoint's "
                        "limit of %zu bytes",
                        len, req->cap);
    bool upload = req->port == E2B_PORT_ENVD && strcmp(url, "/files") == 0 &&
                  strcmp(method, "POST") == 0;
    bool sinput = req->port == E2B_PORT_ENVD &&
                  strcmp(url, S_STREAM_INPUT) == 0 &&
                  strcmp(method, "POST") == 0;
    buf_init(&req->body, upload || sinput ? 1 : req->cap);
    e2b_req_t r = {.conn = c,
                   .method = method,
                   .path = url,
                   .port = req->port,
                   .body = ""};
    if (upload)
        req->upload = e2b_envd_upload_begin(&r, e2b_sandbox_of(req->entry));
    if (sinput)
        req->sinput = e2b_process_input_begin(&r, e2b_sandbox_of(req->entry));
    return MHD_YES;
}

static void
s_dispatch(s_listener_t *l, s_req_t *req, e2b_req_t *r)
{
    s_srv_t *srv = l->srv;
    if (req->port == E2B_PORT_API) {
        e2b_api_handle(r, &srv->cfg, req->owner);
        return;
    }
    e2b_sandbox_t *sb = e2b_sandbox_of(req->entry);
    if (req->port == E2B_PORT_INTERP) {
        e2b_interp_handle(r, sb);
        return;
    }
    static const char proc[] = "/process.Process/";
    if (strncmp(r->path, proc, sizeof proc - 1) == 0) {
        if (strcmp(r->method, "POST") != 0) {
            e2b_reply_error(r, 405, "Connect-RPC calls are POST");
            return;
        }
        {
            e2b_process_handle(r, sb, r->path + sizeof proc - 1);
            return;
        }
    }
    e2b_envd_handle(r, sb);
}

static enum MHD_Result
s_handler(void *cls, struct MHD_Connection *c, const char *url,
          const char *method, const char *version, const char *upload,
          size_t *upload_size, void **con_cls)
{
    (void)version;
    s_listener_t *l = cls;
    s_req_t *req = *con_cls;
    if (!req) {
        s_conn_phase(l->srv, c, false);
        req = xcalloc(1, sizeof *req);
        *con_cls = req;
        return s_begin(l, req, c, url, method);
    }
    if (req->refused) { /* answered; discard what still comes */
        *upload_size = 0;
        return MHD_YES;
    }
    if (*upload_size && req->upload) {
        req->seen += *upload_size;
        e2b_envd_upload_data(req->upload, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (*upload_size && req->sinput) {
        req->seen += *upload_size;
        e2b_process_input_data(req->sinput, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (*upload_size) {
        req->seen += *upload_size;
        if (!req->too_big && buf_append(&req->body, upload, *upload_size) < 0) {
            req->too_big = true;
            buf_release(&req->body);
            buf_init(&req->body, 1);
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (req->too_big)
        return s_refuse(req, c, method, url, 413,
                        "a body of more than %zu bytes is over this "
                        "endpoint's limit",
                        req->cap);
    e2b_req_t r = {.conn = c,
                   .method = method,
                   .path = url,
                   .port = req->port,
                   .body = req->body.data ? req->body.data : "",
                   .body_len = req->body.len};
    if (req->upload)
        e2b_envd_upload_end(&req->upload, &r);
    else if (req->sinput)
        e2b_process_input_end(&req->sinput, &r);
    else
        s_dispatch(l, req, &r);
    if (!r.answered)
        e2b_reply_error(&r, 500, "the server did not answer %s %s", method,
                        url);
    return r.ret;
}

static void
s_completed(void *cls, struct MHD_Connection *c, void **con_cls,
            enum MHD_RequestTerminationCode why)
{
    (void)why;
    s_listener_t *l = cls;
    s_conn_phase(l->srv, c, true); /* the next request's headers */
    s_req_t *req = *con_cls;
    if (!req)
        return;
    buf_release(&req->body);
    e2b_envd_upload_free(&req->upload);
    e2b_process_input_free(&req->sinput);
    ag_reg_unref(&req->entry);
    free(req);
    *con_cls = NULL;
}

static void
s_mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    line[strcspn(line, "\n")] = '\0';
    log_info("e2b: http: %s", line);
}

/* ---- setup -------------------------------------------------------------- */

static int
s_read_key(s_srv_t *srv, const char *path, err_t *err)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return err_errno(err, ERR_USAGE, "--api-key-file %s", path);
    char line[600];
    char *ok = fgets(line, sizeof line, f);
    fclose(f);
    if (ok)
        line[strcspn(line, "\r\n")] = '\0';
    int rc = 0;
    if (!ok || !s_key_form_ok(line) || strlen(line) < 4 + 32)
        rc = err_set(err, ERR_USAGE,
                     "--api-key-file %s: its first line must be a key of the "
                     "form the E2B SDKs accept, e2b_ and at least 32 hex "
                     "digits (e.g. \"e2b_$(openssl rand -hex 20)\")",
                     path);
    else {
        crypto_hash_sha256(srv->key_hash, (const unsigned char *)line,
                           strlen(line));
        srv->have_key = true;
    }
    sodium_memzero(line, sizeof line);
    return rc;
}

static int
s_listen(s_srv_t *srv, const struct sockaddr_in *sa, e2b_port_t port,
         bool debug, err_t *err)
{
    s_listener_t *l = &srv->listeners[srv->nlisteners];
    *l = (s_listener_t){.srv = srv, .port = port, .debug = debug};
    l->d = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
            MHD_USE_ERROR_LOG,
        0, NULL, NULL, s_handler, l, MHD_OPTION_EXTERNAL_LOGGER, s_mhd_log,
        NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)sa,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)MAX_CONNECTIONS,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)IDLE_TIMEOUT_S,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HEADER_MEMORY,
        MHD_OPTION_THREAD_STACK_SIZE, (size_t)THREAD_STACK,
        MHD_OPTION_NOTIFY_COMPLETED, s_completed, l,
        MHD_OPTION_NOTIFY_CONNECTION, s_notify_connection, l, MHD_OPTION_END);
    if (!l->d) {
        char a[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &sa->sin_addr, a, sizeof a);
        return err_errno(err, ERR_IO, "cannot listen on %s:%u", a,
                         ntohs(sa->sin_port));
    }
    srv->nlisteners++;
    return 0;
}

int
e2b_server_run(const e2b_server_opts_t *o, volatile sig_atomic_t *stop,
               err_t *err)
{
    if (sodium_init() < 0)
        return err_set(err, ERR_IO, "libsodium could not be initialised");
    struct sockaddr_in sa;
    const char *spec = o->listen ? o->listen : "127.0.0.1:3000";
    if (netaddr_parse_ipv4(spec, "--listen", &sa, err) < 0)
        return -1;
    s_srv_t srv = {.o = o, .lock = PTHREAD_MUTEX_INITIALIZER};
    bool loopback = (ntohl(sa.sin_addr.s_addr) >> 24) == 127;
    if (o->api_key_file && s_read_key(&srv, o->api_key_file, err) < 0)
        return -1;
    if (!loopback && !srv.have_key)
        return err_set(err, ERR_USAGE,
                       "--listen %s: listening beyond loopback needs "
                       "--api-key-file (the key clients send as "
                       "E2B_API_KEY)",
                       spec);
    if (o->debug_ports && !loopback)
        return err_set(err, ERR_USAGE,
                       "--debug-ports serves a sandbox without tokens: only "
                       "with a loopback --listen");
    e2b_pool_t *pool = NULL;
    if (o->pool && !(pool = e2b_pool_start(o->session, o->pool, err)))
        return -1;
    srv.registry =
        ag_registry_new(o->max_sandboxes > 0 ? o->max_sandboxes : 16);
    srv.cfg = (e2b_config_t){
        .session = o->session,
        .registry = srv.registry,
        .default_timeout_s =
            o->default_timeout_s > 0 ? o->default_timeout_s : 300,
        .max_timeout_s = o->max_timeout_s > 0 ? o->max_timeout_s : 86400};
    /* Paused sandboxes' files: without a state directory, pausing is
     * refused (with the reason) and everything else works. */
    err_t perr = {0};
    char *pause_dir = ag_pause_dir("e2b", &perr);
    if (!pause_dir)
        log_warn("e2b: pausing sandboxes is off: %s", perr.text);
    srv.cfg.pause_dir = pause_dir;
    e2b_pause_use_t use = {.bytes = 0};
    pthread_mutex_init(&use.lock, NULL);
    srv.cfg.pause_use = &use;
    srv.cfg.pause_disk_bytes = o->pause_disk_bytes;
    int rc = s_listen(&srv, &sa, E2B_PORT_API, false, err);
    if (rc == 0 && o->debug_ports) {
        struct sockaddr_in d = sa;
        d.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        d.sin_port = htons(49999);
        rc = s_listen(&srv, &d, E2B_PORT_INTERP, true, err);
        d.sin_port = htons(49983);
        if (rc == 0)
            rc = s_listen(&srv, &d, E2B_PORT_ENVD, true, err);
    }
    if (rc == 0) {
        const union MHD_DaemonInfo *info =
            MHD_get_daemon_info(srv.listeners[0].d, MHD_DAEMON_INFO_BIND_PORT);
        char addr[INET_ADDRSTRLEN], url[96];
        inet_ntop(AF_INET, &sa.sin_addr, addr, sizeof addr);
        snprintf(url, sizeof url, "http://%s:%u", addr,
                 info ? info->port : ntohs(sa.sin_port));
        if (o->on_listening)
            o->on_listening(url, o->arg);
        while (!(stop && *stop)) {
            usleep(250 * 1000);
            ag_registry_expire(srv.registry);
            s_cut_late(&srv);
        }
        log_info("e2b: stopping: ending %d sandboxes",
                 ag_registry_count(srv.registry));
    }
    /* Kill every sandbox before the daemons go, so that streams end. */
    pthread_mutex_lock(&srv.lock);
    ag_reg_unref(&srv.debug);
    pthread_mutex_unlock(&srv.lock);
    size_t n;
    ag_reg_entry_t **v = ag_registry_list(srv.registry, &n);
    for (size_t i = 0; i < n; i++) {
        ag_reg_end(v[i], "shutdown");
        ag_reg_unref(&v[i]);
    }
    free(v);
    for (int i = 0; i < srv.nlisteners; i++)
        MHD_stop_daemon(srv.listeners[i].d);
    ag_registry_destroy(&srv.registry, 30000);
    e2b_pool_stop(&pool);
    while (srv.conns) {
        s_conn_t *k = srv.conns;
        srv.conns = k->next;
        free(k);
    }
    sodium_memzero(srv.key_hash, sizeof srv.key_hash);
    free(pause_dir);
    pthread_mutex_destroy(&use.lock);
    return rc;
}
