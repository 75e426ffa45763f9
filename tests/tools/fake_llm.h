/*
 * fake_llm.h: start tests/tools/fake_llm_server.py from a C test.
 *
 *   fake_llm_t srv;
 *   if (fake_llm_start(&srv, "[{\"reply\": {\"text\": \"hi\"}}]") == 0) {
 *       setenv("OPENAI_BASE_URL", srv.openai_base, 1);
 *       ...
 *       json_t *reqs = fake_llm_requests(&srv);   // what the client sent
 *       fake_llm_stop(&srv);
 *   }
 *
 * The script format is documented at the top of fake_llm_server.py. The
 * server runs under $JUPYTER_AGENT_PYTHON (set by tests/run) or
 * /usr/bin/python3; the script is found at $FAKE_LLM_SERVER or
 * tests/tools/fake_llm_server.py relative to the current directory (tests
 * run from the repository root). Files live in a fresh temporary directory
 * removed by fake_llm_stop. Header-only; needs jansson.
 */
#ifndef TESTS_TOOLS_FAKE_LLM_H
#define TESTS_TOOLS_FAKE_LLM_H

#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct fake_llm {
    pid_t pid;               /* the server process, 0 when not running */
    int port;                /* its port on 127.0.0.1 */
    char dir[64];            /* temporary directory holding the files */
    char script[128];        /* dir/script.json */
    char log[128];           /* dir/requests.jsonl */
    char openai_base[64];    /* "http://127.0.0.1:PORT/v1" */
    char anthropic_base[64]; /* "http://127.0.0.1:PORT" */
} fake_llm_t;

/* Start a server playing `script_json`. Returns 0, or -1 (with a message
 * on stderr) when it could not start. */
static inline int
fake_llm_start(fake_llm_t *s, const char *script_json)
{
    memset(s, 0, sizeof *s);
    snprintf(s->dir, sizeof s->dir, "/tmp/fake_llm.XXXXXX");
    if (!mkdtemp(s->dir)) {
        perror("fake_llm: mkdtemp");
        return -1;
    }
    snprintf(s->script, sizeof s->script, "%s/script.json", s->dir);
    snprintf(s->log, sizeof s->log, "%s/requests.jsonl", s->dir);
    FILE *f = fopen(s->script, "w");
    if (!f || fputs(script_json, f) < 0 || fclose(f) != 0) {
        perror("fake_llm: write script");
        return -1;
    }
    const char *py = getenv("JUPYTER_AGENT_PYTHON");
    const char *srv = getenv("FAKE_LLM_SERVER");
    if (!py || !*py)
        py = "/usr/bin/python3";
    if (!srv || !*srv)
        srv = "tests/tools/fake_llm_server.py";
    int fds[2];
    if (pipe(fds) < 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execl(py, py, srv, "--script", s->script, "--log", s->log,
              (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    s->pid = pid;
    char line[32] = "";
    size_t n = 0;
    struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
    while (n + 1 < sizeof line && poll(&pfd, 1, 15000) > 0) {
        ssize_t r = read(fds[0], line + n, 1);
        if (r <= 0 || line[n] == '\n')
            break;
        n++;
    }
    line[n] = '\0';
    close(fds[0]);
    s->port = atoi(line);
    if (s->port <= 0) {
        fprintf(stderr, "fake_llm: %s %s did not print a port\n", py, srv);
        kill(pid, SIGTERM);
        waitpid(pid, NULL, 0);
        s->pid = 0;
        return -1;
    }
    snprintf(s->openai_base, sizeof s->openai_base, "http://127.0.0.1:%d/v1",
             s->port);
    snprintf(s->anthropic_base, sizeof s->anthropic_base, "http://127.0.0.1:%d",
             s->port);
    return 0;
}

/* The whole request log as text (caller frees), "" when empty. */
static inline char *
fake_llm_log_text(const fake_llm_t *s)
{
    FILE *f = fopen(s->log, "r");
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (f) {
        char buf[4096];
        size_t r;
        while ((r = fread(buf, 1, sizeof buf, f)) > 0)
            fwrite(buf, 1, r, m);
        fclose(f);
    }
    fclose(m);
    return text;
}

/* Every request received so far, as a JSON array of {n, method, path,
 * headers, body} (new reference; never NULL). */
static inline json_t *
fake_llm_requests(const fake_llm_t *s)
{
    json_t *out = json_array();
    FILE *f = fopen(s->log, "r");
    char *line = NULL;
    size_t cap = 0;
    while (f && getline(&line, &cap, f) > 0) {
        json_t *j = json_loads(line, 0, NULL);
        if (j)
            json_array_append_new(out, j);
    }
    free(line);
    if (f)
        fclose(f);
    return out;
}

/* Stop the server and remove its files. Safe to call twice. */
static inline void
fake_llm_stop(fake_llm_t *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGTERM);
        waitpid(s->pid, NULL, 0);
        s->pid = 0;
    }
    if (s->dir[0]) {
        unlink(s->script);
        unlink(s->log);
        rmdir(s->dir);
        s->dir[0] = '\0';
    }
}

#endif
