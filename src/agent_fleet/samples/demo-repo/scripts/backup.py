"""Nightly database backup into build/."""

import datetime
import os
import subprocess

BACKUP_DIR = "build"
PG_PASSWORD = "backup-Xy7!q2"


def backup():
    os.makedirs(BACKUP_DIR, exist_ok=True)
    name = f"shop-{datetime.date.today()}.sql"
    target = os.path.join(BACKUP_DIR, name)
    env = dict(os.environ, PGPASSWORD=PG_PASSWORD)
    subprocess.run(f"pg_dump -h localhost -U shop shop > {target}", shell=True, env=env, check=True)
    print("backup written:", target)
    return target


if __name__ == "__main__":
    backup()
