"""The reference for `jupyter-agent run`: execute IN with nbclient and write
OUT, the way its documentation shows (a fresh kernel, python3).

    notebook_nbclient.py IN.ipynb OUT.ipynb
"""
import sys

import nbformat
from nbclient import NotebookClient


def main():
    src, dst = sys.argv[1], sys.argv[2]
    nb = nbformat.read(src, as_version=4)
    NotebookClient(nb, kernel_name="python3", timeout=60).execute()
    nbformat.write(nb, dst)


if __name__ == "__main__":
    main()
