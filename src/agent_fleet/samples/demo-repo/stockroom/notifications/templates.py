"""Message templates stored as files next to this module."""

import os
import string

TEMPLATE_DIR = os.path.join(os.path.dirname(__file__), "templates")


def load_template(name):
    fh = open(os.path.join(TEMPLATE_DIR, name), encoding="utf-8")
    text = fh.read()
    fh.close()
    return text


def render(name, defaults={}, **context):
    values = dict(defaults)
    values.update(context)
    return string.Template(load_template(name)).safe_substitute(values)


def available_templates():
    return sorted(os.listdir(TEMPLATE_DIR))
