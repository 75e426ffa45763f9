#include "kb_frames.h"

#include <string.h>

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
s_foreign(const kb_frame_t *f, size_t n, const kb_frames_limits_t *lim)
{
    size_t d = s_delim(f, n);
    if (d + 4 > n) /* kb_wire reports the framing */
        return false;
    if (lim->status_only && !s_mentions(&f[d + 2], "status"))
        return true;
    return lim->parent_id && !s_mentions(&f[d + 3], lim->parent_id);
}

static const kb_frames_limits_t s_no_limits = {0};

size_t
kb_frames_max(const kb_frames_limits_t *limits)
{
    const kb_frames_limits_t *lim = limits ? limits : &s_no_limits;
    return lim->max_frames && lim->max_frames < KB_FRAMES_MAX ? lim->max_frames
                                                              : KB_FRAMES_MAX;
}

kb_msg_t *
kb_frames_parse(const kb_frame_t *frames, size_t n, bool dropped,
                const kb_key_t *key, const kb_frames_limits_t *limits,
                kb_wire_stats_t *stats, err_t *err)
{
    const kb_frames_limits_t *lim = limits ? limits : &s_no_limits;
    size_t max_frames = kb_frames_max(lim), total = 0;
    for (size_t i = 0; i < n; i++)
        total += frames[i].len;
    err_clear(err);
    if (dropped || n > max_frames ||
        (lim->max_bytes && total > lim->max_bytes)) {
        if (stats)
            stats->oversized++;
        err_set(err, ERR_KERNEL,
                "dropped a message of more than %zu frames or %zu bytes",
                max_frames, lim->max_bytes);
        return NULL;
    }
    if (n && s_foreign(frames, n, lim)) {
        if (stats)
            stats->foreign++;
        err_set(err, ERR_KERNEL, "dropped a message meant for someone else");
        return NULL;
    }
    kb_wire_limits_t wl = {KB_WIRE_DEFAULT_JSON_BYTES,
                           KB_WIRE_DEFAULT_JSON_DEPTH, lim->json_allowance};
    return n ? kb_wire_parse(frames, n, key, &wl, stats, err) : NULL;
}
