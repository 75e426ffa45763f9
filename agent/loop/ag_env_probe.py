# The tool loop's first look at a session's kernel (ag_loop.c): Python
# version, working directory, versions of common data packages, and
# /mnt/data/out created when the session is sandboxed. Runs silently in the
# user's namespace, so it imports nothing at module level; the caller
# appends `__ja_env(SANDBOXED); del __ja_env`.


def __ja_env(sandboxed):
    import os, json, platform
    from importlib import metadata
    names = ['numpy', 'pandas', 'matplotlib', 'scipy', 'seaborn',
             'scikit-learn', 'statsmodels', 'openpyxl', 'xlrd',
             'pyarrow', 'polars', 'sympy', 'Pillow', 'tabulate',
             'plotly', 'networkx']
    pk = {}
    for n in names:
        try:
            pk[n] = metadata.version(n)
        except Exception:
            pass
    if sandboxed:
        try:
            os.makedirs('/mnt/data/out', exist_ok=True)
        except OSError:
            pass
    print(json.dumps({'python': platform.python_version(),
                      'cwd': os.getcwd(), 'packages': pk}))
