import json, os, socket, sys
def _ja_warm():
    conn, preload = sys.argv[1], sys.argv[2]
    ctl = socket.socket(fileno=0)
    def say(o):
        ctl.send(json.dumps(o).encode())
    if sys.path and sys.path[0] == '':
        del sys.path[0]
    try:
        import importlib.util
        spec = importlib.util.find_spec('ipykernel_launcher')
        sys.argv = [spec.origin if spec else 'ipykernel_launcher', '-f', conn]
        from ipykernel.kernelapp import IPKernelApp
        from tornado import ioloop
        app = IPKernelApp.instance()
        # History in memory, as nbclient starts kernels: the box's home is
        # gone at the end anyway, and `run` promises nbclient's kernel.
        app.initialize(['-f', conn, '--HistoryManager.hist_file=:memory:'])
        mi = sys.modules.get('matplotlib_inline.backend_inline')
        if mi:  # imported before the shell existed (a factory)
            mi._enable_matplotlib_integration()
        if preload:
            exec(compile(preload, '<preload>', 'exec'),
                 {'__name__': '__ja_preload__'})
        app.shell.run_cell('pass', store_history=False, silent=True)
    except BaseException as e:
        say({'error': 'warm-up failed: %s: %s' % (type(e).__name__, e)})
        os._exit(1)
    loop = ioloop.IOLoop.current()
    def done(reply):
        loop.remove_handler(0)
        say(reply)
        # Replace fd 0 in one step: if it were closed first, a socket
        # zmq opens meanwhile (the session connecting) could take fd 0
        # and then be overwritten.
        fd = os.open(os.devnull, os.O_RDONLY)
        os.dup2(fd, 0)
        os.close(fd)
        ctl.detach()
    def on_ctl(fd, events):
        try:
            data = ctl.recv(1 << 20)
        except OSError:
            data = b''
        if not data:
            os._exit(0)
        try:
            req = json.loads(data)
            if req.get('op') != 'rekey':
                raise ValueError('unknown request')
            path = req['connection_file']
            with open(path) as f:
                info = json.load(f)
            chans = ('shell', 'iopub', 'stdin', 'control', 'hb')
            # The host's file (in the read-only run dir), not the kernel's
            # own copy in the socket dir: same transport, ip and ports.
            same = (info['transport'] == app.transport
                    and info['ip'] == app.ip
                    and all(info[c + '_port'] == getattr(app, c + '_port')
                            for c in chans)
                    and info.get('signature_scheme') ==
                    app.session.signature_scheme)
            if not same:
                raise ValueError('the connection file does not match '
                                 'the warm kernel')
            key = info['key'].encode()
            if not key:
                raise ValueError('empty key')
            app.session.key = key
            env = req.get('env') or {}
            pp = [d for d in env.get('PYTHONPATH', '').split(':') if d]
            for i, d in enumerate(pp):
                if d not in sys.path:
                    sys.path.insert(i, d)
            os.environ.update(env)
        except Exception as e:
            done({'error': 'hand-over refused: %s: %s' %
                  (type(e).__name__, e)})
            os._exit(1)
        done({'ok': True})
    loop.add_handler(0, on_ctl, ioloop.IOLoop.READ)
    loop.add_callback(say, {'ready': True, 'pid': os.getpid()})
    app.start()
_ja_warm()
