#include "kb_zmq.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <zmq.h>

int
kb_zmq_send(void *sock, const kb_msg_t *msg, const kb_key_t *key,
            const char *what, err_t *err)
{
    kb_wire_out_t out;
    if (kb_wire_serialize(msg, key, &out, err))
        return -1;
    int rc = 0, saved = 0;
    for (size_t i = 0; i < out.n && rc == 0; i++)
        if (zmq_send(sock, out.frames[i].data, out.frames[i].len,
                     i + 1 < out.n ? ZMQ_SNDMORE : 0) < 0) {
            saved = errno;
            rc = err_set(err, ERR_KERNEL, "sending on %s: %s", what,
                         zmq_strerror(saved));
        }
    kb_wire_out_release(&out);
    errno = saved;
    return rc;
}

/* The index of the <IDS|MSG> frame, or n. */
static size_t
s_delim(const kb_frame_t *f, size_t n)
{
    size_t i = 0;
    while (i < n && !(f[i].len == KB_WIRE_DELIM_LEN &&
                      memcmp(f[i].data, KB_WIRE_DELIM, KB_WIRE_DELIM_LEN) == 0))
        i++;
    return i;
}

/* Does frame `f` contain `text`? */
static bool
s_mentions(const kb_frame_t *f, const char *text)
{
    return memmem(f->data, f->len, text, strlen(text)) != NULL;
}

/* A message the receiver would ignore, judged from its raw frames. */
static bool
s_foreign(const kb_frame_t *f, size_t n, const kb_zmq_limits_t *lim)
{
    size_t d = s_delim(f, n);
    if (d + 4 > n) /* kb_wire reports the framing */
        return false;
    if (lim->status_only && !s_mentions(&f[d + 2], "status"))
        return true;
    return lim->parent_id && !s_mentions(&f[d + 3], lim->parent_id);
}

/* Judge the frames of one message and parse it: `overflow` says a cap
 * was passed while they were collected. */
static kb_msg_t *
s_judge(const kb_frame_t *views, size_t n, bool overflow, size_t max_frames,
        const kb_key_t *key, const kb_zmq_limits_t *lim, kb_wire_stats_t *stats,
        err_t *err)
{
    if (overflow) {
        if (stats)
            stats->oversized++;
        err_set(err, ERR_KERNEL,
                "dropped a message of more than %zu frames or %zu bytes",
                max_frames, lim->max_bytes);
        return NULL;
    }
    if (n && s_foreign(views, n, lim)) {
        if (stats)
            stats->foreign++;
        err_set(err, ERR_KERNEL, "dropped a message meant for someone else");
        return NULL;
    }
    kb_wire_limits_t wl = {KB_WIRE_DEFAULT_JSON_BYTES,
                           KB_WIRE_DEFAULT_JSON_DEPTH, lim->json_allowance};
    return n ? kb_wire_parse(views, n, key, &wl, stats, err) : NULL;
}

static const kb_zmq_limits_t s_no_limits = {0};

static size_t
s_max_frames(const kb_zmq_limits_t *lim)
{
    return lim->max_frames && lim->max_frames < KB_ZMQ_MAX_FRAMES
               ? lim->max_frames
               : KB_ZMQ_MAX_FRAMES;
}

kb_msg_t *
kb_zmq_parse_frames(const kb_frame_t *frames, size_t n, bool dropped,
                    const kb_key_t *key, const kb_zmq_limits_t *limits,
                    kb_wire_stats_t *stats, err_t *err)
{
    const kb_zmq_limits_t *lim = limits ? limits : &s_no_limits;
    size_t max_frames = s_max_frames(lim), total = 0;
    for (size_t i = 0; i < n; i++)
        total += frames[i].len;
    err_clear(err);
    return s_judge(frames, n,
                   dropped || n > max_frames ||
                       (lim->max_bytes && total > lim->max_bytes),
                   max_frames, key, lim, stats, err);
}

kb_msg_t *
kb_zmq_recv(void *sock, const kb_key_t *key, const kb_zmq_limits_t *limits,
            kb_wire_stats_t *stats, err_t *err)
{
    const kb_zmq_limits_t *lim = limits ? limits : &s_no_limits;
    size_t max_frames = s_max_frames(lim);
    zmq_msg_t parts[KB_ZMQ_MAX_FRAMES];
    kb_frame_t views[KB_ZMQ_MAX_FRAMES];
    size_t n = 0, total = 0;
    bool more = true, overflow = false;
    err_clear(err);
    while (more) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        /* Only the first frame may be absent; the rest of a multipart
         * message is always there once its first frame is. */
        if (zmq_msg_recv(&part, sock, n || overflow ? 0 : ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&part);
            break;
        }
        more = zmq_msg_more(&part);
        total += zmq_msg_size(&part);
        if (overflow || n >= max_frames ||
            (lim->max_bytes && total > lim->max_bytes)) {
            /* Past a cap: release every frame as it comes. */
            overflow = true;
            zmq_msg_close(&part);
        } else {
            parts[n++] = part;
        }
    }
    for (size_t i = 0; i < n; i++)
        views[i] =
            (kb_frame_t){zmq_msg_data(&parts[i]), zmq_msg_size(&parts[i])};
    kb_msg_t *msg =
        s_judge(views, n, overflow, max_frames, key, lim, stats, err);
    for (size_t i = 0; i < n; i++)
        zmq_msg_close(&parts[i]);
    return msg;
}
