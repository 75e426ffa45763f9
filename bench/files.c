/*
 * files: files through the kernel itself (kernel-bridge/kb_files.h), the
 * way a remote kernel gets them, measured on a local kernel.
 *
 *   files [-l plain|sandbox] [-m MIB] [-c CHUNK_KIB] [-r RUNS]
 *
 * Each run pushes a MIB-MiB file of random bytes into the kernel
 * (kb_files_push) and copies the kernel's directory back out
 * (kb_files_copy_out into a new directory), timing each; the file that
 * comes back is compared with the one sent (SHA-256). Printed: the median
 * seconds and MiB/s of each direction, and the local copy for scale
 * (sb_files_copy_out of the same bytes from a directory fd: what a
 * sandboxed session's copy-out costs without the kernel in the way).
 */
#include "bench/bench.h"
#include "common/clock.h"
#include "common/xalloc.h"
#include "kernel-bridge/kb_files.h"
#include "kernel-bridge/launch/kb_launch_sandbox.h"

#include <fcntl.h>
#include <sodium.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static kb_launcher_t *
s_sandbox(void *arg, err_t *err)
{
    (void)arg;
    return kb_launcher_sandbox_new(NULL, err);
}

static int
s_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int
s_sha_file(const char *path, unsigned char h[crypto_hash_sha256_BYTES])
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    crypto_hash_sha256_state st;
    crypto_hash_sha256_init(&st);
    unsigned char buf[1 << 16];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        crypto_hash_sha256_update(&st, buf, (unsigned long long)n);
    close(fd);
    crypto_hash_sha256_final(&st, h);
    return 0;
}

int
main(int argc, char **argv)
{
    const char *launcher = "sandbox";
    long mib = 50, chunk_kib = 1024, runs = 3;
    int opt;
    while ((opt = getopt(argc, argv, "l:m:c:r:")) != -1) {
        if (opt == 'l')
            launcher = optarg;
        else if (opt == 'm')
            mib = bench_int_arg(optarg, mib);
        else if (opt == 'c')
            chunk_kib = bench_int_arg(optarg, chunk_kib);
        else if (opt == 'r')
            runs = bench_int_arg(optarg, runs);
    }
    if (sodium_init() < 0)
        return 1;
    err_t err = {0};
    char tmp[] = "/tmp/ja-bench-files-XXXXXX";
    if (!mkdtemp(tmp))
        return 1;
    char *src = xasprintf("%s/src", tmp);
    char *kdir = xasprintf("%s/kernel-dir", tmp);
    mkdir(src, 0700);
    mkdir(kdir, 0700);
    char *in = xasprintf("%s/data.bin", src);
    size_t len = (size_t)mib << 20;
    unsigned char *data = xmalloc(len);
    randombytes_buf(data, len);
    int fd = open(in, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, data, len) != (ssize_t)len)
        return 1;
    close(fd);
    free(data);
    unsigned char want[crypto_hash_sha256_BYTES];
    s_sha_file(in, want);

    bool plain = strcmp(launcher, "plain") == 0;
    kb_kernel_opts_t kopts = {.launcher = plain ? NULL : s_sandbox};
    kb_kernel_t *k = kb_kernel_start(&kopts, &err);
    if (!k)
        return bench_fail("starting the kernel", &err);
    kb_files_opts_t fo;
    kb_files_opts_init(&fo);
    fo.chunk_bytes = (size_t)chunk_kib * 1024;
    fo.kernel_dir = plain ? kdir : NULL;
    double *push = xcalloc((size_t)runs, sizeof *push);
    double *pull = xcalloc((size_t)runs, sizeof *pull);
    double *local = xcalloc((size_t)runs, sizeof *local);
    int64_t u0, s0, u1, s1;
    bench_cpu_us(&u0, &s0);
    for (long r = 0; r < runs; r++) {
        char name[32];
        snprintf(name, sizeof name, "data-%ld.bin", r);
        int64_t t0 = clock_mono_us();
        if (kb_files_push(k, in, name, (uint64_t)len * 2, &fo, &err) < 0)
            return bench_fail("push", &err);
        int64_t t1 = clock_mono_us();
        char *out = xasprintf("%s/out-%ld", tmp, r);
        sb_files_out_opts_t oo;
        sb_files_out_opts_init(&oo, (uint64_t)len * 4);
        /* The kernel's directory holds this run's file only. */
        char *code =
            xasprintf("import os\n"
                      "d = %s%s%s\n"
                      "[os.unlink(os.path.join(d, f)) for f in os.listdir(d)\n"
                      " if f.startswith('data-') and f != '%s']",
                      plain ? "'" : "", plain ? kdir : "os.getcwd()",
                      plain ? "'" : "", name);
        kb_output_t *o = kb_output_new(NULL, 1 << 20);
        kb_kernel_execute(k, code, NULL, 60000, o, NULL, &err);
        kb_output_destroy(&o);
        free(code);
        int64_t t2 = clock_mono_us();
        if (kb_files_copy_out(k, ".", out, &oo, &fo, NULL, &err) < 0)
            return bench_fail("pull", &err);
        int64_t t3 = clock_mono_us();
        char *back = xasprintf("%s/%s", out, name);
        unsigned char got[crypto_hash_sha256_BYTES];
        if (s_sha_file(back, got) < 0 || memcmp(got, want, sizeof got)) {
            err_set(&err, ERR_VERIFY, "%s differs from what was sent", back);
            return bench_fail("verify", &err);
        }
        /* The local copy-out of the same bytes, for scale. */
        char *lout = xasprintf("%s/local-%ld", tmp, r);
        int sfd = open(src, O_RDONLY | O_DIRECTORY);
        int64_t t4 = clock_mono_us();
        if (sb_files_copy_out(sfd, ".", lout, &oo, NULL, &err) < 0)
            return bench_fail("local copy", &err);
        int64_t t5 = clock_mono_us();
        close(sfd);
        push[r] = (double)(t1 - t0) / 1e6;
        pull[r] = (double)(t3 - t2) / 1e6;
        local[r] = (double)(t5 - t4) / 1e6;
        fprintf(stderr, "run %ld: push %.3f s, pull %.3f s, local %.3f s\n", r,
                push[r], pull[r], local[r]);
        free(lout);
        free(back);
        free(out);
    }
    bench_cpu_us(&u1, &s1);
    qsort(push, (size_t)runs, sizeof *push, s_cmp);
    qsort(pull, (size_t)runs, sizeof *pull, s_cmp);
    qsort(local, (size_t)runs, sizeof *local, s_cmp);
    double mp = push[runs / 2], ml = pull[runs / 2], mc = local[runs / 2];
    bench_emit(json_pack(
        "{s:s, s:i, s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "launcher",
        launcher, "mib", (int)mib, "chunk_kib", (int)chunk_kib, "runs",
        (int)runs, "push_s", mp, "push_mib_s", (double)mib / mp, "pull_s", ml,
        "pull_mib_s", (double)mib / ml, "local_copy_s", mc, "local_copy_mib_s",
        (double)mib / mc, "client_cpu_s", (double)(u1 - u0 + s1 - s0) / 1e6));
    kb_kernel_destroy(&k);
    sb_files_remove_tree(tmp);
    free(push);
    free(pull);
    free(local);
    free(in);
    free(src);
    free(kdir);
    return 0;
}
