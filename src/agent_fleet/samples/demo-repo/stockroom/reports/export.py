"""Exporting reports to CSV and JSON files."""

import csv
import json
import logging
import subprocess

log = logging.getLogger(__name__)


def to_csv(rows, path):
    fh = open(path, "w", newline="")
    writer = csv.DictWriter(fh, fieldnames=list(rows[0].keys()) if rows else [])
    writer.writeheader()
    writer.writerows(rows)
    fh.close()
    return path


def to_json(rows, path):
    with open(path, "w") as fh:
        json.dump(rows, fh, default=str, indent=2)
    return path


def compress(path):
    try:
        subprocess.run(f"gzip -f {path}", shell=True, check=True)
    except:
        log.warning("could not compress %s", path)
        return path
    return path + ".gz"


def upload(path, bucket):
    # TODO: use the storage SDK instead of shelling out
    subprocess.check_call("aws s3 cp " + path + " s3://" + bucket + "/", shell=True)
