# Unsandboxed sessions: list the kernel's working directory from inside
# (ag_tools.c), at most 500 regular files, no dot-directories, as one JSON
# line. Runs silently in the user's namespace, so it imports nothing at
# module level; the caller appends `__ja_ls(); del __ja_ls`.


def __ja_ls():
    import os, json
    out = []
    for root, dirs, files in os.walk('.'):
        dirs[:] = sorted(d for d in dirs if not d.startswith('.'))
        for f in sorted(files):
            p = os.path.join(root, f)
            if os.path.isfile(p) and not os.path.islink(p):
                out.append({'path': os.path.relpath(p),
                            'size': os.path.getsize(p)})
            if len(out) >= 500:
                break
        if len(out) >= 500:
            break
    print(json.dumps({'cwd': os.getcwd(), 'files': out}))
