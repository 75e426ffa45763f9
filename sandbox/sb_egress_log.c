/*
 * sb_egress_log: the JSON-lines connection recorder.
 */
#include "sandbox/sb_egress_log.h"

#include "common/xalloc.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void
sb_egress_log_jsonl(void *ctx, const sb_egress_rec_t *r)
{
    int fd = ctx ? *(int *)ctx : -1;
    if (fd < 0)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[40];
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_t *j = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:i, s:s, s:s, s:s, s:s, s:I, s:I, s:I}",
        "time", when, "event", "net", "verdict",
        r->allowed ? "allowed" : "refused", "method",
        r->method ? r->method : "?", "host", r->host ? r->host : "", "port",
        (int)r->port, "address", r->address ? r->address : "", "rule",
        r->rule ? r->rule : "", "sni", r->sni ? r->sni : "", "reason",
        r->reason ? r->reason : "", "bytes_up", (json_int_t)r->bytes_up,
        "bytes_down", (json_int_t)r->bytes_down, "ms", (json_int_t)r->ms);
    if (!j)
        return;
    char *s = json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(j);
    if (!s)
        return;
    size_t n = strlen(s);
    char *line = xmalloc(n + 2);
    memcpy(line, s, n);
    line[n] = '\n';
    ssize_t w = write(fd, line, n + 1);
    (void)w;
    free(line);
    free(s);
}
