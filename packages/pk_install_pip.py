# pip inside the sandbox, from the kernel's own Python: install the pinned,
# hash-checked requirements `req` from the wheel directory `wheels` into
# `target`, put `target` on sys.path, print pip's result as one JSON line
# after `mark`. Embedded into jupyter-agent (packages/pk_pysrc.h); the installer
# appends `_ja_install(REQ, WHEELS, TARGET, MARK)` and runs it in a private
# namespace.
import importlib
import json
import os
import subprocess
import sys
import tempfile


def _ja_install(req, wheels, target, mark):
    fd, path = tempfile.mkstemp(prefix='jupyter-agent-req-', suffix='.txt')
    with os.fdopen(fd, 'w') as f:
        f.write(req)
    env = {k: v for k, v in os.environ.items() if k != 'PYTHONPATH'}
    try:
        r = subprocess.run([sys.executable, '-m', 'pip', 'install',
            '--isolated', '--no-index', '--find-links', wheels,
            '--only-binary', ':all:', '--require-hashes', '--no-cache-dir',
            '--disable-pip-version-check', '--no-input',
            '--no-warn-script-location', '--upgrade', '--target', target,
            '-r', path], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=env)
    finally:
        os.unlink(path)
    if r.returncode == 0:
        if target not in sys.path:
            sys.path.insert(0, target)
        importlib.invalidate_caches()
    print(mark + json.dumps({'rc': r.returncode,
        'stdout': r.stdout[-16000:], 'stderr': r.stderr[-16000:]}))
