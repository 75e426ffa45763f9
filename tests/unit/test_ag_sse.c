/* ag_sse: the event-stream parser follows the WHATWG rules whatever the
 * chunking of its input. */
#include "agent/llm/ag_sse.h"
#include "common/buf.h"
#include "tests/tap.h"

#include <stdlib.h>

/* Events rendered as "type|id|data\n" lines, for comparison. */
typedef struct {
    buf_t out;
    int stop_after; /* stop when this many events were seen (0 = never) */
    int seen;
} sink_t;

static int
s_collect(const char *type, const char *data, size_t len, const char *id,
          void *arg)
{
    sink_t *s = arg;
    buf_printf(&s->out, "%s|%s|", type, id);
    buf_append(&s->out, data, len);
    buf_puts(&s->out, "\n");
    s->seen++;
    return s->stop_after && s->seen >= s->stop_after;
}

/* Parse `in` fed in pieces of `step` bytes (0 = all at once), or split
 * once at `cut` when step < 0. Returns the rendered events (caller frees)
 * and sets *pending from ag_sse_finish. */
static char *
s_parse(const char *in, size_t len, long step, size_t cut, int *pending)
{
    sink_t s = {.stop_after = 0};
    buf_init(&s.out, 0);
    ag_sse_t *p = ag_sse_new(s_collect, &s, 0);
    if (step == 0) {
        ag_sse_feed(p, in, len, NULL);
    } else if (step < 0) {
        ag_sse_feed(p, in, cut, NULL);
        ag_sse_feed(p, in + cut, len - cut, NULL);
    } else {
        for (size_t i = 0; i < len; i += (size_t)step) {
            size_t n = len - i < (size_t)step ? len - i : (size_t)step;
            ag_sse_feed(p, in + i, n, NULL);
        }
    }
    int pend = ag_sse_finish(p);
    if (pending)
        *pending = pend;
    ag_sse_destroy(&p);
    return buf_detach(&s.out, NULL);
}

static void
s_is(const char *in, const char *want, const char *name)
{
    char *got = s_parse(in, strlen(in), 0, 0, NULL);
    is_str(got, want, "%s", name);
    free(got);
}

int
main(void)
{
    /* The WHATWG specification's own examples. */
    s_is("data: YHOO\ndata: +2\ndata: 10\n\n", "message||YHOO\n+2\n10\n",
         "multi-line data is joined with newlines (spec example 1)");
    s_is(": test stream\n\ndata: first event\nid: 1\n\ndata:second event\n"
         "id\n\ndata:  third event\n\n",
         "message|1|first event\nmessage||second event\nmessage|| third "
         "event\n",
         "comments are ignored, id persists and an empty id resets it, only "
         "one space is stripped (spec example 2)");
    s_is("data\n\ndata\ndata\n\ndata:", "message||\nmessage||\n\n",
         "a field without a colon has an empty value; an unterminated last "
         "event is dropped (spec example 3)");
    s_is("data:test\n\ndata: test\n\n", "message||test\nmessage||test\n",
         "the space after the colon is optional (spec example 4)");

    s_is("event: content_block_delta\r\ndata: {\"a\":1}\r\n\r\n",
         "content_block_delta||{\"a\":1}\n", "CRLF line endings work");
    s_is("event: x\rdata: y\r\r", "x||y\n", "bare CR line endings work");
    s_is("event: ping\n\ndata: after\n\n", "message||after\n",
         "an event without data is not dispatched and its type is reset");
    s_is("\xEF\xBB\xBF"
         "data: bom\n\n",
         "message||bom\n", "one leading UTF-8 BOM is skipped");
    s_is("dataX: nope\nDATA: nope\n\n", "",
         "field names are exact and case-sensitive");
    s_is("data: a:b: c\n\n", "message||a:b: c\n",
         "only the first colon separates field and value");

    {
        sink_t s = {.stop_after = 0};
        buf_init(&s.out, 0);
        ag_sse_t *p = ag_sse_new(s_collect, &s, 0);
        const char *in = "retry: 2500\nretry: 12x\ndata: r\n\n";
        ag_sse_feed(p, in, strlen(in), NULL);
        is_int(ag_sse_retry_ms(p), 2500,
               "retry takes digits only; a bad value is ignored");
        is_int((long)ag_sse_events(p), 1, "events are counted");
        ag_sse_destroy(&p);
        ok(p == NULL, "destroy nulls the caller's pointer");
        buf_release(&s.out);
    }

    /* A sample stream mixing every feature, split at every byte. */
    static const char sample[] = "\xEF\xBB\xBF: hello\r\n"
                                 "event: message_start\r\n"
                                 "data: {\"type\":\"message_start\"}\r\n"
                                 "\r\n"
                                 "id: 7\n"
                                 "data: line one\n"
                                 "data: line two\n"
                                 "\n"
                                 "event: delta\r"
                                 "data:{\"t\":\"caf\xC3\xA9\"}\r"
                                 "\r"
                                 "retry: 10\n"
                                 ":comment\n"
                                 "data: [DONE]\n"
                                 "\n"
                                 "data: tail without end";
    size_t slen = sizeof sample - 1;
    int pending = 0;
    char *ref = s_parse(sample, slen, 0, 0, &pending);
    is_str(ref,
           "message_start||{\"type\":\"message_start\"}\n"
           "message|7|line one\nline two\n"
           "delta|7|{\"t\":\"caf\xC3\xA9\"}\n"
           "message|7|[DONE]\n",
           "the sample stream parses to the expected four events");
    ok(pending == 1, "finish reports the unterminated tail as discarded");
    int same = 1;
    size_t bad = 0;
    for (size_t cut = 0; cut <= slen; cut++) {
        char *got = s_parse(sample, slen, -1, cut, NULL);
        if (strcmp(got, ref) != 0 && same) {
            same = 0;
            bad = cut;
        }
        free(got);
    }
    ok(same,
       "splitting the sample at every byte position gives the same "
       "events (first difference at %zu)",
       bad);
    for (long step = 1; step <= 7; step++) {
        char *got = s_parse(sample, slen, step, 0, NULL);
        is_str(got, ref, "feeding %ld byte(s) at a time gives the same events",
               step);
        free(got);
    }
    free(ref);

    {
        int pend = -1;
        char *got = s_parse("data: x\n\n", 9, 0, 0, &pend);
        ok(pend == 0, "a stream ending on an event boundary has nothing "
                      "pending");
        free(got);
    }
    {
        sink_t s = {.stop_after = 1};
        buf_init(&s.out, 0);
        ag_sse_t *p = ag_sse_new(s_collect, &s, 0);
        err_t err = {0};
        const char *in = "data: 1\n\ndata: 2\n\n";
        int rc = ag_sse_feed(p, in, strlen(in), &err);
        ok(rc == -1 && s.seen == 1 && err.code == 0,
           "a callback asking to stop ends parsing without an error");
        ag_sse_destroy(&p);
        buf_release(&s.out);
    }
    {
        sink_t s = {.stop_after = 0};
        buf_init(&s.out, 0);
        ag_sse_t *p = ag_sse_new(s_collect, &s, 16);
        err_t err = {0};
        const char *in = "data: 0123456789abcdefXYZ\n\n";
        int rc = ag_sse_feed(p, in, strlen(in), &err);
        ok(rc == -1 && err.code == ERR_PROVIDER && s.seen == 0,
           "an event larger than the cap is rejected with an error");
        ok(strstr(err.text, "larger than 16 bytes") != NULL,
           "the error names the cap");
        ag_sse_destroy(&p);
        buf_release(&s.out);
    }
    {
        sink_t s = {.stop_after = 0};
        buf_init(&s.out, 0);
        ag_sse_t *p = ag_sse_new(s_collect, &s, 0);
        const char in[] = "data: a\0b\n\n";
        ag_sse_feed(p, in, sizeof in - 1, NULL);
        ok(s.out.len == strlen("message||") + 4 &&
               memcmp(s.out.data + 9, "a\0b\n", 4) == 0,
           "a NUL byte inside data is delivered with its length");
        ag_sse_destroy(&p);
        buf_release(&s.out);
    }
    return done_testing();
}
