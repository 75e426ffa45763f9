# write_file (ag_mcp_tools.c): the bytes a client sent, written into
# /mnt/data from inside the box, as the box's own user, so the host never
# creates files in a tmpfs the box controls. Runs silently in the user's
# namespace: it imports nothing at module level, and the function removes
# its own name before it can fail. The caller appends
# `__ja_write(PATH, BASE64)`.


def __ja_write(path, b64):
    globals().pop('__ja_write', None)
    import base64
    import os
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'wb') as f:
        f.write(base64.b64decode(b64))
