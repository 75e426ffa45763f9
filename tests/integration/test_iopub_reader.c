/* Our own iopub reader (kb_zmtp_sub) with a real sandboxed ipykernel: a
 * caller that is slow per message still gets every output and the idle
 * status. Nothing but our thread reads the socket now, so while a hook
 * takes its time the kernel's PUB queue (1000 messages, then it drops)
 * must not fill: the reader reads ahead into its own buffer. */
#include "../tap.h"
#include "../tools/kernel_run.h"

#include "common/clock.h"

#include <string.h>
#include <time.h>

#define MESSAGES 6000
#define SLOW_FOR 3000

typedef struct seen {
    long display; /* display_data received */
    long next;    /* the number the next one should carry */
    bool in_order;
} seen_t;

/* 1 ms per message for the first SLOW_FOR: the kernel publishes 2-3
 * messages a millisecond, so without read-ahead thousands would pile up
 * on the kernel's side. */
static void
s_slow(const kb_msg_t *msg, void *arg)
{
    seen_t *s = arg;
    if (strcmp(kb_msg_type(msg), "display_data"))
        return;
    const char *text = json_string_value(json_object_get(
        json_object_get(kb_msg_content(msg), "data"), "text/plain"));
    if (!text || atol(text) != s->next)
        s->in_order = false;
    s->next++;
    if (s->display++ < SLOW_FOR)
        nanosleep(&(struct timespec){0, 1000000}, NULL);
}

int
main(void)
{
    err_t err = {0};
    kb_kernel_opts_t kopts = {.kernel_name = "python3",
                              .launcher = kernel_run_sandbox};
    kb_kernel_t *k = kb_kernel_start(&kopts, &err);
    if (!ok(k != NULL, "a sandboxed ipykernel starts")) {
        diag("%s", err.text);
        return done_testing();
    }
    char code[256];
    snprintf(code, sizeof code,
             "from IPython.display import display\n"
             "for i in range(%d): display({'text/plain': str(i)}, raw=True)",
             MESSAGES);
    seen_t seen = {0, 0, true};
    kb_exec_hooks_t hooks = {.on_iopub = s_slow, .arg = &seen};
    kb_output_t *out = kb_output_new(NULL, 0);
    const kb_wire_stats_t *st = kb_client_stats(kb_kernel_client(k));
    uint64_t refused0 = st->bad_signature + st->malformed;
    int64_t t0 = clock_mono_ms();
    int rc = kb_kernel_execute(k, code, NULL, 120000, out, &hooks, &err);
    int64_t took = clock_mono_ms() - t0;
    ok(rc == 0, "the cell completes: its idle status arrived (%lld ms)",
       (long long)took);
    if (rc)
        diag("%s", err.text);
    is_int(seen.display, MESSAGES,
           "every display_data reached a hook that took 1 ms for each of "
           "the first %d",
           SLOW_FOR);
    ok(seen.in_order, "in the order they were sent");
    is_int(json_array_size(kb_output_outputs(out)), MESSAGES,
           "and every one is stored");
    is_int(st->bad_signature + st->malformed - refused0, 0, "none was refused");
    kb_output_destroy(&out);

    char *text = kernel_run_text(k, "print('after')", 30000);
    is_str(text, "after\n", "the next cell runs as usual");
    free(text);
    ok(kb_kernel_restart(k, &err) == 0, "the kernel restarts");
    text = kernel_run_text(k, "print('restarted')", 30000);
    is_str(text, "restarted\n",
           "iopub of the restarted kernel is read (the reader reconnected)");
    free(text);
    kb_kernel_destroy(&k);
    return done_testing();
}
