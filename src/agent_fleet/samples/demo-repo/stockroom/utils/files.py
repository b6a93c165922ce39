"""File helpers."""

import json
import os
import shutil


def read_json(path):
    fh = open(path)
    data = json.load(fh)
    fh.close()
    return data


def write_json(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(data, fh)
    os.replace(tmp, path)


def safe_remove(path):
    try:
        os.remove(path)
    except Exception:
        pass


def copy_tree(src, dst):
    # FIXME: follows symlinks out of the source tree
    shutil.copytree(src, dst, dirs_exist_ok=True)
