/*
 * Files through the kernel itself (kernel-bridge/kb_files.h), the way a
 * remote kernel gets them: a real ipykernel, sandboxed and then a plain
 * process, with nothing but execute requests between us and its files.
 *   - text, binary, empty and multi-MiB files go in and come back out
 *     byte for byte (SHA-256 compared on both sides), across chunk edges;
 *   - a name with spaces and non-ASCII letters survives both ways;
 *   - in: the name rules, the size cap, never over an existing file, no
 *     temporary file left behind;
 *   - out: subdirectories and empty directories come out, exec bits
 *     do not, and symlinks, FIFOs and dot-files are skipped and named
 *     exactly as the local copy-out does;
 *   - one file into memory (kb_files_read): byte for byte, and refused
 *     over its cap, missing, a symlink, through a link leading out, a
 *     FIFO, a directory, '..' or absolute.
 */
#include "../tap.h"
#include "../tools/kernel_run.h"

#include "common/xalloc.h"
#include "kernel-bridge/kb_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char s_tmp[] = "/tmp/ja-kbfiles-XXXXXX";

static void
s_write(const char *path, const unsigned char *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, data, len) != (ssize_t)len)
        abort();
    close(fd);
}

static unsigned char *
s_read(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return NULL;
    struct stat st;
    fstat(fd, &st);
    unsigned char *b = xmalloc((size_t)st.st_size + 1);
    size_t got = 0;
    ssize_t n;
    while ((n = read(fd, b + got, (size_t)st.st_size - got)) > 0)
        got += (size_t)n;
    close(fd);
    *len = got;
    return b;
}

static void
s_sha(char out[65], const unsigned char *b, size_t n)
{
    unsigned char h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(h, b, n);
    sodium_bin2hex(out, 65, h, sizeof h);
}

/* Entries directly in `dir`, "." and ".." left out. */
static int
s_count(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            n++;
    closedir(d);
    return n;
}

struct s_file {
    const char *name;
    size_t len;
    unsigned char *data;
};

static void
s_round_trip(kb_kernel_t *k, const char *label, const char *kdir)
{
    err_t err = {0};
    kb_files_opts_t fo;
    kb_files_opts_init(&fo);
    fo.kernel_dir = kdir;
    fo.chunk_bytes = 256 * 1024;

    char *where = kb_files_kernel_dir(k, &fo, &err);
    ok(where && where[0] == '/', "%s: the kernel names its directory (%s)",
       label, where ? where : err.text);
    free(where);

    /* Text, binary (every byte value), empty, 3 MiB + 7 (chunk edges). */
    struct s_file files[5] = {
        {"notes.txt", 0, NULL},
        {"bytes.bin", 4096, NULL},
        {"empty", 0, NULL},
        {"big.dat", 3 * 1024 * 1024 + 7, NULL},
        {"Quarterly report \xc3\xa9t\xc3\xa9 \xe2\x9c\x93.csv", 0, NULL},
    };
    files[0].data = (unsigned char *)xstrdup("line one\nline two\n");
    files[0].len = strlen((char *)files[0].data);
    files[1].data = xmalloc(files[1].len);
    for (size_t i = 0; i < files[1].len; i++)
        files[1].data[i] = (unsigned char)(i * 7 + (i >> 8));
    files[2].data = xmalloc(1);
    files[3].data = xmalloc(files[3].len);
    randombytes_buf(files[3].data, files[3].len);
    files[4].data = (unsigned char *)xstrdup("quarter,revenue\nQ1,10\n");
    files[4].len = strlen((char *)files[4].data);

    for (int i = 0; i < 5; i++) {
        char *host = xasprintf("%s/in-%d", s_tmp, i);
        s_write(host, files[i].data, files[i].len);
        int rc = kb_files_push(k, host, files[i].name, 64 << 20, &fo, &err);
        ok(rc == 0, "%s: '%s' (%zu bytes) goes into the kernel", label,
           files[i].name, files[i].len);
        if (rc)
            diag("%s", err.text);
        /* The kernel's own view of it: size and SHA-256. */
        char want[65];
        s_sha(want, files[i].data, files[i].len);
        json_t *jn = json_string(files[i].name);
        char *lit = json_dumps(jn, JSON_ENCODE_ANY);
        json_decref(jn);
        char *code = xasprintf(
            "import hashlib, os\n"
            "p = os.path.join(%s%s%s, %s)\n"
            "print(hashlib.sha256(open(p, 'rb').read()).hexdigest())",
            kdir ? "'" : "", kdir ? kdir : "os.getcwd()", kdir ? "'" : "", lit);
        char *got = kernel_run_text(k, code, 60000);
        ok(got && strncmp(got, want, 64) == 0,
           "%s: in the kernel, '%s' has the host file's SHA-256", label,
           files[i].name);
        free(got);
        free(code);
        free(lit);
        free(host);
    }

    /* Never over an existing file; nothing half-copied left behind. */
    char *host0 = xasprintf("%s/in-0", s_tmp);
    int rc = kb_files_push(k, host0, "notes.txt", 64 << 20, &fo, &err);
    ok(rc < 0 && strstr(err.text, "already exists"),
       "%s: a file of the same name is never replaced (%s)", label, err.text);
    rc = kb_files_push(k, host0, ".bashrc", 64 << 20, &fo, &err);
    ok(rc < 0 && err.code == ERR_USAGE && strstr(err.text, "'.'"),
       "%s: a dot-name is refused before anything is sent", label);
    rc = kb_files_push(k, host0, "../escape", 64 << 20, &fo, &err);
    ok(rc < 0 && err.code == ERR_USAGE, "%s: a name with '/' is refused",
       label);
    rc = kb_files_push(k, host0, "small-cap", 4, &fo, &err);
    ok(rc < 0 && err.code == ERR_USAGE && strstr(err.text, "--disk"),
       "%s: a file over the cap is refused and the cap's flag named", label);
    free(host0);

    /* Directories, an exec bit, and what copy-out refuses. */
    char *code = xasprintf(
        "import os\n"
        "os.chdir(%s%s%s)\n"
        "os.makedirs('sub/deeper', exist_ok=True)\n"
        "os.makedirs('emptydir', exist_ok=True)\n"
        "open('sub/deeper/x.txt', 'w').write('deep')\n"
        "open('sub/.hidden', 'w').write('dot')\n"
        "open('run.sh', 'w').write('#!/bin/sh\\n')\n"
        "os.chmod('run.sh', 0o755)\n"
        "open('.bashrc', 'w').write('evil')\n"
        "os.symlink('/etc/passwd', 'link')\n"
        "os.mkfifo('fifo')\n"
        "open(b'bad\\xff', 'w').write('latin-1 name')\n"
        "print(sorted(n for n in os.listdir('.') if n.startswith('.ju')))",
        kdir ? "'" : "", kdir ? kdir : "os.getcwd()", kdir ? "'" : "");
    char *got = kernel_run_text(k, code, 60000);
    ok(got && strcmp(got, "[]\n") == 0,
       "%s: no temporary file is left in the kernel's directory", label);
    free(got);
    free(code);

    json_t *list = kb_files_list(k, ".", 100, &fo, &err);
    ok(list && json_array_size(list) == 7,
       "%s: the listing shows the 7 regular files (%zu)", label,
       list ? json_array_size(list) : 0);
    json_decref(list);

    char *dest = xasprintf("%s/out-%s", s_tmp, label);
    sb_files_out_opts_t oo;
    sb_files_out_opts_init(&oo, 64 << 20);
    size_t n = 0;
    rc = kb_files_copy_out(k, ".", dest, &oo, &fo, &n, &err);
    ok(rc < 0 && strstr(err.text, "copied the rest") &&
           strstr(err.text, "'.bashrc' (dot-file; never copied out)") &&
           strstr(err.text, "'link' (symbolic link)") &&
           strstr(err.text, "'fifo' (FIFO)") &&
           strstr(err.text, "'bad\\\\xff' (name not UTF-8)"),
       "%s: copy-out skips the dot-file, symlink, FIFO and a name that is "
       "not UTF-8, and names them",
       label);
    diag("%s", err.text);
    ok(n == 10, "%s: 7 files and 3 directories come out (%zu)", label, n);
    for (int i = 0; i < 5; i++) {
        char *p = xasprintf("%s/%s", dest, files[i].name);
        size_t len = 0;
        unsigned char *b = s_read(p, &len);
        char a[65], w[65];
        if (b)
            s_sha(a, b, len);
        s_sha(w, files[i].data, files[i].len);
        ok(b && len == files[i].len && strcmp(a, w) == 0,
           "%s: '%s' comes back byte for byte (%zu bytes, SHA-256 %.12s)",
           label, files[i].name, len, b ? a : "-");
        free(b);
        free(p);
    }
    struct stat st;
    char *p = xasprintf("%s/sub/deeper/x.txt", dest);
    ok(stat(p, &st) == 0 && st.st_size == 4, "%s: sub/deeper/x.txt came out",
       label);
    free(p);
    p = xasprintf("%s/emptydir", dest);
    ok(stat(p, &st) == 0 && S_ISDIR(st.st_mode) && s_count(p) == 0,
       "%s: an empty directory comes out too", label);
    free(p);
    p = xasprintf("%s/run.sh", dest);
    ok(stat(p, &st) == 0 && (st.st_mode & 07777) == 0644,
       "%s: an executable comes out 0644 (no exec bit without keep_exec)",
       label);
    free(p);
    ok(s_count(dest) == 8,
       "%s: DIR holds exactly the copied entries, no temporary files (%d)",
       label, s_count(dest));

    /* The same DIR again: refused, as a local copy-out refuses it. */
    rc = kb_files_copy_out(k, ".", dest, &oo, &fo, &n, &err);
    ok(rc < 0 && err.code == ERR_USAGE && strstr(err.text, "not empty"),
       "%s: an existing non-empty DIR is refused", label);

    /* Only a subdirectory, as ask copies out/. */
    char *dest2 = xasprintf("%s/sub-%s", s_tmp, label);
    rc = kb_files_copy_out(k, "sub", dest2, &oo, &fo, &n, &err);
    p = xasprintf("%s/deeper/x.txt", dest2);
    ok(rc < 0 && stat(p, &st) == 0,
       "%s: copying out 'sub' puts its files at DIR/deeper/x.txt", label);
    ok(strstr(err.text, "skipped 1 unsafe entry: 'sub/.hidden' (dot-file") !=
           NULL,
       "%s: and names what it skipped by its path in the kernel, as a local "
       "copy-out of 'sub' does (%s)",
       label, err.text);
    free(p);
    free(dest2);

    /* The byte cap of a copy-out holds. */
    dest2 = xasprintf("%s/cap-%s", s_tmp, label);
    sb_files_out_opts_init(&oo, 1 << 20);
    rc = kb_files_copy_out(k, ".", dest2, &oo, &fo, &n, &err);
    ok(rc < 0 && strstr(err.text, "1048576-byte cap"),
       "%s: a copy-out stops at its byte cap (%s)", label, err.text);
    p = xasprintf("%s/big.dat", dest2);
    ok(stat(p, &st) != 0, "%s: the file over the cap is not there", label);
    free(p);
    free(dest2);
    free(dest);

    /* One file into memory (kb_files_read), as mcp --gateway's read_file. */
    for (int i = 0; i < 5; i++) {
        char *data = NULL;
        size_t len = 0;
        rc = kb_files_read(k, files[i].name, 4 << 20, &data, &len, &fo, &err);
        char a[65] = "-", w[65];
        if (rc == 0)
            s_sha(a, (unsigned char *)data, len);
        s_sha(w, files[i].data, files[i].len);
        ok(rc == 0 && len == files[i].len && strcmp(a, w) == 0 &&
               data[len] == '\0',
           "%s: kb_files_read gives '%s' back byte for byte (%zu bytes, "
           "SHA-256 %.12s)",
           label, files[i].name, len, a);
        if (rc)
            diag("%s", err.text);
        free(data);
    }
    char *data = NULL;
    size_t len = 0;
    rc = kb_files_read(k, "sub/deeper/x.txt", 4 << 20, &data, &len, &fo, &err);
    ok(rc == 0 && len == 4 && memcmp(data, "deep", 4) == 0,
       "%s: kb_files_read reads a file in a subdirectory", label);
    free(data);
    code = xasprintf("import os\n"
                     "os.chdir(%s%s%s)\n"
                     "os.symlink('/etc', 'etclink')\n"
                     "print('ok')",
                     kdir ? "'" : "", kdir ? kdir : "os.getcwd()",
                     kdir ? "'" : "");
    got = kernel_run_text(k, code, 60000);
    free(got);
    free(code);
    static const struct {
        const char *path;
        size_t max;
        int code;
        const char *why;
        const char *guarantee;
    } refused[] = {
        {"big.dat", 1 << 20, ERR_IO, "over the limit of 1048576 bytes",
         "a file over the cap"},
        {"nope.txt", 4 << 20, ERR_IO, "No such file", "a missing file"},
        {"link", 4 << 20, ERR_IO, "link is a symbolic link", "a symbolic link"},
        {"etclink/passwd", 4 << 20, ERR_IO, "leads outside",
         "a path through a link leading out of the directory"},
        {"fifo", 4 << 20, ERR_IO, "is a FIFO", "a FIFO"},
        {"sub", 4 << 20, ERR_IO, "is a directory", "a directory"},
        {"../notes.txt", 4 << 20, ERR_USAGE, "'..'", "a '..' path"},
        {"/etc/passwd", 4 << 20, ERR_USAGE, "absolute", "an absolute path"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        data = (char *)"unset";
        rc = kb_files_read(k, refused[i].path, refused[i].max, &data, &len, &fo,
                           &err);
        ok(rc < 0 && data == NULL && err.code == refused[i].code &&
               strstr(err.text, refused[i].why),
           "%s: kb_files_read refuses %s with a clear error (%s)", label,
           refused[i].guarantee, err.text);
    }
    for (int i = 0; i < 5; i++)
        free(files[i].data);
}

int
main(void)
{
    if (!mkdtemp(s_tmp) || sodium_init() < 0)
        return 1;
    err_t err = {0};
    kb_kernel_opts_t kopts = {.launcher = kernel_run_sandbox,
                              .interrupt_grace_ms = 3000};
    kb_kernel_t *k = kb_kernel_start(&kopts, &err);
    if (ok(k != NULL, "a sandboxed ipykernel starts"))
        s_round_trip(k, "sandbox", NULL);
    else
        diag("%s", err.text);
    kb_kernel_destroy(&k);

    /* A plain kernel, its directory given explicitly. */
    char *kdir = xasprintf("%s/plain-kernel", s_tmp);
    mkdir(kdir, 0700);
    kb_kernel_opts_t popts = {.interrupt_grace_ms = 3000};
    k = kb_kernel_start(&popts, &err);
    if (ok(k != NULL, "a plain ipykernel starts"))
        s_round_trip(k, "plain", kdir);
    else
        diag("%s", err.text);
    kb_kernel_destroy(&k);
    free(kdir);
    sb_files_remove_tree(s_tmp);
    return done_testing();
}
