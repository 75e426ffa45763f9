# kb_files (kb_files.c): the kernel's side of files in and out, for
# kernels that share no filesystem with the host. The host executes this
# source into a fresh module, sys.modules['_jupyter_agent_files'] (when a
# "hello" does not answer with this version's SOURCE_ID), and
# then calls run(JSON[, BASE64]) once per request, each evaluated as the
# user expression of a silent execute_request with empty code.
# Every call answers with exactly one display_data of type MIME:
# {"r": the request's id, ...} or {"r": id, "error": text}.
#
# The host trusts none of it: it checks each answer (names, sizes, every
# chunk's and every file's SHA-256, caps) as coming from a hostile kernel.
# The checks here (chunk hashes, offsets, the whole file's size and hash
# on the way in) catch a transport that corrupts or drops data.

import base64
import hashlib
import json
import os
import secrets
import stat

MIME = 'application/x-jupyter-agent-files+json'

_puts = {}  # token -> {'fd', 'tmp', 'final', 'size', 'off', 'h'}
_gets = {}  # token -> fd


def _answer(rid, obj):
    from IPython.display import publish_display_data
    obj['r'] = rid
    publish_display_data({MIME: obj})


def _dir(req):
    return os.path.abspath(req.get('dir') or os.getcwd())


def _check_name(name):
    # The host's rule (sb_files_check_name), checked again here.
    if not isinstance(name, str) or not name or name.startswith('.') \
            or '/' in name or len(name.encode()) > 255 \
            or any(ord(c) < 0x20 or ord(c) == 0x7f for c in name):
        raise ValueError('refused file name %r' % (name,))


def _drop_put(t):
    p = _puts.pop(t, None)
    if p is not None:
        os.close(p['fd'])
        try:
            os.unlink(p['tmp'])
        except OSError:
            pass


def _op_hello(req):
    # SOURCE_ID: set by the host when it installed this module.
    return {'dir': _dir(req), 'id': globals().get('SOURCE_ID')}


def _op_put_begin(req):
    name = req['name']
    _check_name(name)
    size = req['size']
    d = _dir(req)
    final = os.path.join(d, name)
    if os.path.lexists(final):
        raise FileExistsError('%s already exists in %s' % (name, d))
    # A dot-name the host's copy-out never takes, next to the final name
    # (so the rename stays on one filesystem).
    tmp = os.path.join(d, '.jupyter-agent-%s.part' % secrets.token_hex(8))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                 | os.O_CLOEXEC, 0o644)
    os.fchmod(fd, 0o644)
    t = secrets.token_hex(8)
    _puts[t] = {'fd': fd, 'tmp': tmp, 'final': final, 'size': size,
                'off': 0, 'h': hashlib.sha256()}
    return {'t': t}


def _op_put_chunk(req):
    t = req['t']
    p = _puts[t]
    try:
        if req['o'] != p['off']:
            raise ValueError('chunk at offset %d, expected %d'
                             % (req['o'], p['off']))
        raw = base64.b64decode(req['b'], validate=True)
        if hashlib.sha256(raw).hexdigest() != req['h']:
            raise ValueError('chunk at offset %d: SHA-256 does not match'
                             % p['off'])
        if p['off'] + len(raw) > p['size']:
            raise ValueError('more bytes than announced (%d)' % p['size'])
        view = memoryview(raw)
        while view:
            view = view[os.write(p['fd'], view):]
        p['h'].update(raw)
        p['off'] += len(raw)
        return {'n': p['off']}
    except BaseException:
        _drop_put(t)
        raise


def _op_put_end(req):
    t = req['t']
    p = _puts[t]
    try:
        digest = p['h'].hexdigest()
        if p['off'] != req['size'] or p['off'] != p['size']:
            raise ValueError('got %d bytes, expected %d'
                             % (p['off'], req['size']))
        if digest != req['h']:
            raise ValueError('SHA-256 of the whole file does not match')
        # Never over an existing entry: a hard link fails on EEXIST; where
        # the filesystem has no hard links, rename after a last look.
        try:
            os.link(p['tmp'], p['final'])
        except FileExistsError:
            raise
        except OSError:
            if os.path.lexists(p['final']):
                raise FileExistsError(p['final'])
            os.rename(p['tmp'], p['final'])
        return {'size': p['off'], 'h': digest, 'path': p['final']}
    finally:
        _drop_put(t)


def _op_put_abort(req):
    _drop_put(req['t'])
    return {}


def _kind(mode):
    if stat.S_ISLNK(mode):
        return 'symbolic link'
    if stat.S_ISDIR(mode):
        return 'directory'
    if stat.S_ISFIFO(mode):
        return 'FIFO'
    if stat.S_ISSOCK(mode):
        return 'socket'
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return 'device'
    return 'special file'


def _op_ls(req):
    base = os.path.join(_dir(req), req.get('rel') or '.')
    limit = int(req['max'])
    depth = int(req['depth'])
    out = []
    todo = [('', 0)]
    while todo and len(out) <= limit:
        rel, level = todo.pop()
        subdirs = []
        with os.scandir(os.path.join(base, rel) if rel else base) as it:
            names = sorted(e.name for e in it)
        for name in names:
            if len(out) > limit:
                break
            p = rel + '/' + name if rel else name
            try:
                p.encode('utf-8')
            except UnicodeEncodeError:
                # Not valid UTF-8 on disk: JSON cannot carry it.
                out.append({'p': os.fsencode(p).decode('utf-8',
                                                       'backslashreplace'),
                            'k': 'name not UTF-8'})
                continue
            try:
                st = os.lstat(os.path.join(base, p))
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                out.append({'p': p, 'd': True})
                if not name.startswith('.') and level < depth:
                    subdirs.append((p, level + 1))
            elif stat.S_ISREG(st.st_mode):
                out.append({'p': p, 's': st.st_size,
                            'x': bool(st.st_mode & stat.S_IXUSR)})
            else:
                out.append({'p': p, 'k': _kind(st.st_mode)})
        todo.extend(reversed(subdirs))
    return {'e': out[:limit + 1]}


def _op_get_open(req):
    d = _dir(req)
    path = os.path.join(d, req['p'])
    # Only what lies in the directory: a symbolic link on the way that
    # leads out of it is refused, as is one at the end (O_NOFOLLOW too).
    real, base = os.path.realpath(path), os.path.realpath(d)
    if os.path.islink(path):
        raise ValueError('%s is a symbolic link' % req['p'])
    if os.path.commonpath([real, base]) != base or real == base:
        raise ValueError('%s leads outside %s' % (req['p'], d))
    fd = os.open(path,
                 os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError('%s is a %s' % (req['p'], _kind(st.st_mode)))
        if req.get('max') is not None and st.st_size > req['max']:
            # Not hashed for nothing: the host refuses it anyway.
            raise ValueError('%s is %d bytes, over the limit of %d bytes'
                             % (req['p'], st.st_size, req['max']))
        h = hashlib.sha256()
        size = 0
        while True:
            b = os.pread(fd, 1 << 20, size)
            if not b:
                break
            h.update(b)
            size += len(b)
    except BaseException:
        os.close(fd)
        raise
    t = secrets.token_hex(8)
    _gets[t] = fd
    return {'t': t, 's': size, 'h': h.hexdigest()}


def _op_get_chunk(req):
    b = os.pread(_gets[req['t']], int(req['n']), int(req['o']))
    return {'o': req['o'], 'b': base64.b64encode(b).decode('ascii'),
            'h': hashlib.sha256(b).hexdigest()}


def _op_get_close(req):
    fd = _gets.pop(req['t'], None)
    if fd is not None:
        os.close(fd)
    return {}


_OPS = {
    'hello': _op_hello,
    'put_begin': _op_put_begin,
    'put_chunk': _op_put_chunk,
    'put_end': _op_put_end,
    'put_abort': _op_put_abort,
    'ls': _op_ls,
    'get_open': _op_get_open,
    'get_chunk': _op_get_chunk,
    'get_close': _op_get_close,
}


def run(text, data=None):
    req = json.loads(text)
    if data is not None:
        req['b'] = data
    rid = req.get('r')
    try:
        out = _OPS[req['op']](req)
    except Exception as e:
        out = {'error': '%s: %s' % (type(e).__name__, e)}
    _answer(rid, out)
