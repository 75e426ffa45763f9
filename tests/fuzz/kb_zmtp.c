/* Fuzz target: arbitrary bytes from a kernel's iopub socket, as our own
 * ZMTP reader sees them. The first byte picks how the stream is split into
 * reads (1 to 256 bytes at a time); the rest is the stream. Decoding it in
 * those pieces must give exactly what decoding it whole gives: the same
 * messages with the same frames, the same drops, the same error. Every
 * frame lies inside the bytes handed over, no message passes the caps,
 * and nothing may crash, leak or read past the input (ASan). */
#include "kernel-bridge/wire/kb_zmtp.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BYTES 4096
#define MAX_FRAMES 8

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A digest of one decode run: what came out, in order. */
typedef struct run {
    uint64_t hash; /* FNV-1a over every event and frame */
    size_t events;
    kb_zmtp_state_t end;
} run_t;

static void
s_mix(run_t *r, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        r->hash = (r->hash ^ b[i]) * 1099511628211u;
}

static run_t
s_decode(const uint8_t *in, size_t len, size_t step)
{
    run_t run = {14695981039346656037u, 0, KB_ZMTP_GREETING};
    kb_zmtp_t z;
    kb_zmtp_init(&z, MAX_BYTES, MAX_FRAMES);
    size_t start = 0, fed = 0;
    for (;;) {
        fed = step && len - fed > step ? fed + step : len;
        /* Each read lands in a buffer of exactly the bytes held, so ASan
         * sees any look past them. */
        size_t held = fed - start;
        uint8_t *buf = malloc(held ? held : 1);
        memcpy(buf, in + start, held);
        kb_frame_t f[MAX_FRAMES];
        size_t used = 0, n = 0;
        kb_zmtp_result_t r = kb_zmtp_decode(&z, buf, held, &used, f, &n);
        if (used > held)
            abort();
        if (r == KB_ZMTP_MSG) {
            size_t total = 0;
            if (n < 1 || n > MAX_FRAMES)
                abort();
            for (size_t i = 0; i < n; i++) {
                const uint8_t *p = f[i].data;
                if (p < buf || p + f[i].len > buf + used)
                    abort();
                total += f[i].len;
                s_mix(&run, &f[i].len, sizeof f[i].len);
                s_mix(&run, p, f[i].len);
            }
            if (total > MAX_BYTES)
                abort();
        }
        if (r != KB_ZMTP_NEED) {
            run.events++;
            s_mix(&run, &r, sizeof r);
        }
        if (r == KB_ZMTP_ERROR && z.why[0] == '\0')
            abort(); /* a refusal always says why */
        free(buf);
        start += used;
        if (r == KB_ZMTP_ERROR || (r == KB_ZMTP_NEED && fed == len))
            break;
    }
    run.end = z.state;
    return run;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t step = (size_t)data[0] + 1;
    run_t whole = s_decode(data + 1, size - 1, 0);
    run_t split = s_decode(data + 1, size - 1, step);
    if (whole.hash != split.hash || whole.events != split.events ||
        whole.end != split.end)
        abort();
    return 0;
}
