/*
 * Files arriving in pieces into a copy-out DIR (sandbox/sb_files.h:
 * sb_outdir_create, sb_outfile_*, sb_outdir_mkdir), the host side of
 * files out of a kernel that shares no filesystem with us. No kernel
 * here: the rules themselves.
 *   - a file is invisible under its name until committed, and an aborted
 *     one leaves nothing;
 *   - commit never replaces what appeared meanwhile;
 *   - names a copy-out refuses are refused and recorded, not created;
 *   - a symlink planted on the way is not followed;
 *   - byte, entry and depth caps hold, counting what is written, not what
 *     was announced.
 */
#include "../tap.h"

#include "common/xalloc.h"
#include "sandbox/sb_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char s_tmp[] = "/tmp/ja-outfile-XXXXXX";

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

static bool
s_exists(const char *dir, const char *rel)
{
    char *p = xasprintf("%s/%s", dir, rel);
    struct stat st;
    bool r = lstat(p, &st) == 0;
    free(p);
    return r;
}

static sb_outdir_t *
s_open(const char *name, uint64_t max_bytes, size_t max_entries, char **path)
{
    *path = xasprintf("%s/%s", s_tmp, name);
    sb_files_out_opts_t o;
    sb_files_out_opts_init(&o, max_bytes);
    if (max_entries)
        o.max_entries = max_entries;
    err_t err;
    sb_outdir_t *d = sb_outdir_open(*path, &o, &err);
    if (!d)
        diag("%s", err.text);
    return d;
}

int
main(void)
{
    if (!mkdtemp(s_tmp))
        return 1;
    err_t err = {0};
    char *path;
    sb_outdir_t *d = s_open("a", 1 << 20, 0, &path);
    sb_outfile_t *f = NULL;

    int r = sb_outdir_create(d, "sub/x.txt", NULL, 5, false, &f, &err);
    ok(r == 0 && f, "a file in a new subdirectory is started");
    ok(sb_outfile_write(f, "hel", 3, &err) == 0 &&
           sb_outfile_write(f, "lo", 2, &err) == 0,
       "it is written in pieces");
    ok(!s_exists(path, "sub/x.txt") && s_count(path) == 1,
       "until committed it is not there under its name");
    r = sb_outfile_commit(&f, &err);
    struct stat st;
    char *p = xasprintf("%s/sub/x.txt", path);
    ok(r == 0 && f == NULL && stat(p, &st) == 0 && st.st_size == 5 &&
           (st.st_mode & 07777) == 0644,
       "committed, it is there, whole, mode 0644");
    free(p);
    p = xasprintf("%s/sub", path);
    ok(s_count(p) == 1, "and no temporary file is left beside it");
    free(p);

    r = sb_outdir_create(d, "gone.txt", NULL, 5, false, &f, &err);
    sb_outfile_write(f, "abc", 3, &err);
    sb_outfile_abort(&f);
    ok(r == 0 && f == NULL && !s_exists(path, "gone.txt") && s_count(path) == 1,
       "an aborted file leaves nothing behind");

    /* Something appears under the name while the file is written. */
    r = sb_outdir_create(d, "race.txt", NULL, 3, false, &f, &err);
    sb_outfile_write(f, "new", 3, &err);
    p = xasprintf("%s/race.txt", path);
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd >= 0) {
        if (write(fd, "old", 3) != 3)
            diag("write failed");
        close(fd);
    }
    r = sb_outfile_commit(&f, &err);
    char buf[8] = "";
    fd = open(p, O_RDONLY);
    if (fd >= 0) {
        if (read(fd, buf, 3) != 3)
            diag("read failed");
        close(fd);
    }
    ok(r == 1 && strcmp(buf, "old") == 0,
       "commit never replaces a file that appeared meanwhile");
    free(p);
    p = xasprintf("%s/race.txt", path);
    unlink(p);
    free(p);

    /* Names a copy-out refuses. */
    const char *bad[] = {
        "../x",      "/etc/x", ".hidden",
        "a/.git/x",  "a//b",   "./a",
        "a/../../b", "",       "d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/f"};
    int refused = 0;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        r = sb_outdir_create(d, bad[i], NULL, 1, false, &f, &err);
        if (r == 1 && f == NULL)
            refused++;
        else
            diag("'%s' was not refused (%d)", bad[i], r);
        sb_outfile_abort(&f);
    }
    ok(refused == (int)(sizeof bad / sizeof *bad),
       "'..', absolute, dot, empty, '.' and 17-deep paths are refused");
    ok(s_count(path) == 1 && !s_exists(s_tmp, "x") && !s_exists(s_tmp, "b"),
       "and nothing was created for them, inside DIR or out");
    r = sb_outdir_report(d, 0, &err);
    ok(r < 0 && strstr(err.text, "skipped 10 unsafe entries") &&
           strstr(err.text, "'../x' ('..' leads outside"),
       "the report names them (%s)", err.text);
    r = sb_outdir_report(d, 0, &err);
    ok(r == 0, "and then forgets them");

    /* A symlink planted where a directory is expected. */
    p = xasprintf("%s/link", path);
    if (symlink(s_tmp, p) != 0)
        diag("symlink failed");
    free(p);
    r = sb_outdir_create(d, "link/y.txt", NULL, 1, false, &f, &err);
    ok(r == 1 && !s_exists(s_tmp, "y.txt"),
       "a path through a symlink in DIR is refused, not followed");
    sb_outdir_report(d, 0, NULL);

    r = sb_outdir_mkdir(d, "empty/inner", NULL, &err);
    p = xasprintf("%s/empty/inner", path);
    ok(r == 0 && stat(p, &st) == 0 && S_ISDIR(st.st_mode) &&
           (st.st_mode & 07777) == 0755,
       "directories are created 0755");
    free(p);
    r = sb_outdir_mkdir(d, "d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d", NULL, &err);
    ok(r == 1, "a 17th directory level is refused (as a local copy-out)");
    r = sb_outdir_mkdir(d, "e/e/e/e/e/e/e/e/e/e/e/e/e/e/e/e", NULL, &err);
    ok(r == 0, "16 levels are allowed");
    r = sb_outdir_create(d, "e/e/e/e/e/e/e/e/e/e/e/e/e/e/e/e/f", NULL, 1, false,
                         &f, &err);
    ok(r == 0, "and so is a file in the 16th");
    sb_outfile_abort(&f);
    sb_outdir_report(d, 0, NULL);
    sb_outdir_destroy(&d);
    free(path);

    /* Caps: bytes written count, not bytes announced. */
    d = s_open("caps", 10, 3, &path);
    r = sb_outdir_create(d, "big", NULL, 11, false, &f, &err);
    ok(r < 0 && strstr(err.text, "10-byte cap"),
       "a file announced over the byte cap is refused before writing");
    r = sb_outdir_create(d, "liar", NULL, 2, false, &f, &err);
    int w1 = sb_outfile_write(f, "0123456789", 10, &err);
    int w2 = sb_outfile_write(f, "X", 1, &err);
    ok(r == 0 && w1 == 0 && w2 < 0 && strstr(err.text, "10-byte cap"),
       "one announced as 2 bytes stops at the cap when it sends 11");
    sb_outfile_abort(&f);
    ok(s_count(path) == 0, "and is not kept");
    sb_outdir_destroy(&d);
    free(path);

    d = s_open("entries", 1 << 20, 3, &path);
    int made = 0;
    for (int i = 0; i < 4; i++) {
        char name[16];
        snprintf(name, sizeof name, "f%d", i);
        r = sb_outdir_create(d, name, NULL, 0, false, &f, &err);
        if (r == 0 && sb_outfile_commit(&f, &err) == 0)
            made++;
    }
    ok(made == 3 && strstr(err.text, "over the cap of 3"),
       "the entry cap stops the fourth file (%s)", err.text);
    sb_outdir_destroy(&d);
    free(path);

    /* keep_exec: 0755 only when asked. */
    sb_files_out_opts_t o;
    sb_files_out_opts_init(&o, 1 << 20);
    o.keep_exec = true;
    path = xasprintf("%s/exec", s_tmp);
    d = sb_outdir_open(path, &o, &err);
    r = sb_outdir_create(d, "run.sh", NULL, 0, true, &f, &err);
    sb_outfile_commit(&f, &err);
    p = xasprintf("%s/run.sh", path);
    ok(r == 0 && stat(p, &st) == 0 && (st.st_mode & 07777) == 0755,
       "with keep_exec an executable comes out 0755");
    free(p);
    sb_outdir_destroy(&d);
    free(path);

    sb_files_remove_tree(s_tmp);
    return done_testing();
}
