/*
 * clientcpu: the client's own CPU cost per iopub message.
 *
 *   clientcpu -f CONNECTION_FILE [-m MESSAGES]
 *
 * Attaches to a running kernel and runs one cell that emits MESSAGES
 * display_data messages (20 000 by default). Every one of them is received,
 * its signature verified, parsed and applied to the output model (which
 * stores it as an nbformat output), as in `exec` and the agent loop. The
 * on_iopub hook counts them by type, so the driver can check nothing was
 * lost.
 *
 * CPU is getrusage(RUSAGE_SELF) around the execution: user + system time of
 * this process and all its threads (libzmq's I/O thread included), never
 * the kernel's; cpu_main_thread_us is the calling thread's share (the rest
 * is libzmq's I/O thread). Prints {"wall_us", "cpu_user_us", "cpu_sys_us",
 * "iopub_msgs", "display_data", "outputs_stored", "dropped", ...}.
 */
#include "bench/bench.h"
#include "common/clock.h"
#include "kernel-bridge/kb_kernel.h"

#include <string.h>
#include <unistd.h>

/* What the on_iopub hook saw. */
typedef struct counts {
    long iopub;   /* every iopub message of the execution */
    long display; /* display_data messages among them */
} counts_t;

static void
s_on_iopub(const kb_msg_t *msg, void *arg)
{
    counts_t *c = arg;
    c->iopub++;
    if (strcmp(kb_msg_type(msg), "display_data") == 0)
        c->display++;
}

int
main(int argc, char **argv)
{
    const char *conn = NULL;
    long msgs = 20000;
    int opt;
    while ((opt = getopt(argc, argv, "f:m:")) != -1) {
        if (opt == 'f')
            conn = optarg;
        else if (opt == 'm')
            msgs = bench_int_arg(optarg, msgs);
        else
            return ERR_USAGE;
    }
    if (!conn) {
        fprintf(stderr, "usage: clientcpu -f CONNECTION_FILE [-m N]\n");
        return ERR_USAGE;
    }
    err_t err = {0};
    kb_kernel_t *k = kb_kernel_attach(conn, false, &err);
    if (!k)
        return bench_fail("attach", &err);
    char code[256];
    snprintf(code, sizeof code,
             "from IPython.display import display\n"
             "for i in range(%ld): display({'text/plain': str(i)}, raw=True)",
             msgs);
    counts_t counts = {0};
    kb_exec_hooks_t hooks = {.on_iopub = s_on_iopub, .arg = &counts};
    kb_output_t *out = kb_output_new(NULL, 0);
    const kb_wire_stats_t *st = kb_client_stats(kb_kernel_client(k));
    uint64_t dropped0 = st->bad_signature + st->malformed;
    int64_t u0, s0, u1, s1, tu0, ts0, tu1, ts1;
    bench_cpu_us_of(RUSAGE_THREAD, &tu0, &ts0);
    bench_cpu_us(&u0, &s0);
    int64_t t0 = clock_mono_us();
    int r = kb_kernel_execute(k, code, NULL, 0, out, &hooks, &err);
    int64_t t1 = clock_mono_us();
    bench_cpu_us(&u1, &s1);
    bench_cpu_us_of(RUSAGE_THREAD, &tu1, &ts1);
    int rc = 0;
    if (r != 0) {
        rc = bench_fail("execute", &err);
        goto out;
    }
    bench_emit(json_pack(
        "{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:s?}", "client",
        "jupyter-agent (C, kb_kernel_execute)", "messages_requested",
        (json_int_t)msgs, "wall_us", (json_int_t)(t1 - t0), "cpu_user_us",
        (json_int_t)(u1 - u0), "cpu_sys_us", (json_int_t)(s1 - s0),
        "cpu_main_thread_us", (json_int_t)(tu1 - tu0 + ts1 - ts0), "iopub_msgs",
        (json_int_t)counts.iopub, "display_data", (json_int_t)counts.display,
        "outputs_stored", (json_int_t)json_array_size(kb_output_outputs(out)),
        "dropped", (json_int_t)(st->bad_signature + st->malformed - dropped0),
        "status", kb_output_status(out)));
out:
    kb_output_destroy(&out);
    kb_kernel_destroy(&k);
    return rc;
}
