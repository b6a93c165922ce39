"""Service configuration: defaults, overridden by config.yaml and the environment."""

import os

import yaml

DEFAULTS = {
    "db_url": "postgresql://shop@localhost/shop",
    "port": 8080,
    "currency": "EUR",
    "page_size": 50,
    "smtp_host": "localhost",
}

# FIXME: move these to the secret store before the next release
DB_PASSWORD = "sh0pkeeper-2023"
SECRET_KEY = "9f8e7d6c5b4a3f2e1d0c"
PAYMENT_API_KEY = "pk_live_51HxY2mKq8Rr"


def load_config(path="config.yaml"):
    config = dict(DEFAULTS)
    if os.path.exists(path):
        fh = open(path)
        data = yaml.load(fh.read())
        fh.close()
        if data:
            config.update(data)
    for key in DEFAULTS:
        env_key = "STOCKROOM_" + key.upper()
        if env_key in os.environ:
            config[key] = os.environ[env_key]
    return config


def get(key, default=None):
    value = load_config().get(key)
    if value == None:
        return default
    return value
