/* gvisor_pause: pause with memory under --engine gvisor against the
 * kernel's memory (issue 31's benchmark). For each size in
 * GVPAUSE_MIB (default "100 500"): a session's kernel fills a numpy array
 * of that many MiB, then ag_session_pause_memory (runsc checkpoint) and
 * ag_session_resume_memory plus the first result (`a[0] + a[-1]`) are
 * timed. Prints one JSON object: per size, pause_ms, resume_ms (to the
 * first result), image_mib, and ratios against E2B's anchors (~4 s per
 * GiB to pause, ~1 s to resume). Needs root and runsc; never asserts. */
#include "agent/session/ag_pause_memory.h"
#include "bench.h"
#include "common/clock.h"
#include "common/xalloc.h"
#include "kernel-bridge/kb_kernel.h"
#include "sandbox/sb_engine.h"

#include <sodium.h>
#include <unistd.h>

static int
s_run(kb_kernel_t *k, const char *code, err_t *err)
{
    kb_output_t *out = kb_output_new(NULL, 1 << 16);
    int rc = kb_kernel_execute(k, code, NULL, 600000, out, NULL, err);
    kb_output_destroy(&out);
    return rc;
}

int
main(void)
{
    err_t err = {0};
    char *runsc = sb_gvisor_find_runsc(&err);
    if (!runsc || geteuid() != 0 || sodium_init() < 0) {
        printf("{\"skipped\": \"--engine gvisor needs runsc and root\"}\n");
        return 0;
    }
    free(runsc);
    setenv("JUPYTER_AGENT_ENGINE", "gvisor", 1);
    const char *sizes = getenv("GVPAUSE_MIB");
    char *list = xstrdup(sizes && *sizes ? sizes : "100 500");
    char tmp[] = "/tmp/ja-gvpause-XXXXXX";
    if (!mkdtemp(tmp))
        return ERR_IO;
    json_t *rows = json_array();
    for (char *save = NULL, *t = strtok_r(list, " ", &save); t;
         t = strtok_r(NULL, " ", &save)) {
        long mib = strtol(t, NULL, 10);
        ag_session_opts_t o;
        ag_session_opts_init(&o);
        o.warm = AG_WARM_COLD;
        o.policy.memory_bytes = (uint64_t)(mib + 1024) << 20;
        ag_session_t *s = ag_session_start(&o, &err);
        json_t *row = json_pack("{s:I}", "mib", (json_int_t)mib);
        char *code = xasprintf("import numpy as np\n"
                               "a = np.full(%ld * 131072, 7, dtype=np.int64)\n",
                               mib);
        if (!s || s_run(ag_session_kernel(s), code, &err) < 0) {
            json_object_set_new(row, "error", json_string(err.text));
            goto next;
        }
        int64_t t0 = clock_mono_ms();
        ag_mem_pause_t *p = ag_session_pause_memory(s, tmp, &err);
        int64_t pause_ms = clock_mono_ms() - t0;
        if (!p) {
            json_object_set_new(row, "error", json_string(err.text));
            goto next;
        }
        double image_mib = (double)ag_mem_pause_bytes(p) / (1 << 20);
        t0 = clock_mono_ms();
        if (ag_session_resume_memory(s, &p, &err) < 0 ||
            s_run(ag_session_kernel(s), "a[0] + a[-1]", &err) < 0) {
            ag_mem_pause_release(&p);
            json_object_set_new(row, "error", json_string(err.text));
            goto next;
        }
        int64_t resume_ms = clock_mono_ms() - t0;
        double e2b_pause_ms = 4000.0 * (double)mib / 1024.0;
        json_object_set_new(row, "pause_ms", json_integer(pause_ms));
        json_object_set_new(row, "resume_ms", json_integer(resume_ms));
        json_object_set_new(row, "image_mib", json_real(image_mib));
        json_object_set_new(row, "pause_vs_e2b",
                            json_real((double)pause_ms / e2b_pause_ms));
        json_object_set_new(row, "resume_vs_e2b",
                            json_real((double)resume_ms / 1000.0));
        fprintf(stderr,
                "gvisor pause %ld MiB: pause %lld ms (%.2fx E2B's 4 s/GiB), "
                "image %.0f MiB, resume to first result %lld ms (%.2fx "
                "E2B's 1 s)\n",
                mib, (long long)pause_ms, (double)pause_ms / e2b_pause_ms,
                image_mib, (long long)resume_ms, (double)resume_ms / 1000.0);
    next:
        json_array_append_new(rows, row);
        free(code);
        ag_session_destroy(&s);
        ag_session_opts_release(&o);
    }
    json_t *outj =
        json_pack("{s:s,s:o}", "bench", "gvisor_pause", "rows", rows);
    char *text = json_dumps(outj, JSON_COMPACT);
    printf("%s\n", text);
    free(text);
    json_decref(outj);
    free(list);
    rmdir(tmp);
    return 0;
}
