/* Fuzz ag_sse: any input, fed whole or in arbitrary pieces, must parse to
 * the same events without crashing. */
#include "agent/llm/ag_sse.h"
#include "common/buf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
s_collect(const char *type, const char *d, size_t len, const char *id,
          void *arg)
{
    buf_t *b = arg;
    buf_printf(b, "%s|%s|%zu|", type, id, len);
    buf_append(b, d, len);
    return 0;
}

static char *
s_run(const uint8_t *data, size_t size, size_t step, size_t *outlen)
{
    buf_t b;
    buf_init(&b, 0);
    ag_sse_t *p = ag_sse_new(s_collect, &b, 4096);
    int failed = 0;
    for (size_t i = 0; i < size && !failed; i += step) {
        size_t n = size - i < step ? size - i : step;
        failed = ag_sse_feed(p, (const char *)data + i, n, NULL) < 0;
    }
    if (!failed)
        ag_sse_finish(p);
    buf_printf(&b, "#%d", failed);
    ag_sse_destroy(&p);
    return buf_detach(&b, outlen);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t step = size ? (size_t)(data[0] % 13) + 1 : 1;
    size_t la, lb;
    char *a = s_run(data, size, size ? size : 1, &la);
    char *b = s_run(data, size, step, &lb);
    /* Overflow can be detected at different points; compare only when
     * neither run hit the cap. */
    if (la >= 2 && lb >= 2 && strcmp(a + la - 2, "#0") == 0 &&
        strcmp(b + lb - 2, "#0") == 0 && (la != lb || memcmp(a, b, la)))
        abort();
    free(a);
    free(b);
    return 0;
}
