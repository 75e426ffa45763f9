#include "agent/mcp/ag_mcp_stdio.h"

#include "agent/mcp/ag_mcp_rpc.h"
#include "agent/mcp/ag_mcp_server.h"
#include "common/buf.h"
#include "common/jsonlim.h"
#include "common/log.h"
#include "common/xalloc.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One line read, or the size of one refused for its length. */
typedef struct s_line {
    char *text; /* owned; NULL for an oversized line */
    size_t len; /* bytes of text (or of the refused line) */
} s_line_t;

typedef struct s_stdio {
    int fd;                  /* input */
    FILE *out;               /* output */
    ag_mcp_server_t *server; /* the session */
    char *buf;               /* owned: bytes read, not yet a line */
    size_t len, cap;         /* of buf */
    size_t skipping;         /* >0: inside an oversized line, bytes so far */
    bool eof;                /* input ended */
    bool write_failed;       /* out is gone */
    s_line_t *queue;         /* owned: lines read while a tool ran */
    size_t nqueue;           /* entries in queue */
    volatile sig_atomic_t *stop; /* set by a signal, or NULL */
} s_stdio_t;

static void
s_write(s_stdio_t *io, const json_t *msg)
{
    if (io->write_failed)
        return;
    char *line = ag_mcp_dump(msg);
    if (fputs(line, io->out) == EOF || fputc('\n', io->out) == EOF ||
        fflush(io->out) == EOF) {
        log_warn("mcp: cannot write to the client: %s", strerror(errno));
        io->write_failed = true;
    }
    free(line);
}

static void
s_send(void *arg, const json_t *msg)
{
    s_write(arg, msg);
}

static void
s_push(s_stdio_t *io, char *text, size_t len)
{
    io->queue = xrealloc(io->queue, (io->nqueue + 1) * sizeof *io->queue);
    io->queue[io->nqueue++] = (s_line_t){text, len};
}

/* Move the complete lines of buf to the queue. */
static void
s_split(s_stdio_t *io)
{
    size_t start = 0;
    for (;;) {
        char *nl = memchr(io->buf + start, '\n', io->len - start);
        if (!nl)
            break;
        size_t n = (size_t)(nl - (io->buf + start));
        if (io->skipping) {
            s_push(io, NULL, io->skipping + n);
            io->skipping = 0;
        } else if (n > AG_MCP_MAX_MESSAGE) {
            s_push(io, NULL, n);
        } else {
            s_push(io, xstrndup(io->buf + start, n), n);
        }
        start += n + 1;
    }
    memmove(io->buf, io->buf + start, io->len - start);
    io->len -= start;
    /* A line longer than the cap: stop keeping it, count what follows. */
    if (io->skipping || io->len > AG_MCP_MAX_MESSAGE) {
        io->skipping += io->len;
        io->len = 0;
    }
}

/* Read what is there within timeout_ms (-1: wait). */
static void
s_fill(s_stdio_t *io, int timeout_ms)
{
    if (io->eof)
        return;
    struct pollfd p = {.fd = io->fd, .events = POLLIN};
    int r = poll(&p, 1, timeout_ms);
    if (r <= 0)
        return;
    if (io->cap - io->len < 65536) {
        io->cap = io->cap ? io->cap * 2 : 65536 * 2;
        io->buf = xrealloc(io->buf, io->cap);
    }
    ssize_t n = read(io->fd, io->buf + io->len, io->cap - io->len);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        io->eof = true;
        if (io->len && !io->skipping) /* a last line without newline */
            s_push(io, xstrndup(io->buf, io->len), io->len);
        io->len = 0;
        return;
    }
    io->len += (size_t)n;
    s_split(io);
}

static bool
s_is_cancel(const json_t *msg, const json_t **id)
{
    const char *m = json_string_value(json_object_get(msg, "method"));
    if (!m || strcmp(m, "notifications/cancelled") != 0 ||
        json_object_get(msg, "id"))
        return false;
    *id = json_object_get(json_object_get(msg, "params"), "requestId");
    return *id != NULL;
}

/* While a tool runs: take in what arrived; act on cancellations now. */
static void
s_pump(void *arg)
{
    s_stdio_t *io = arg;
    size_t before = io->nqueue;
    s_fill(io, 0);
    for (size_t i = before; i < io->nqueue; i++) {
        if (!io->queue[i].text)
            continue;
        json_t *msg =
            jsonlim_loadb(io->queue[i].text, io->queue[i].len, 0, NULL, NULL);
        const json_t *id = NULL;
        if (msg && s_is_cancel(msg, &id)) {
            log_info("mcp: the client cancelled a request");
            ag_mcp_server_cancel(io->server, id);
        }
        json_decref(msg);
    }
    /* End of input alone lets the running call finish (a client may
     * close stdin after its last request); a closed output (the client
     * is gone) or a signal stops it. */
    struct pollfd p = {.fd = fileno(io->out), .events = 0};
    if (poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP)))
        io->write_failed = true;
    if (io->write_failed || (io->stop && *io->stop))
        ag_mcp_server_cancel(io->server, NULL);
}

static void
s_handle(s_stdio_t *io, s_line_t *line)
{
    json_t *err = NULL, *msg = NULL;
    if (!line->text) {
        err = ag_mcp_error(NULL, AG_MCP_INVALID_REQUEST,
                           "message of %zu bytes refused: the limit is %zu "
                           "bytes (8 MiB); nothing was run",
                           line->len, AG_MCP_MAX_MESSAGE);
    } else {
        /* Blank lines between messages are tolerated. */
        size_t i = 0;
        while (i < line->len && strchr(" \t\r", line->text[i]))
            i++;
        if (i == line->len)
            return;
        msg = ag_mcp_parse(line->text, line->len, &err);
    }
    if (err) {
        s_write(io, err);
        json_decref(err);
        return;
    }
    ag_mcp_io_t mio = {.send = s_send, .pump = s_pump, .arg = io};
    json_t *resp = ag_mcp_server_handle(io->server, msg, &mio);
    if (resp)
        s_write(io, resp);
    json_decref(resp);
    json_decref(msg);
}

int
ag_mcp_stdio_run(const ag_mcp_config_t *cfg, int in_fd, FILE *out,
                 volatile sig_atomic_t *stop, err_t *err)
{
    s_stdio_t io = {.fd = in_fd, .out = out, .stop = stop};
    io.server = ag_mcp_server_new(cfg);
    log_info("mcp: serving on stdio");
    size_t head = 0;
    while (!io.write_failed && !(stop && *stop)) {
        if (head == io.nqueue) {
            head = io.nqueue = 0;
            if (io.eof)
                break;
            s_fill(&io, 1000);
            if (io.nqueue == 0)
                ag_mcp_box_expire(ag_mcp_server_box(io.server));
            continue;
        }
        s_line_t line = io.queue[head++];
        s_handle(&io, &line);
        free(line.text);
    }
    for (; head < io.nqueue; head++)
        free(io.queue[head].text);
    free(io.queue);
    free(io.buf);
    int rc = 0;
    if (cfg->notebook_path) {
        err_t nerr = {0};
        if (ag_mcp_box_save_notebook(ag_mcp_server_box(io.server),
                                     cfg->notebook_path, &nerr) == 0)
            log_info("mcp: wrote the session to %s", cfg->notebook_path);
        else
            rc = err_set(err, ERR_IO, "%s", nerr.text);
    }
    /* The process exits next: the box goes to a reaper (or the serve
     * daemon) instead of being waited for. */
    ag_mcp_server_hand_off(&io.server);
    log_info("mcp: input ended; the session's sandbox was handed off");
    if (io.write_failed && rc == 0)
        rc = err_set(err, ERR_IO, "the client stopped reading our output");
    return rc;
}
