#include "kb_zmq.h"

#include <errno.h>
#include <stdbool.h>
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

kb_msg_t *
kb_zmq_recv(void *sock, const kb_key_t *key, const kb_frames_limits_t *limits,
            kb_wire_stats_t *stats, err_t *err)
{
    size_t max_frames = kb_frames_max(limits);
    size_t max_bytes = limits ? limits->max_bytes : 0;
    zmq_msg_t parts[KB_FRAMES_MAX];
    kb_frame_t views[KB_FRAMES_MAX];
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
        if (overflow || n >= max_frames || (max_bytes && total > max_bytes)) {
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
        kb_frames_parse(views, n, overflow, key, limits, stats, err);
    for (size_t i = 0; i < n; i++)
        zmq_msg_close(&parts[i]);
    return msg;
}
