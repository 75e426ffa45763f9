/* Unit tests for kernel-bridge/kb_output: the output model.
 *
 * Run with a file argument it is also the C half of the interop check in
 * tests/interop/test_kb_output_nbclient.py: the file holds a JSON array of
 * executions, each an array of [msg_type, content]; every execution is fed
 * into its own kb_output_t (one shared display registry) and the final
 * outputs of all executions are printed as one JSON array. */
#include "../tap.h"

#include "kernel-bridge/kb_output.h"

#include <stdlib.h>

static json_t *
s_json(const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    if (!j)
        diag("test JSON broken: %s: %s", text, e.text);
    return j;
}

/* Feed one message given as JSON text; returns kb_output_feed's result. */
static int
s_feed(kb_output_t *o, const char *type, const char *content)
{
    json_t *c = content ? s_json(content) : NULL;
    int rc = kb_output_feed(o, type, c);
    json_decref(c);
    return rc;
}

static json_t *
s_out(kb_output_t *o, size_t i)
{
    return json_array_get(kb_output_outputs(o), i);
}

static const char *
s_str(json_t *obj, const char *key)
{
    return json_string_value(json_object_get(obj, key));
}

static const char *
s_plain(json_t *out)
{
    return s_str(json_object_get(out, "data"), "text/plain");
}

static size_t
s_count(kb_output_t *o)
{
    return json_array_size(kb_output_outputs(o));
}

static int
s_replay(const char *path, bool merge)
{
    json_error_t e;
    json_t *execs = json_load_file(path, 0, &e);
    if (!json_is_array(execs)) {
        fprintf(stderr, "%s: %s\n", path, e.text);
        return 2;
    }
    kb_displays_t *d = kb_displays_new();
    json_t *all = json_array();
    size_t i, j;
    json_t *msgs, *m;
    json_array_foreach(execs, i, msgs)
    {
        kb_output_t *o = kb_output_new(d, 0);
        kb_output_merge_streams(o, merge);
        json_array_foreach(msgs, j, m) kb_output_feed(
            o, json_string_value(json_array_get(m, 0)), json_array_get(m, 1));
        json_array_append(all, kb_output_outputs(o));
        kb_output_destroy(&o);
    }
    char *text = json_dumps(all, JSON_COMPACT);
    puts(text);
    free(text);
    json_decref(all);
    json_decref(execs);
    kb_displays_destroy(&d);
    return 0;
}

int
main(int argc, char **argv)
{
    if (argc == 2 || (argc == 3 && !strcmp(argv[2], "--merge-streams")))
        return s_replay(argv[1], argc == 3);

    kb_displays_t *d = kb_displays_new();
    kb_output_t *o = kb_output_new(d, 0);

    /* --- streams as nbclient 0.7 keeps them ---------------------------- */
    s_feed(o, "stream", "{\"name\": \"stdout\", \"text\": \"a\"}");
    s_feed(o, "stream", "{\"name\": \"stdout\", \"text\": \"b\\n\"}");
    is_int(s_count(o), 2,
           "by default each stream message is its own output, as nbclient "
           "0.7 stores them");
    is_str(s_str(s_out(o, 1), "text"), "b\n", "... in order");
    kb_output_destroy(&o);

    /* --- streams, merged ----------------------------------------------- */
    o = kb_output_new(d, 0);
    kb_output_merge_streams(o, true);
    s_feed(o, "status", "{\"execution_state\": \"busy\"}");
    s_feed(o, "execute_input", "{\"code\": \"x\", \"execution_count\": 7}");
    s_feed(o, "stream", "{\"name\": \"stdout\", \"text\": \"a\"}");
    s_feed(o, "stream", "{\"name\": \"stdout\", \"text\": \"b\\n\"}");
    s_feed(o, "stream", "{\"name\": \"stderr\", \"text\": \"warn\\n\"}");
    s_feed(o, "stream", "{\"name\": \"stdout\", \"text\": \"c\"}");
    is_int(s_count(o), 3,
           "consecutive same-name streams coalesce; interleaved stdout and "
           "stderr stay separate");
    is_str(s_str(s_out(o, 0), "text"), "ab\n",
           "coalesced stream text is the concatenation in order");
    is_str(s_str(s_out(o, 1), "name"), "stderr", "stderr is its own output");
    is_str(s_str(s_out(o, 2), "text"), "c",
           "stdout after stderr starts a new output");
    is_int(json_object_size(s_out(o, 0)), 3,
           "a stream output has exactly output_type, name, text");
    is_int(kb_output_execution_count(o), 7,
           "execute_input records the execution count");
    s_feed(o, "stream", "{\"name\": \"stdout\", \"text\": \"d\"}");
    is_str(s_str(s_out(o, 2), "text"), "cd",
           "reading the outputs does not stop later coalescing");

    /* --- execute_result, transient, error ----------------------------- */
    s_feed(o, "execute_result",
           "{\"data\": {\"text/plain\": \"42\"}, \"metadata\": {}, "
           "\"execution_count\": 7, \"transient\": {}}");
    json_t *r = s_out(o, 3);
    is_str(s_str(r, "output_type"), "execute_result",
           "execute_result is stored");
    is_int(json_integer_value(json_object_get(r, "execution_count")), 7,
           "execute_result keeps its execution_count");
    ok(json_object_get(r, "transient") == NULL,
       "transient is not stored (nbformat has no such field)");
    s_feed(o, "error",
           "{\"ename\": \"ValueError\", \"evalue\": \"bad\", \"traceback\": "
           "[\"\\u001b[31mline 1\", \"ValueError: bad\"]}");
    r = s_out(o, 4);
    ok(!strcmp(s_str(r, "ename"), "ValueError") &&
           !strcmp(s_str(r, "evalue"), "bad") &&
           json_array_size(json_object_get(r, "traceback")) == 2,
       "an error keeps ename, evalue and the traceback lines");
    s_feed(o, "display_data",
           "{\"data\": {\"image/png\": \"iVBO\", \"text/plain\": \"<Fig>\"}}");
    r = s_out(o, 5);
    ok(json_is_object(json_object_get(r, "metadata")) &&
           json_object_size(r) == 3,
       "display_data without metadata is stored with metadata {}");
    kb_output_destroy(&o);

    /* --- display_id across executions --------------------------------- */
    kb_output_t *e1 = kb_output_new(d, 0);
    s_feed(e1, "display_data",
           "{\"data\": {\"text/plain\": \"v1\"}, \"metadata\": {}, "
           "\"transient\": {\"display_id\": \"d1\"}}");
    json_t *cell1 = json_incref(kb_output_outputs(e1)); /* a notebook cell */
    ok(json_object_get(json_array_get(cell1, 0), "transient") == NULL,
       "display_data with a display_id is stored without transient");
    is_int(kb_displays_count(d, "d1"), 1, "a display_id registers its output");
    kb_output_destroy(&e1);

    kb_output_t *e2 = kb_output_new(d, 0);
    is_int(s_feed(e2, "update_display_data",
                  "{\"data\": {\"text/plain\": \"v2\"}, \"metadata\": "
                  "{\"m\": 1}, \"transient\": {\"display_id\": \"d1\"}}"),
           0, "update_display_data is accepted");
    is_str(s_plain(json_array_get(cell1, 0)), "v2",
           "update_display_data updates an output of an earlier execution");
    ok(json_object_get(json_object_get(json_array_get(cell1, 0), "metadata"),
                       "m") != NULL,
       "update_display_data replaces metadata too");
    is_int(s_count(e2), 0, "update_display_data itself is never appended");
    s_feed(e2, "display_data",
           "{\"data\": {\"text/plain\": \"v3\"}, \"metadata\": {}, "
           "\"transient\": {\"display_id\": \"d1\"}}");
    is_str(s_plain(json_array_get(cell1, 0)), "v3",
           "display_data with a known display_id updates earlier outputs");
    ok(s_count(e2) == 1 && !strcmp(s_plain(s_out(e2, 0)), "v3"),
       "display_data with a known display_id is also appended");
    is_int(kb_displays_count(d, "d1"), 2, "both outputs are registered");
    s_feed(e2, "update_display_data",
           "{\"data\": {\"text/plain\": \"v4\"}, \"metadata\": {}, "
           "\"transient\": {\"display_id\": \"d1\"}}");
    ok(!strcmp(s_plain(json_array_get(cell1, 0)), "v4") &&
           !strcmp(s_plain(s_out(e2, 0)), "v4"),
       "an update reaches every output with that display_id");
    is_int(s_feed(e2, "update_display_data",
                  "{\"data\": {\"text/plain\": \"x\"}, \"metadata\": {}, "
                  "\"transient\": {\"display_id\": \"nope\"}}"),
           0, "an update for an unknown display_id is ignored quietly");
    is_int(kb_output_malformed(e2), 0,
           "an unknown display_id is not malformed");

    /* Clearing drops this execution's registrations, not earlier ones. */
    s_feed(e2, "clear_output", "{\"wait\": false}");
    is_int(s_count(e2), 0, "clear_output(wait=False) clears at once");
    is_int(kb_displays_count(d, "d1"), 1,
           "clearing drops the cleared outputs' display registrations");
    s_feed(e2, "update_display_data",
           "{\"data\": {\"text/plain\": \"v5\"}, \"metadata\": {}, "
           "\"transient\": {\"display_id\": \"d1\"}}");
    is_str(s_plain(json_array_get(cell1, 0)), "v5",
           "earlier executions' displays survive a later clear");
    kb_output_destroy(&e2);
    json_decref(cell1);

    /* --- clear_output(wait=True) progress loop ------------------------ */
    o = kb_output_new(d, 0);
    s_feed(o, "stream", "{\"name\": \"stdout\", \"text\": \"start\\n\"}");
    for (int i = 0; i < 10; i++) {
        char msg[64];
        s_feed(o, "clear_output", "{\"wait\": true}");
        is_int(s_count(o), 1,
               i == 0 ? "clear_output(wait=True) waits for "
                        "the next output"
                      : "(progress step %d keeps one output)",
               i);
        snprintf(msg, sizeof msg,
                 "{\"name\": \"stdout\", \"text\": \"%d%%\\n\"}", i * 10);
        s_feed(o, "stream", msg);
    }
    ok(s_count(o) == 1 && !strcmp(s_str(s_out(o, 0), "text"), "90%\n"),
       "a clear_output(wait=True) progress loop leaves only the last output");
    s_feed(o, "clear_output", "{\"wait\": true}");
    s_feed(o, "update_display_data",
           "{\"data\": {\"text/plain\": \"x\"}, \"metadata\": {}, "
           "\"transient\": {\"display_id\": \"d1\"}}");
    is_int(s_count(o), 1,
           "update_display_data does not trigger a pending clear");
    s_feed(o, "display_data",
           "{\"data\": {\"text/plain\": \"img\"}, \"metadata\": {}, "
           "\"transient\": {\"display_id\": \"p\"}}");
    ok(s_count(o) == 1 && !strcmp(s_plain(s_out(o, 0)), "img"),
       "a pending clear runs before a display_data");
    kb_output_destroy(&o);

    /* --- malformed messages ------------------------------------------- */
    o = kb_output_new(d, 0);
    s_feed(o, "stream", "{\"name\": \"stdout\", \"text\": \"ok\"}");
    static const char *const bad[][2] = {
        {"stream", "{\"name\": \"stdout\"}"},
        {"stream", "{\"name\": \"stdout\", \"text\": 5}"},
        {"stream", "{\"text\": \"no name\"}"},
        {"stream", "[1, 2]"},
        {"stream", NULL},
        {"display_data", "{\"data\": [1]}"},
        {"display_data", "{\"metadata\": {}}"},
        {"display_data", "{\"data\": {\"text/plain\": 5}}"},
        {"display_data", "{\"data\": {}, \"metadata\": []}"},
        {"display_data", "{\"data\": {}, \"transient\": {\"display_id\": 3}}"},
        {"execute_result", "{\"data\": {}, \"metadata\": {}}"},
        {"execute_result", "{\"data\": {}, \"metadata\": {}, "
                           "\"execution_count\": 99999999999}"},
        {"update_display_data", "{\"data\": {}, \"metadata\": {}}"},
        {"error", "{\"ename\": \"E\", \"evalue\": \"v\"}"},
        {"error", "{\"ename\": \"E\", \"evalue\": \"v\", \"traceback\": [1]}"},
        {"clear_output", "{\"wait\": \"soon\"}"},
        {"execute_input", "{\"code\": \"x\", \"execution_count\": \"7\"}"},
    };
    size_t nbad = sizeof bad / sizeof *bad;
    int all_refused = 1;
    for (size_t i = 0; i < nbad; i++)
        if (s_feed(o, bad[i][0], bad[i][1]) != -1) {
            diag("  accepted: %s %s", bad[i][0], bad[i][1]);
            all_refused = 0;
        }
    ok(all_refused, "each malformed message is refused");
    is_int(kb_output_malformed(o), nbad, "each malformed message is counted");
    ok(s_count(o) == 1 && !strcmp(s_str(s_out(o, 0), "text"), "ok"),
       "malformed messages leave the outputs as they were");
    s_feed(o, "comm_msg", "{\"data\": 1}");
    s_feed(o, "status", "{}");
    s_feed(o, "shutdown_reply", "{}");
    s_feed(o, "no_such_type", "[]");
    ok(kb_output_malformed(o) == nbad && s_count(o) == 1,
       "status, comm_* and unknown types are ignored, not counted");
    s_feed(o, "display_data",
           "{\"data\": {\"application/vnd.custom+json\": {\"a\": [1]}, "
           "\"application/json\": 5}, \"metadata\": {}}");
    is_int(s_count(o), 2, "JSON mime types may hold any JSON value");
    kb_output_destroy(&o);

    /* --- limits ------------------------------------------------------- */
    o = kb_output_new(d, 100);
    kb_output_merge_streams(o, true);
    char text[64];
    memset(text, 'x', 60);
    text[60] = '\0';
    char msg[256];
    snprintf(msg, sizeof msg, "{\"name\": \"stdout\", \"text\": \"%s\"}", text);
    s_feed(o, "stream", msg);
    ok(!kb_output_truncated(o), "output under the cap is kept whole");
    s_feed(o, "stream", msg);
    ok(kb_output_truncated(o), "output past the cap sets truncated");
    ok(kb_output_bytes(o) <= 100, "stored bytes never pass the cap (%zu)",
       kb_output_bytes(o));
    size_t kept = json_string_length(json_object_get(s_out(o, 0), "text"));
    ok(kept > 60 && kept < 120,
       "the stream that passes the cap keeps the prefix that fits (%zu)", kept);
    is_int(s_count(o), 2, "one marker output follows the kept output");
    ok(!strcmp(s_str(s_out(o, 1), "name"), "stderr") &&
           strstr(s_str(s_out(o, 1), "text"),
                  "output truncated after 100 bytes; raise --max-output"),
       "the marker is a stderr stream that says what happened and what to "
       "do");
    s_feed(o, "stream", "{\"name\": \"stderr\", \"text\": \"more\"}");
    s_feed(o, "display_data", "{\"data\": {\"text/plain\": \"x\"}}");
    s_feed(o, "clear_output", "{\"wait\": false}");
    ok(s_count(o) == 2 && !strstr(s_str(s_out(o, 1), "text"), "more"),
       "after truncation nothing more is stored or cleared");
    kb_output_destroy(&o);

    o = kb_output_new(d, 100);
    s_feed(o, "stream", "{\"name\": \"stderr\", \"text\": \"warning\"}");
    s_feed(o, "display_data",
           "{\"data\": {\"image/png\": "
           "\"0123456789012345678901234567890123456789012345678901234567890123"
           "456789012345678901234567890123456789\"}}");
    ok(kb_output_truncated(o) && s_count(o) == 1,
       "a display bigger than the room left is dropped whole");
    ok(!strncmp(s_str(s_out(o, 0), "text"), "warning\n[jupyter-agent:", 23),
       "the marker joins a trailing stderr stream on a new line");
    kb_output_destroy(&o);

    o = kb_output_new(d, 50);
    /* 30 two-byte characters: the cut must not split one. */
    char utf[256] = "{\"name\": \"stdout\", \"text\": \"";
    for (int i = 0; i < 30; i++)
        strcat(utf, "\xc3\xa9");
    strcat(utf, "\"}");
    s_feed(o, "stream", utf);
    const char *t = s_str(s_out(o, 0), "text");
    ok(t && strlen(t) % 2 == 0 && strlen(t) > 0,
       "a cut stream never splits a UTF-8 character");
    kb_output_destroy(&o);

    o = kb_output_new(d, 0);
    kb_output_merge_streams(o, true);
    for (int i = 0; i < 200000; i++)
        s_feed(o, "stream", "{\"name\": \"stdout\", \"text\": \"y\"}");
    is_int(json_string_length(json_object_get(s_out(o, 0), "text")), 200000,
           "merged, 200000 one-byte writes coalesce into one output");
    kb_output_destroy(&o);

    o = kb_output_new(d, 0);
    s_feed(o, "display_data",
           "{\"data\": {\"text/plain\": \"a long first version\"}, "
           "\"metadata\": {}, \"transient\": {\"display_id\": \"sz\"}}");
    size_t before = kb_output_bytes(o);
    s_feed(o, "update_display_data",
           "{\"data\": {\"text/plain\": \"v2\"}, \"metadata\": {}, "
           "\"transient\": {\"display_id\": \"sz\"}}");
    ok(kb_output_bytes(o) < before,
       "an update that shrinks a display lowers the stored bytes");
    kb_output_destroy(&o);

    /* --- status and the exec --json shape ----------------------------- */
    o = kb_output_new(NULL, 0);
    json_t *j = kb_output_to_json(o);
    ok(!strcmp(s_str(j, "status"), "ok") &&
           json_is_null(json_object_get(j, "execution_count")) &&
           json_is_array(json_object_get(j, "outputs")) &&
           json_is_integer(json_object_get(j, "duration_ms")) &&
           !json_object_get(j, "error") && json_object_size(j) == 4,
       "exec --json: status, execution_count (null when unknown), outputs, "
       "duration_ms");
    json_decref(j);
    s_feed(o, "error",
           "{\"ename\": \"E\", \"evalue\": \"v\", "
           "\"traceback\": []}");
    j = kb_output_to_json(o);
    is_str(s_str(j, "status"), "error",
           "an error output without a reply means status error");
    json_decref(j);
    is_int(s_feed(o, "execute_reply",
                  "{\"status\": \"ok\", \"execution_count\": 3}"),
           0, "execute_reply is accepted by feed");
    is_str(kb_output_status(o), "ok", "execute_reply records the status");
    is_int(kb_output_execution_count(o), 3,
           "execute_reply records the execution count");
    kb_output_set_status(o, "aborted");
    kb_output_set_duration_ms(o, 1234);
    j = kb_output_to_json(o);
    ok(!strcmp(s_str(j, "status"), "error") &&
           json_integer_value(json_object_get(j, "duration_ms")) == 1234 &&
           json_integer_value(json_object_get(j, "execution_count")) == 3,
       "an aborted reply is reported as error, with count and duration");
    ok(json_object_get(j, "outputs") == kb_output_outputs(o),
       "exec --json shares the output list");
    json_decref(j);
    kb_output_set_interrupted(o, true);
    j = kb_output_to_json(o);
    is_str(s_str(j, "status"), "interrupted", "interrupted wins over error");
    json_decref(j);
    kb_output_set_timed_out(o, true);
    j = kb_output_to_json(o);
    is_str(s_str(j, "status"), "timeout", "timeout wins over interrupted");
    json_decref(j);
    kb_output_set_died(o, "kernel killed by SIGKILL (out of memory?)");
    j = kb_output_to_json(o);
    ok(!strcmp(s_str(j, "status"), "died") &&
           !strcmp(s_str(j, "error"),
                   "kernel killed by SIGKILL (out of memory?)"),
       "a dead kernel gives status died and the reason under error");
    json_decref(j);
    ok(kb_output_died(o) && kb_output_timed_out(o) && kb_output_interrupted(o),
       "the flags read back as set");
    kb_output_destroy(&o);
    ok(o == NULL, "destroy nulls the caller's pointer");
    kb_output_destroy(&o);
    kb_displays_destroy(&d);
    kb_displays_destroy(&d);
    ok(d == NULL, "destroy accepts NULL twice");
    return done_testing();
}
