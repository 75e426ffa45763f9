#include "agent/mcp/ag_mcp_stdio.h"

#include "agent/mcp/ag_mcp_rpc.h"
#include "agent/mcp/ag_mcp_server.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Seconds one message may take to be taken in by the client before we
 * decide it stopped reading (exit 7). */
#define WRITE_DEADLINE_S 30
/* What may wait while a tool runs: messages, and bytes of them. Beyond,
 * a request is answered AG_MCP_SERVER_BUSY and dropped. */
#define MAX_QUEUED 256
#define MAX_QUEUED_BYTES ((size_t)16 * 1024 * 1024)

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
    s_line_t *queue;         /* owned: lines read, not yet handled */
    size_t head, nqueue;     /* next to handle; entries in queue */
    size_t qbytes;           /* bytes of text in queue[head..nqueue) */
    bool busy;               /* a message is being handled (a tool runs) */
    volatile sig_atomic_t *stop; /* set by a signal, or NULL */
} s_stdio_t;

/* Write all of `data` within WRITE_DEADLINE_S, never blocking longer:
 * poll for room, then at most PIPE_BUF bytes at a time (a pipe with room
 * takes that much without blocking). Between messages, the session's
 * idle and lifetime limits are applied while we wait. */
static void
s_write_all(s_stdio_t *io, const char *data, size_t len)
{
    int fd = fileno(io->out);
    int64_t deadline = clock_mono_ms() + WRITE_DEADLINE_S * 1000;
    size_t off = 0;
    while (off < len && !io->write_failed) {
        int64_t left = deadline - clock_mono_ms();
        if (left <= 0) {
            log_warn("mcp: the client stopped reading: %zu of %zu bytes of "
                     "a message were not taken in %d s; ending the session",
                     len - off, len, WRITE_DEADLINE_S);
            io->write_failed = true;
            break;
        }
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int r = poll(&p, 1, left < 1000 ? (int)left : 1000);
        if (r == 0 && !io->busy)
            ag_mcp_box_expire(ag_mcp_server_box(io->server));
        if (r < 0 && errno != EINTR) {
            io->write_failed = true;
            break;
        }
        if (r <= 0)
            continue;
        if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) {
            log_warn("mcp: cannot write to the client: it closed its input");
            io->write_failed = true;
            break;
        }
        size_t k = len - off < PIPE_BUF ? len - off : PIPE_BUF;
        ssize_t n = write(fd, data + off, k);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0) {
            log_warn("mcp: cannot write to the client: %s", strerror(errno));
            io->write_failed = true;
            break;
        }
        off += (size_t)n;
    }
}

static void
s_write(s_stdio_t *io, const json_t *msg)
{
    if (io->write_failed)
        return;
    char *text = ag_mcp_dump(msg);
    char *line = xasprintf("%s\n", text);
    free(text);
    s_write_all(io, line, strlen(line));
    free(line);
}

static void
s_send(void *arg, const json_t *msg)
{
    s_write(arg, msg);
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

/* A line that arrived while a tool runs and the queue is full: a
 * cancellation still acts; a request is answered AG_MCP_SERVER_BUSY;
 * anything else is dropped (it would get no answer anyway). */
static void
s_refuse(s_stdio_t *io, const char *text, size_t len)
{
    size_t waiting = io->nqueue - io->head;
    json_t *msg = NULL, *perr = NULL;
    if (text)
        msg = ag_mcp_parse(text, len, &perr);
    json_decref(perr);
    const json_t *id = NULL;
    if (msg && s_is_cancel(msg, &id)) {
        log_info("mcp: the client cancelled a request");
        ag_mcp_server_cancel(io->server, id);
    } else if (!msg || json_object_get(msg, "id") || json_is_array(msg)) {
        json_t *e = ag_mcp_error(
            json_is_object(msg) ? json_object_get(msg, "id") : NULL,
            AG_MCP_SERVER_BUSY,
            "message of %zu bytes refused: %zu messages (%zu bytes) already "
            "wait while a tool runs, and at most %d messages or %zu bytes "
            "(16 MiB) may; nothing was run: send it again after the running "
            "call answers",
            len, waiting, io->qbytes, MAX_QUEUED, MAX_QUEUED_BYTES);
        s_write(io, e);
        json_decref(e);
    } else {
        log_warn("mcp: a notification was dropped: the queue is full while "
                 "a tool runs");
    }
    json_decref(msg);
}

/* Queue one line (text NULL: an oversized one of `len` bytes), unless a
 * tool runs and the queue is full. Blank lines are skipped. */
static void
s_push(s_stdio_t *io, const char *text, size_t len)
{
    if (text) {
        size_t i = 0;
        while (i < len && strchr(" \t\r", text[i]))
            i++;
        if (i == len)
            return;
    }
    size_t kept = text ? len : 0;
    if (io->busy && (io->nqueue - io->head >= MAX_QUEUED ||
                     io->qbytes + kept > MAX_QUEUED_BYTES)) {
        s_refuse(io, text, len);
        return;
    }
    if (io->head > 64 && io->head * 2 > io->nqueue) { /* drop handled ones */
        memmove(io->queue, io->queue + io->head,
                (io->nqueue - io->head) * sizeof *io->queue);
        io->nqueue -= io->head;
        io->head = 0;
    }
    io->queue = xrealloc(io->queue, (io->nqueue + 1) * sizeof *io->queue);
    io->queue[io->nqueue++] =
        (s_line_t){text ? xstrndup(text, len) : NULL, len};
    io->qbytes += kept;
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
            s_push(io, io->buf + start, n);
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

/* Read what is there within timeout_ms (-1: wait). Did it read? */
static bool
s_fill(s_stdio_t *io, int timeout_ms)
{
    if (io->eof)
        return false;
    struct pollfd p = {.fd = io->fd, .events = POLLIN};
    int r = poll(&p, 1, timeout_ms);
    if (r <= 0)
        return false;
    if (io->cap - io->len < 65536) {
        io->cap = io->cap ? io->cap * 2 : 65536 * 2;
        io->buf = xrealloc(io->buf, io->cap);
    }
    ssize_t n = read(io->fd, io->buf + io->len, io->cap - io->len);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return false;
    if (n <= 0) {
        io->eof = true;
        if (io->len && !io->skipping) /* a last line without newline */
            s_push(io, io->buf, io->len);
        io->len = 0;
        return false;
    }
    io->len += (size_t)n;
    s_split(io);
    return true;
}

/* While a tool runs: take in what arrived; act on cancellations now. */
static void
s_pump(void *arg)
{
    s_stdio_t *io = arg;
    size_t before = io->nqueue - io->head; /* s_push may move the queue */
    /* All that is there, up to 256 reads (a pipe holds 64 KiB): what
     * waits is bounded by s_push, and a cancellation behind a big
     * message must not wait a read per pump for each 64 KiB of it. */
    for (int k = 0; k < 256 && s_fill(io, 0); k++)
        ;
    for (size_t i = io->head + before; i < io->nqueue; i++) {
        if (!io->queue[i].text)
            continue;
        json_t *msg = json_loadb(io->queue[i].text, io->queue[i].len, 0, NULL);
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
        msg = ag_mcp_parse(line->text, line->len, &err);
    }
    if (err) {
        s_write(io, err);
        json_decref(err);
        return;
    }
    ag_mcp_io_t mio = {.send = s_send, .pump = s_pump, .arg = io};
    io->busy = true;
    json_t *resp = ag_mcp_server_handle(io->server, msg, &mio);
    io->busy = false;
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
    while (!io.write_failed && !(stop && *stop)) {
        /* Idle and lifetime limits, whatever the client sends. */
        ag_mcp_box_expire(ag_mcp_server_box(io.server));
        if (io.head == io.nqueue) {
            io.head = io.nqueue = 0;
            io.qbytes = 0;
            if (io.eof)
                break;
            s_fill(&io, 1000);
            continue;
        }
        s_line_t line = io.queue[io.head++];
        io.qbytes -= line.text ? line.len : 0;
        s_handle(&io, &line);
        free(line.text);
    }
    for (; io.head < io.nqueue; io.head++)
        free(io.queue[io.head].text);
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
