/*
 * kb_conn: Jupyter connection files. See kb_conn.h for the invariants.
 */
#include "kernel-bridge/kb_conn.h"

#include "common/fileio.h"
#include "common/jget.h"
#include "common/xalloc.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* Field names in kb_channel_t order. */
static const char *const s_port_fields[KB_NCHANNELS] = {
    "shell_port", "iopub_port", "stdin_port", "control_port", "hb_port"};

static const char *const s_channel_names[KB_NCHANNELS] = {
    "shell", "iopub", "stdin", "control", "hb"};

const char *
kb_channel_name(kb_channel_t ch)
{
    if ((int)ch < 0 || ch >= KB_NCHANNELS)
        return "?";
    return s_channel_names[ch];
}

void
kb_conn_init(kb_conn_t *c)
{
    memset(c, 0, sizeof *c);
}

void
kb_conn_release(kb_conn_t *c)
{
    if (!c)
        return;
    free(c->ip);
    if (c->key) {
        sodium_memzero(c->key, strlen(c->key));
        free(c->key);
    }
    free(c->signature_scheme);
    free(c->kernel_name);
    kb_conn_init(c);
}

/* Decimal digits of a port in 1..65535. */
static size_t
s_digits(int port)
{
    size_t n = 1;
    while (port >= 10) {
        port /= 10;
        n++;
    }
    return n;
}

/* Check the invariants of kb_conn.h; `origin` prefixes the message. */
static int
s_validate(const kb_conn_t *c, const char *origin, err_t *err)
{
    if (strcmp(c->transport, "tcp") != 0 && strcmp(c->transport, "ipc") != 0)
        return err_set(err, ERR_USAGE,
                       "%s: unknown transport '%s' (expected \"tcp\" or "
                       "\"ipc\")",
                       origin, c->transport);
    if (!c->ip || !*c->ip)
        return err_set(err, ERR_USAGE, "%s: \"ip\" is empty", origin);
    if (!c->key)
        return err_set(err, ERR_USAGE, "%s: no \"key\"", origin);
    if (!c->signature_scheme || strcmp(c->signature_scheme, "hmac-sha256"))
        return err_set(err, ERR_USAGE,
                       "%s: unsupported signature_scheme '%s' (only "
                       "hmac-sha256 is supported)",
                       origin, c->signature_scheme ? c->signature_scheme : "");
    for (int i = 0; i < KB_NCHANNELS; i++) {
        if (c->ports[i] < 1 || c->ports[i] > 65535)
            return err_set(err, ERR_USAGE,
                           "%s: \"%s\" is %d, out of range (1..65535)", origin,
                           s_port_fields[i], c->ports[i]);
        for (int j = 0; j < i; j++)
            if (c->ports[j] == c->ports[i])
                return err_set(err, ERR_USAGE,
                               "%s: \"%s\" and \"%s\" are both %d; each "
                               "channel needs its own port",
                               origin, s_port_fields[j], s_port_fields[i],
                               c->ports[i]);
    }
    if (!strcmp(c->transport, "ipc")) {
        size_t plen = strlen(c->ip);
        for (int i = 0; i < KB_NCHANNELS; i++) {
            size_t need = plen + 1 + s_digits(c->ports[i]) + 1;
            if (need > KB_CONN_SUN_PATH_MAX)
                return err_set(err, ERR_USAGE,
                               "%s: ipc path prefix is too long for a unix "
                               "socket path ('%s-%d' needs %zu bytes, at most "
                               "%d fit); use a shorter run directory",
                               origin, c->ip, c->ports[i], need,
                               KB_CONN_SUN_PATH_MAX);
        }
    }
    return 0;
}

/* Optional string field: NULL when absent; -1 when present but not a
 * string. */
static int
s_get_string(json_t *root, const char *field, const char **out,
             const char *origin, err_t *err)
{
    *out = jget_strict(root, field, NULL);
    if (!*out && json_object_get(root, field))
        return err_set(err, ERR_USAGE, "%s: \"%s\" is not a string", origin,
                       field);
    return 0;
}

int
kb_conn_parse(kb_conn_t *c, const char *json, size_t len, const char *origin,
              err_t *err)
{
    json_error_t jerr;
    json_t *root = NULL;
    const char *transport, *ip, *key, *scheme, *kname;
    int rc = -1;

    kb_conn_init(c);
    if (!origin)
        origin = "connection info";
    root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        err_set(err, ERR_USAGE, "%s: bad JSON at line %d, column %d: %s",
                origin, jerr.line, jerr.column, jerr.text);
        goto out;
    }
    if (!json_is_object(root)) {
        err_set(err, ERR_USAGE, "%s: expected a JSON object", origin);
        goto out;
    }
    if (s_get_string(root, "transport", &transport, origin, err) ||
        s_get_string(root, "ip", &ip, origin, err) ||
        s_get_string(root, "key", &key, origin, err) ||
        s_get_string(root, "signature_scheme", &scheme, origin, err) ||
        s_get_string(root, "kernel_name", &kname, origin, err))
        goto out;

    /* jupyter_client's defaults: tcp, unsigned, hmac-sha256. */
    if (!transport)
        transport = "tcp";
    if (strcmp(transport, "tcp") && strcmp(transport, "ipc")) {
        err_set(err, ERR_USAGE,
                "%s: unknown transport '%.32s' (expected \"tcp\" or \"ipc\")",
                origin, transport);
        goto out;
    }
    strcpy(c->transport, transport);
    if (!ip) {
        err_set(err, ERR_USAGE, "%s: missing \"ip\"", origin);
        goto out;
    }
    for (int i = 0; i < KB_NCHANNELS; i++) {
        json_t *p = json_object_get(root, s_port_fields[i]);
        if (!p) {
            err_set(err, ERR_USAGE, "%s: missing \"%s\"", origin,
                    s_port_fields[i]);
            goto out;
        }
        if (!json_is_integer(p)) {
            err_set(err, ERR_USAGE, "%s: \"%s\" is not an integer", origin,
                    s_port_fields[i]);
            goto out;
        }
        json_int_t v = json_integer_value(p);
        if (v < 1 || v > 65535) {
            err_set(err, ERR_USAGE,
                    "%s: \"%s\" is %" JSON_INTEGER_FORMAT
                    ", out of range (1..65535)",
                    origin, s_port_fields[i], v);
            goto out;
        }
        c->ports[i] = (int)v;
    }
    c->ip = xstrdup(ip);
    c->key = xstrdup(key ? key : "");
    c->signature_scheme = xstrdup(scheme ? scheme : "hmac-sha256");
    c->kernel_name = xstrdup(kname ? kname : "");
    if (s_validate(c, origin, err))
        goto out;
    rc = 0;
out:
    json_decref(root);
    if (rc)
        kb_conn_release(c);
    return rc;
}

int
kb_conn_load(kb_conn_t *c, const char *path, err_t *err)
{
    char *data = NULL;
    int fd = -1, rc = -1;
    struct stat st;

    kb_conn_init(c);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        err_errno(err, ERR_IO, "%s: cannot read connection file", path);
        goto out;
    }
    if (fstat(fd, &st) == 0 && !S_ISREG(st.st_mode)) {
        err_set(err, ERR_IO, "%s: connection file is not a regular file", path);
        goto out;
    }
    data = xmalloc(KB_CONN_MAX_FILE + 1);
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fd, data + len, KB_CONN_MAX_FILE + 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            err_errno(err, ERR_IO, "%s: cannot read connection file", path);
            goto out;
        }
        if (n == 0)
            break;
        len += (size_t)n;
        if (len > KB_CONN_MAX_FILE) {
            err_set(err, ERR_USAGE,
                    "%s: connection file is larger than %d bytes; is it "
                    "the right file?",
                    path, KB_CONN_MAX_FILE);
            goto out;
        }
    }
    rc = kb_conn_parse(c, data, len, path, err);
out:
    if (fd >= 0)
        close(fd);
    if (data) {
        sodium_memzero(data, KB_CONN_MAX_FILE + 1);
        free(data);
    }
    return rc;
}

int
kb_conn_save(const kb_conn_t *c, const char *path, err_t *err)
{
    /* A filled struct (kb_conn.h): tcp or ipc, ip and key set. */
    assert(c->ip && c->key &&
           (!strcmp(c->transport, "tcp") || !strcmp(c->transport, "ipc")));
    json_t *root = NULL;
    char *text = NULL;
    int rc = -1;

    if (s_validate(c, path, err))
        return -1;
    root = json_object();
    for (int i = 0; i < KB_NCHANNELS; i++)
        json_object_set_new(root, s_port_fields[i], json_integer(c->ports[i]));
    json_object_set_new(root, "ip", json_string(c->ip));
    json_object_set_new(root, "key", json_string(c->key));
    json_object_set_new(root, "transport", json_string(c->transport));
    json_object_set_new(root, "signature_scheme",
                        json_string(c->signature_scheme));
    json_object_set_new(root, "kernel_name",
                        json_string(c->kernel_name ? c->kernel_name : ""));
    if (json_object_size(root) != KB_NCHANNELS + 5) {
        err_set(err, ERR_USAGE, "%s: a field is not valid UTF-8", path);
        goto out;
    }
    char *body = json_dumps(root, JSON_INDENT(1));
    text = body ? xasprintf("%s\n", body) : NULL;
    if (body) {
        sodium_memzero(body, strlen(body));
        free(body);
    }
    if (!text) {
        err_set(err, ERR_IO, "%s: cannot encode connection info", path);
        goto out;
    }
    /* The file holds the key: 0600 whatever the umask. */
    if (file_write_atomic(path, text, strlen(text), 0600, err))
        goto out;
    rc = 0;
out:
    if (text) {
        sodium_memzero(text, strlen(text));
        free(text);
    }
    json_decref(root);
    return rc;
}

/* c->key = 32 random bytes, hex. */
static int
s_fresh_key(kb_conn_t *c, err_t *err)
{
    unsigned char raw[32];
    char hex[2 * sizeof raw + 1];
    if (sodium_init() < 0)
        return err_set(err, ERR_KERNEL,
                       "cannot initialise libsodium to make a key");
    randombytes_buf(raw, sizeof raw);
    sodium_bin2hex(hex, sizeof hex, raw, sizeof raw);
    c->key = xstrdup(hex);
    sodium_memzero(raw, sizeof raw);
    sodium_memzero(hex, sizeof hex);
    return 0;
}

int
kb_conn_init_ipc(kb_conn_t *c, const char *path_prefix, err_t *err)
{
    kb_conn_init(c);
    strcpy(c->transport, "ipc");
    c->ip = xstrdup(path_prefix ? path_prefix : "");
    for (int i = 0; i < KB_NCHANNELS; i++)
        c->ports[i] = i + 1;
    c->signature_scheme = xstrdup("hmac-sha256");
    c->kernel_name = xstrdup("");
    c->key = xstrdup(""); /* so that validation can run before the key */
    if (s_validate(c, "ipc connection", err))
        goto fail;
    free(c->key);
    c->key = NULL;
    if (s_fresh_key(c, err))
        goto fail;
    return 0;
fail:
    kb_conn_release(c);
    return -1;
}

int
kb_conn_init_tcp(kb_conn_t *c, const char *ip, err_t *err)
{
    struct addrinfo hints, *ai = NULL;
    int fds[KB_NCHANNELS], rc = -1;

    for (int i = 0; i < KB_NCHANNELS; i++)
        fds[i] = -1;
    kb_conn_init(c);
    if (!ip)
        ip = "127.0.0.1";
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST | AI_PASSIVE;
    int gai = getaddrinfo(ip, "0", &hints, &ai);
    if (gai) {
        err_set(err, ERR_USAGE,
                "tcp connection: '%s' is not a numeric IP address: %s", ip,
                gai_strerror(gai));
        goto out;
    }
    for (int i = 0; i < KB_NCHANNELS; i++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        fds[i] = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fds[i] < 0 || bind(fds[i], ai->ai_addr, ai->ai_addrlen) ||
            getsockname(fds[i], (struct sockaddr *)&ss, &sl)) {
            err_errno(err, ERR_KERNEL,
                      "tcp connection: cannot find a free port on %s", ip);
            goto out;
        }
        c->ports[i] = ntohs(ss.ss_family == AF_INET6
                                ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                : ((struct sockaddr_in *)&ss)->sin_port);
    }
    strcpy(c->transport, "tcp");
    c->ip = xstrdup(ip);
    c->signature_scheme = xstrdup("hmac-sha256");
    c->kernel_name = xstrdup("");
    if (s_fresh_key(c, err))
        goto out;
    rc = s_validate(c, "tcp connection", err);
out:
    for (int i = 0; i < KB_NCHANNELS; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    if (ai)
        freeaddrinfo(ai);
    if (rc)
        kb_conn_release(c);
    return rc;
}

int
kb_conn_endpoint(const kb_conn_t *c, kb_channel_t ch, char *out, size_t size)
{
    int n;
    if ((int)ch < 0 || ch >= KB_NCHANNELS || !c->ip || !out || size == 0)
        return -1;
    if (!strcmp(c->transport, "ipc"))
        n = snprintf(out, size, "ipc://%s-%d", c->ip, c->ports[ch]);
    else if (!strcmp(c->transport, "inproc"))
        n = snprintf(out, size, "inproc://%s-%d", c->ip, c->ports[ch]);
    else if (!strcmp(c->transport, "tcp"))
        n = snprintf(out, size,
                     strchr(c->ip, ':') && c->ip[0] != '[' ? "tcp://[%s]:%d"
                                                           : "tcp://%s:%d",
                     c->ip, c->ports[ch]);
    else
        return -1;
    if (n < 0 || (size_t)n >= size) {
        out[0] = '\0';
        return -1;
    }
    return 0;
}
