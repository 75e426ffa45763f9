/*
 * replay_main: lets a libFuzzer target run without libFuzzer.
 *
 * Each tests/fuzz/NAME.c defines LLVMFuzzerTestOneInput. Linked with this
 * file it becomes a TAP program that feeds it every file of the corpus
 * directories (or files) named on the command line, one test line per input.
 * A crash, an ASan report or a hang is a failure of the whole program.
 */
#include "../tap.h"

#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
s_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void
s_replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!ok(f != NULL, "corpus file %s is readable", path))
        return;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *data = malloc(n > 0 ? (size_t)n : 1);
    size_t got = fread(data, 1, n > 0 ? (size_t)n : 0, f);
    fclose(f);
    LLVMFuzzerTestOneInput(data, got);
    free(data);
    ok(1, "parser survives %s (%zu bytes)", path, got);
}

static void
s_replay_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!ok(d != NULL, "corpus directory %s exists", dir))
        return;
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        names = realloc(names, (n + 1) * sizeof *names);
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        names[n] = malloc(len);
        snprintf(names[n], len, "%s/%s", dir, e->d_name);
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, s_cmp);
    for (size_t i = 0; i < n; i++) {
        s_replay_file(names[i]);
        free(names[i]);
    }
    free(names);
}

int
main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode))
            s_replay_dir(argv[i]);
        else
            s_replay_file(argv[i]);
    }
    /* An empty input must be handled too. */
    LLVMFuzzerTestOneInput((const uint8_t *)"", 0);
    ok(1, "parser survives empty input");
    return done_testing();
}
