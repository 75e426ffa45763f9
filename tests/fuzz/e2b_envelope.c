/* Fuzz e2b_envelope: any body, fed whole or in arbitrary pieces, must
 * yield the same messages and the same verdict, without crashing, and
 * never hold more than the message cap. */
#include "agent/e2b/e2b_envelope.h"
#include "common/buf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
s_collect(void *ctx, const json_t *msg, err_t *err)
{
    buf_t *b = ctx;
    char *s = json_dumps(msg, JSON_SORT_KEYS | JSON_COMPACT);
    buf_printf(b, "%s|", s ? s : "?");
    free(s);
    /* A message may stop the stream, as StreamInput's handler does. */
    if (json_object_get(msg, "stop"))
        return err_set(err, ERR_USAGE, "stopped");
    return 0;
}

static char *
s_run(const uint8_t *data, size_t size, size_t step, size_t *outlen)
{
    buf_t b;
    buf_init(&b, 0);
    e2b_envreader_t *r = e2b_envreader_new(4096, s_collect, &b);
    err_t err = {0};
    int failed = 0;
    for (size_t i = 0; i < size && !failed; i += step) {
        size_t n = size - i < step ? size - i : step;
        failed = e2b_envreader_feed(r, data + i, n, &err) < 0;
    }
    if (!failed)
        failed = e2b_envreader_finish(r, &err) < 0;
    buf_printf(&b, "#%d:%s", failed, failed ? err.text : "");
    e2b_envreader_destroy(&r);
    return buf_detach(&b, outlen);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t step = size ? (size_t)(data[0] % 7) + 1 : 1;
    size_t la, lb;
    char *a = s_run(data, size, size ? size : 1, &la);
    char *b = s_run(data, size, step, &lb);
    if (la != lb || memcmp(a, b, la) != 0)
        abort();
    free(a);
    free(b);
    return 0;
}
