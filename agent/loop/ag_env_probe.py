# The tool loop's first look at a session's kernel (ag_loop.c): Python
# version, working directory, versions of common data packages, and
# /mnt/data/out created when the session is sandboxed. Runs silently in the
# user's namespace, so it imports nothing at module level; the caller
# appends `__ja_env(SANDBOXED); del __ja_env`.


def __ja_env(sandboxed):
    import os, sys, json, platform
    # The analyst's stack (tools/packages.mk: DEB_BOX_PYTHON),
    # by distribution name; one scan of the installed distributions.
    names = ['numpy', 'pandas', 'matplotlib', 'scipy', 'seaborn',
             'scikit-learn', 'statsmodels', 'openpyxl', 'XlsxWriter',
             'xlrd', 'odfpy', 'pyarrow', 'polars', 'sympy', 'Pillow',
             'tabulate', 'plotly', 'networkx', 'requests', 'SQLAlchemy',
             'xarray', 'numexpr', 'Bottleneck', 'h5py', 'python-docx',
             'pypdf', 'reportlab', 'Markdown', 'beautifulsoup4', 'lxml',
             'chardet', 'tqdm', 'joblib', 'pytz', 'python-dateutil']
    # Names and versions from the metadata directories' names
    # (NAME-VERSION.dist-info or .egg-info): a directory listing per path
    # entry, not a metadata read per package (~10x faster).
    found = {}
    for p in sys.path:
        try:
            entries = os.scandir(p or '.')
        except OSError:
            continue
        with entries:
            for e in entries:
                base, dot, ext = e.name.rpartition('.')
                if ext not in ('dist-info', 'egg-info') or '-' not in base:
                    continue
                n, _, v = base.partition('-')
                v = v.split('-py')[0]
                found.setdefault(n.lower().replace('-', '_'), v)
    pk = {}
    for n in names:
        v = found.get(n.lower().replace('-', '_'))
        if v:
            pk[n] = v
    if sandboxed:
        try:
            os.makedirs('/mnt/data/out', exist_ok=True)
        except OSError:
            pass
    print(json.dumps({'python': platform.python_version(),
                      'cwd': os.getcwd(), 'packages': pk}))
