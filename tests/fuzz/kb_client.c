/*
 * Fuzz target: kb_client against a scripted hostile kernel.
 *
 * The kernel's five sockets are real zmq sockets in this process, sharing
 * the client's context over inproc (kb_client_opts.zmq_ctx), so one thread
 * plays both sides without a scheduler in between: the client sends its
 * execute_request (execute_start), the kernel reads it and plays the input
 * as a script of messages, then the execute_reply and idle status that end
 * the execution, and the client pumps them (execute_wait, a small output
 * cap, as `exec` does). The script is a sequence of records:
 *
 *   op (1 byte)  bits 0-3: what to send (table s_kinds; 12 = repeat the
 *                          last message len & 0xff times, a flood);
 *                bit 4: a foreign parent; bit 5: a bad signature;
 *                bit 6: 1-3 extra buffer frames; bit 7: the body is the
 *                       content frame verbatim (else it fills a template)
 *   len (2 bytes, little-endian), body (len bytes)
 *
 * so sequences (display ids registered then updated, clears, floods,
 * forged replies and idles, input requests, leftovers that the next input
 * sees as another execution's) are explored, not just single frames. The
 * client must return for every input, stay within ASan, and store no more
 * than its cap.
 */
#include "kernel-bridge/kb_client.h"
#include "common/clock.h"
#include "kernel-bridge/transport/kb_zmq.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define KEY "fuzz-key"
#define MAX_SCRIPT_BYTES (512u << 10) /* all messages of one input */
#define MAX_RECORDS 64

typedef struct kind {
    const char *type;
    kb_channel_t ch;
    const char *tmpl; /* %s: the body as JSON string text; %c: a letter */
} kind_t;

static const kind_t s_kinds[] = {
    {"stream", KB_IOPUB, "{\"name\":\"stdout\",\"text\":\"%s\"}"},
    {"display_data", KB_IOPUB,
     "{\"data\":{\"text/plain\":\"%s\"},\"metadata\":{},"
     "\"transient\":{\"display_id\":\"d%c\"}}"},
    {"execute_result", KB_IOPUB,
     "{\"data\":{\"text/plain\":\"%s\"},\"metadata\":{},"
     "\"execution_count\":1}"},
    {"update_display_data", KB_IOPUB,
     "{\"data\":{\"text/plain\":\"%s\"},\"metadata\":{},"
     "\"transient\":{\"display_id\":\"d%c\"}}"},
    {"error", KB_IOPUB,
     "{\"ename\":\"E\",\"evalue\":\"%s\",\"traceback\":[\"t%c\"]}"},
    {"clear_output", KB_IOPUB, "{\"wait\":%s}"},
    {"status", KB_IOPUB, "{\"execution_state\":\"%s\"}"},
    {"execute_input", KB_IOPUB, "{\"code\":\"%s\",\"execution_count\":3}"},
    {"comm_msg", KB_IOPUB, "{\"comm_id\":\"c%c\",\"data\":{\"x\":\"%s\"}}"},
    {"execute_reply", KB_SHELL,
     "{\"status\":\"ok\",\"execution_count\":2,\"payload\":[{\"source\":"
     "\"page\",\"data\":{\"text/plain\":\"%s\"}}]}"},
    {"input_request", KB_STDIN, "{\"prompt\":\"%s\",\"password\":false}"},
    {"stream", KB_IOPUB, "{\"name\":\"stderr\",\"text\":\"%s\"}"},
};
#define NKINDS (sizeof s_kinds / sizeof *s_kinds)
#define OP_REPEAT 12

/* The kernel's side. */
static struct {
    void *zctx;               /* shared with the client */
    void *sock[KB_NCHANNELS]; /* shell ROUTER, iopub PUB, stdin ROUTER ... */
    kb_key_t *key;
    unsigned serial; /* msg ids */
} K;

static kb_client_t *s_client;

/* Frames of one message being built. */
typedef struct frames {
    zmq_msg_t f[12];
    size_t n;
} frames_t;

static void
s_add(frames_t *fr, const void *data, size_t len)
{
    zmq_msg_init_size(&fr->f[fr->n], len);
    memcpy(zmq_msg_data(&fr->f[fr->n]), data, len);
    fr->n++;
}

static void
s_send_frames(void *sock, frames_t *fr)
{
    for (size_t i = 0; i < fr->n; i++)
        zmq_msg_send(&fr->f[i], sock, i + 1 < fr->n ? ZMQ_SNDMORE : 0);
}

/* Copy of the frames (for repeats). */
static void
s_copy(frames_t *dst, frames_t *src)
{
    dst->n = src->n;
    for (size_t i = 0; i < src->n; i++) {
        zmq_msg_init(&dst->f[i]);
        zmq_msg_copy(&dst->f[i], &src->f[i]);
    }
}

static void
s_release(frames_t *fr)
{
    for (size_t i = 0; i < fr->n; i++)
        zmq_msg_close(&fr->f[i]);
    fr->n = 0;
}

/* Build a signed (or badly signed) message; identity for ROUTER sends. */
static void
s_build(frames_t *fr, const char *ident, const char *type, const char *parent,
        const void *content, size_t clen, bool bad_sig, int nbuf)
{
    char header[256], par[160];
    snprintf(header, sizeof header,
             "{\"msg_id\":\"k-%u\",\"msg_type\":\"%s\",\"session\":\"k\","
             "\"username\":\"k\",\"date\":\"2020-01-01T00:00:00Z\","
             "\"version\":\"5.3\"}",
             K.serial++, type);
    snprintf(par, sizeof par,
             "{\"msg_id\":\"%s\",\"msg_type\":\"execute_request\","
             "\"session\":\"x\"}",
             parent);
    kb_frame_t parts[4] = {{header, strlen(header)},
                           {par, strlen(par)},
                           {"{}", 2},
                           {content, clen}};
    char sig[65];
    kb_key_sign(K.key, parts, sig);
    if (bad_sig)
        sig[0] = sig[0] == '0' ? '1' : '0';
    fr->n = 0;
    if (ident)
        s_add(fr, ident, strlen(ident));
    else
        s_add(fr, "topic", 5);
    s_add(fr, KB_WIRE_DELIM, KB_WIRE_DELIM_LEN);
    s_add(fr, sig, 64);
    for (int i = 0; i < 4; i++)
        s_add(fr, parts[i].data, parts[i].len);
    for (int i = 0; i < nbuf; i++)
        s_add(fr, "buf", 3);
}

/* The body as the text of a JSON string: quotes, backslashes and control
 * bytes become '?', so the template stays JSON (invalid UTF-8 stays). */
static char *
s_text(const uint8_t *b, size_t n)
{
    char *t = malloc(n + 1);
    for (size_t i = 0; i < n; i++)
        t[i] = (b[i] == '"' || b[i] == '\\' || b[i] < 0x20) ? '?' : (char)b[i];
    t[n] = '\0';
    return t;
}

/* The template with %s replaced by `text` and %c by `letter`. */
static char *
s_fill(const char *tmpl, const char *text, char letter)
{
    size_t cap = strlen(tmpl) + strlen(text) + 1, n = 0;
    char *out = malloc(cap);
    for (const char *p = tmpl; *p; p++) {
        if (p[0] == '%' && p[1] == 's') {
            memcpy(out + n, text, strlen(text));
            n += strlen(text);
            p++;
        } else if (p[0] == '%' && p[1] == 'c') {
            out[n++] = letter;
            p++;
        } else {
            out[n++] = *p;
        }
    }
    out[n] = '\0';
    return out;
}

static void *
s_channel_sock(kb_channel_t ch)
{
    return K.sock[ch];
}

/* Play one script for the execution `exec_id` of client `ident`. */
static void
s_play(const uint8_t *data, size_t size, const char *ident, const char *exec_id)
{
    frames_t last = {.n = 0};
    kb_channel_t last_ch = KB_IOPUB;
    size_t pos = 0, bytes = 0;
    for (int rec = 0; rec < MAX_RECORDS && pos < size; rec++) {
        uint8_t op = data[pos++];
        size_t len = 0;
        if (pos + 2 <= size)
            len = data[pos] | (size_t)data[pos + 1] << 8;
        pos += pos + 2 <= size ? 2 : size - pos;
        if (len > size - pos)
            len = size - pos;
        const uint8_t *body = data + pos;
        pos += len;
        unsigned k = op & 0x0f;
        if (k == OP_REPEAT) {
            size_t times = len & 0xff;
            for (size_t i = 0; i < times && last.n; i++) {
                size_t each = 0;
                for (size_t j = 0; j < last.n; j++)
                    each += zmq_msg_size(&last.f[j]);
                if (bytes + each > MAX_SCRIPT_BYTES)
                    break;
                bytes += each;
                frames_t c;
                s_copy(&c, &last);
                s_send_frames(s_channel_sock(last_ch), &c);
                s_release(&c);
            }
            continue;
        }
        const kind_t *kd = &s_kinds[k % NKINDS];
        if (bytes + len + 512 > MAX_SCRIPT_BYTES)
            break;
        char *content;
        size_t clen;
        if (op & 0x80) {
            content = malloc(len + 1);
            memcpy(content, body, len);
            clen = len;
        } else {
            char *t = s_text(body, len);
            char letter = len ? (char)('a' + body[0] % 4) : 'a';
            if (!strcmp(kd->type, "clear_output")) {
                free(t);
                t = strdup(len && body[0] % 2 ? "true" : "false");
            }
            content = s_fill(kd->tmpl, t, letter);
            clen = strlen(content);
            free(t);
        }
        s_release(&last);
        kb_channel_t ch = kd->ch;
        s_build(&last, ch == KB_IOPUB ? NULL : ident, kd->type,
                op & 0x10 ? "someone-else" : exec_id, content, clen, op & 0x20,
                op & 0x40 ? 1 + (int)(len % 3) : 0);
        free(content);
        bytes += clen + 256;
        last_ch = ch;
        frames_t c;
        s_copy(&c, &last);
        s_send_frames(s_channel_sock(ch), &c);
        s_release(&c);
    }
    s_release(&last);
    /* What ends the execution. */
    frames_t fr;
    const char *reply = "{\"status\":\"ok\",\"execution_count\":1}";
    s_build(&fr, ident, "execute_reply", exec_id, reply, strlen(reply), false,
            0);
    s_send_frames(K.sock[KB_SHELL], &fr);
    const char *idle = "{\"execution_state\":\"idle\"}";
    s_build(&fr, NULL, "status", exec_id, idle, strlen(idle), false, 0);
    s_send_frames(K.sock[KB_IOPUB], &fr);
}

/* Drop whatever the client sent that the kernel does not answer. */
static void
s_drain(kb_channel_t ch)
{
    kb_msg_t *m;
    for (int i = 0; i < 4096; i++) {
        err_t err;
        m = kb_zmq_recv(K.sock[ch], K.key, NULL, NULL, &err);
        if (!m && !err.code)
            return;
        kb_msg_destroy(&m);
    }
}

static void
s_setup(void)
{
    kb_conn_t conn;
    kb_conn_init(&conn);
    strcpy(conn.transport, "inproc");
    conn.ip = strdup("kb-client-fuzz");
    conn.key = strdup(KEY);
    for (int ch = 0; ch < KB_NCHANNELS; ch++)
        conn.ports[ch] = ch + 1;
    K.key = kb_key_new(KEY, strlen(KEY));
    K.zctx = zmq_ctx_new();
    static const int types[KB_NCHANNELS] = {[KB_SHELL] = ZMQ_ROUTER,
                                            [KB_IOPUB] = ZMQ_PUB,
                                            [KB_STDIN] = ZMQ_ROUTER,
                                            [KB_CONTROL] = ZMQ_ROUTER,
                                            [KB_HB] = ZMQ_REP};
    for (int ch = 0; ch < KB_NCHANNELS; ch++) {
        char ep[256];
        K.sock[ch] = zmq_socket(K.zctx, types[ch]);
        int linger = 0, hwm = 0;
        zmq_setsockopt(K.sock[ch], ZMQ_LINGER, &linger, sizeof linger);
        zmq_setsockopt(K.sock[ch], ZMQ_SNDHWM, &hwm, sizeof hwm);
        zmq_setsockopt(K.sock[ch], ZMQ_RCVHWM, &hwm, sizeof hwm);
        kb_conn_endpoint(&conn, (kb_channel_t)ch, ep, sizeof ep);
        if (zmq_bind(K.sock[ch], ep))
            abort();
    }
    kb_client_opts_t co = {.max_msg_bytes = 1 << 20, .zmq_ctx = K.zctx};
    s_client = kb_client_new(&conn, &co, NULL);
    kb_conn_release(&conn);
    if (!s_client)
        abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!s_client)
        s_setup();
    kb_exec_opts_t xo;
    kb_exec_opts_init(&xo);
    xo.allow_stdin = true;
    kb_exec_t *x = kb_client_execute_start(s_client, "fuzz", &xo, NULL);
    if (!x)
        abort();
    /* The kernel reads the request and plays the script. */
    kb_msg_t *req = NULL;
    for (int i = 0; i < 100 && !req; i++) {
        zmq_pollitem_t it = {K.sock[KB_SHELL], 0, ZMQ_POLLIN, 0};
        zmq_poll(&it, 1, 100);
        req = kb_zmq_recv(K.sock[KB_SHELL], K.key, NULL, NULL, NULL);
    }
    if (!req)
        abort();
    const kb_blob_t *id = kb_msg_identity(req, 0);
    char ident[64] = "";
    if (id && id->len < sizeof ident) {
        memcpy(ident, id->data, id->len);
        ident[id->len] = '\0';
    }
    s_play(data, size, ident, kb_msg_id(req));
    kb_msg_destroy(&req);

    kb_output_t *out = kb_output_new(NULL, 16384);
    kb_client_execute_wait(s_client, x, out, NULL, clock_mono_ms() + 10000,
                           NULL);
    json_t *j = kb_output_to_json(out);
    char *text = json_dumps(j, JSON_ENSURE_ASCII);
    /* What is stored is bounded by the cap plus one marker. */
    if (text && strlen(text) > 16384 + 4096)
        abort();
    free(text);
    json_decref(j);
    kb_output_destroy(&out);
    kb_exec_destroy(&x);
    s_drain(KB_STDIN); /* input replies */
    return 0;
}
